"""opsel example: act on a live TCP socket and run the OPS controller (Python).

1. Opens a loopback TCP connection (stand-in for your bulk-transfer socket),
   switches its congestion control live and reads it back, prints TCP_INFO.
2. Sends a paced UDP probe train (100 us gaps) and reports which backend the
   sender chose (SO_TXTIME only when fq/etf enforces it) and the achieved gaps
   measured with kernel RX timestamps.
3. Takes 1 Hz RTT samples the 000 way (10 UDP echoes 1 ms apart, averaged)
   through a 30 ms delay line and feeds them to a passive OPS controller with a
   user policy written in Python; applies its set_cca actions to the socket.

Run: python examples/python/sys_ops.py tests/fixtures/knn_golden.model.json
"""

import socket
import sys
from typing import Any

import numpy as np

import opsel


def main(model_path: str) -> int:
    srv = socket.create_server(("127.0.0.1", 0))
    conn = socket.create_connection(srv.getsockname())
    peer, _ = srv.accept()

    print("available CCAs:", " ".join(opsel.available_ccas()))
    print("switched to", opsel.set_cca(conn, "bbr"), "(read back)")
    conn.sendall(b"x" * 100_000)
    peer.recv(1 << 20)
    info = opsel.tcp_info(conn)
    print(f"TCP_INFO: srtt {info['rtt_us']} us, cwnd {info['snd_cwnd']}, bytes_acked {info['bytes_acked']}")

    rx = opsel.ProbeReceiver("127.0.0.1:0")
    tx = opsel.PacedSender(f"127.0.0.1:{rx.port}")
    print(f"paced sender backend: {tx.backend} ({tx.txtime['reason']})")
    report = tx.send_train(np.arange(100, dtype=np.int64) * 100_000, payload_len=1200)
    got = rx.recv_train(100)
    gaps_us = np.diff(got["rx_ns"].astype(np.int64)) / 1e3
    print(f"train of 100 packets, 100 us apart: received {len(got['seq'])}, "
          f"median RX gap {np.median(gaps_us):.1f} us, p99 |error| {np.percentile(np.abs(gaps_us - 100), 99):.1f} us, "
          f"departures TX-stamped {report['tx_stamped']}/100")

    opsel.set_cca(conn, "cubic")  # the controller assumes its initial CCA

    def policy(c: dict[str, Any]) -> str:
        # A user policy: the thesis stump, but keep cubic when the classifier is unsure.
        return "bbr" if c["bbr_present"] and c["confidence"] >= 0.5 else "cubic"

    ctl = opsel.Controller(model_path, mode="passive", steady_s=60, policy=policy)
    decided = None
    with opsel.UdpEchoResponder("127.0.0.1:0", delay_s=0.030) as resp:
        prober = opsel.UdpEchoProber(f"127.0.0.1:{resp.port}")
        ctl.start(0)
        for t in range(1, 41):  # time compressed: one sample per simulated second
            sample = prober.burst()  # 10 echoes 1 ms apart -> one 1 Hz sample (000 §3.2)
            now = t * 1_000_000_000
            ctl.handle_timeout(now)
            ctl.handle_sample(now, sample["mean_rtt_ms"])
            for o in ctl.drain():
                if o["kind"] == "set_cca":
                    print(f"t={t:2d}s set_cca -> socket now {opsel.set_cca(conn, o['cca'])}")
                elif o["kind"] == "classified":
                    print(f"t={t:2d}s window classified as {o['label']} (confidence {o['confidence']:.2f})")
                elif o["kind"] == "selected":
                    print(f"t={t:2d}s policy chose {o['cca']} for {o['steady_ns'] / 1e9:.0f} s")
                    decided = o["cca"]
            if decided:
                break
    print("socket CCA at the end:", opsel.get_cca(conn))
    print("Jain's index of (250, 250) Mbit/s:", opsel.jain([250.0, 250.0]))
    conn.close()
    peer.close()
    srv.close()
    return 0 if decided else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python examples/python/sys_ops.py MODEL.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
