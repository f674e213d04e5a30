"""opsel example: run OPS on your own TCP connection with the driver (Python).

1. Opens a loopback TCP connection (stand-in for your bulk transfer) and a UDP
   echo responder with a 20 ms delay line (stand-in for the peer's echo port,
   e.g. `opsel recv`).
2. Builds an OpsDriver: active probing with the pattern cubic:1-silence:1-X:1
   (X = bbr when this process may set it, else reno), a Python policy, steady
   time Y = 2 s, a 5 s time limit.
3. Runs it on the socket with the GIL released, sending from a callable, and
   prints every phase, classification, CCA switch, decision latency and RTT
   sample as it happens.

Run: python examples/python/ops_driver.py tests/fixtures/ops_driver_tiny.model.json

With a real model (models/active-s5c5s5b5/model.json) use its pattern
("S5-C5-S5-B5"), the default steady time and the peer's echo address.
"""

import os
import socket
import sys
import threading
from typing import Any

import opsel


def main(model_path: str) -> int:
    srv = socket.create_server(("127.0.0.1", 0))
    conn = socket.create_connection(srv.getsockname())
    peer, _ = srv.accept()
    received = [0]

    def drain() -> None:
        while b := peer.recv(1 << 16):
            received[0] += len(b)

    t = threading.Thread(target=drain)
    t.start()

    x = "bbr" if "bbr" in opsel.available_ccas() and (os.geteuid() == 0 or "bbr" in opsel.allowed_ccas()) else "reno"
    pattern = f"cubic:1-silence:1-{x}:1"

    def policy(c: dict[str, Any]) -> str:
        # The thesis stump (000 §4.1), but keep cubic when the classifier is unsure.
        return x if c["bbr_present"] and c["confidence"] >= 0.5 else "cubic"

    def show(e: dict[str, Any]) -> None:
        k = e["kind"]
        if k == "phase":
            print(f"phase    {e['phase']} (cycle {e['cycle']})")
        elif k == "classified":
            print(f"class    {e['label']} (confidence {e['confidence']:.2f}, {e['samples']} samples)")
        elif k == "cca_set":
            print(f"cca      {e['cca']} set on the socket")
        elif k == "decision":
            print(f"decision {e['cca']} carried out {e['latency_ns'] / 1e3:.1f} us after the last RTT sample")
        elif k == "rtt":
            print(f"rtt      {e['rtt_ms']:.2f} ms" if e["rtt_ms"] is not None else "rtt      lost")

    # The data: a binary file object (open(path, "rb")), bytes, or as here a
    # callable(n) -> bytes (b"" = end); loopback is fast, so stream forever.
    chunk = os.urandom(1 << 20)

    def data(n: int) -> bytes:
        return chunk[:n]

    with opsel.UdpEchoResponder("127.0.0.1:0", delay_s=0.02) as echo:
        drv = opsel.OpsDriver(
            model_path,
            f"127.0.0.1:{echo.port}",
            mode="active",
            pattern=pattern,
            steady_s=2.0,
            policy=policy,
            # The tiny model was probed with cubic:1-silence:1-bbr:1: the
            # model/pattern check holds only when bbr can be used.
            check_model=(x == "bbr"),
            time_limit_s=5.0,
        )
        print(f"OPS with {pattern}, RTT probe toward 127.0.0.1:{echo.port}")
        rep = drv.run(conn, data, on_event=show)
    conn.shutdown(socket.SHUT_WR)
    t.join()
    conn.close()
    peer.close()
    srv.close()
    print(
        f"sent {rep['bytes_sent'] / 1e6:.1f} MB ({rep['end']}), {rep['cca_sets']} CCA switches, "
        f"{rep['stats']['decisions']} decisions; the peer received {received[0] / 1e6:.1f} MB"
    )
    return 0 if rep["bytes_sent"] == received[0] > 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
