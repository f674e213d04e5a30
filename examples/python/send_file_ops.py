"""opsel example: send a file with OPS choosing the congestion control (Python).

1. Starts a receiver (opsel.recv_file) on a loopback listener in a thread; it
   also answers the sender's UDP RTT echoes on its port.
2. Sends a 64 MiB file with opsel.send_file and an "ops" spec: OPS probes the
   path, classifies the background mix, picks a CCA and sets it on the live
   connection. An opsel.Stop raised by a timer ends the send early if it is
   still running after $STOP_AFTER_S seconds (default 30); the receiver keeps the
   bytes sent as a verified prefix (resume with {"resume": True}).
3. Prints the decisions and the CCAs used (report["ops"]) and each event the
   on_event callback saw.

Run: python examples/python/send_file_ops.py tests/fixtures/ops_send_silent.model.json S3
(a tiny model whose probe is 3 silent RTT samples: one decision, then the file).
Without arguments it uses the shipped passive model ("default"), whose first
decision needs a 40 s window: on loopback the file is sent before that.
"""

import os
import socket
import sys
import tempfile
import threading
from typing import Any

import opsel


def main(model: str, pattern: str, stop_after_s: float) -> int:
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "src.bin"), os.path.join(d, "dst.bin")
        with open(src, "wb") as f:
            for i in range(64):
                f.write(bytes([i]) * (1 << 20))
        lst = socket.create_server(("127.0.0.1", 0))
        received: dict[str, Any] = {}
        rx = threading.Thread(target=lambda: received.update(opsel.recv_file(lst, dst, {"idle_s": 60})))
        rx.start()

        ops: dict[str, Any] = {"model": model}
        if pattern != "passive":
            # An active pattern: probe, decide, then send the rest with the
            # chosen CCA (steady_s 0: one decision); a table policy keeps the
            # example independent of which CCAs this host may set.
            ops.update(pattern=pattern, steady_s=0, lead_in=False, policy="*=reno")
        stop = opsel.Stop()
        timer = threading.Timer(stop_after_s, stop.set)
        timer.start()

        def on_event(e: dict[str, Any]) -> None:
            if e.get("kind") in ("cca_set", "classified", "selected"):
                print("event:", {k: v for k, v in e.items() if k in ("kind", "cca", "mix", "confidence", "samples")})

        with socket.create_connection(lst.getsockname()) as s:
            report = opsel.send_file(s, src, {"ops": ops}, stop=stop, on_event=on_event)
        timer.cancel()
        rx.join()
        lst.close()
        n = report["driver"]["bytes_sent"]
        print(f"sent {n} bytes, end: {report['driver']['end']}, complete: {report['complete']}")
        for dec in report["ops"]["decisions"]:
            print(f"decision: {dec['class']} (confidence {dec['confidence']:.2f}, {dec['samples']} samples) -> {dec['cca']}")
        print("CCAs used:", " -> ".join(report["ops"]["ccas"]))
        print(f"receiver: verified {received['verified']}, kept {received['file_size']} bytes")
        return 0 if received["verified"] else 1


if __name__ == "__main__":
    model = sys.argv[1] if len(sys.argv) > 1 else "default"
    pattern = sys.argv[2] if len(sys.argv) > 2 else "passive"
    sys.exit(main(model, pattern, float(os.environ.get("STOP_AFTER_S", "30"))))
