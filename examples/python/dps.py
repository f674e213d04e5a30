"""DPS (document 002) in Python: two flows on one host share a 10 Mbit/s,
40 ms path; each flow's DpsAgent learns which CCA meets its QoS, and a
FairManager unlocks one flow at a time (Alg 4). The path is a toy model
(per-CCA RTT and throughput, BBR taking a larger share against CUBIC) so the
example runs anywhere in a second; on a real socket, feed TCP_INFO's RTT and
delivery rate instead and apply each "set_cca" with opsel.set_cca.

    python examples/python/dps.py
"""

from typing import Any, Optional

import opsel

S = 1_000_000_000
SPEC: dict[str, Any] = {
    "ccas": ["cubic", "bbr"],
    # 002 Table 5.2, time-scaled by 10: T = 6 s, t = 3 s.
    "metrics": [
        {"metric": "rtt_ms", "range": [0, 300, 0, 350], "priority": 0.4},
        {"metric": "throughput_mbps", "range": [4.0, None, 3.0, None], "priority": 0.6},
    ],
    "selection_period_ms": 6000,
    "random_period_ms": 3000,
}


def path(ccas: list[Optional[str]]) -> list[tuple[float, float]]:
    """Per-flow (rtt_ms, mbps) on a 10 Mbit/s link for the CCAs in use."""
    share = {"cubic": 1.0, "bbr": 1.6}
    weights = [share.get(c, 1.0) if c else 0.0 for c in ccas]
    total = sum(weights) or 1.0
    rtt = 120.0 if "cubic" in ccas else 60.0
    return [(rtt, 10.0 * w / total) for w in weights]


def main() -> None:
    manager = opsel.FairManager({"f_thresh": 0.8})
    agents = [opsel.DpsAgent({**SPEC, "seed": i + 1}, managed=True) for i in range(2)]
    ccas: list[Optional[str]] = [None, None]
    for i, a in enumerate(agents):
        manager.register(i)
        a.start(0)
    for t in range(1, 121):
        while (msg := manager.poll()) is not None:
            flow, command = msg
            agents[flow].handle_command(t * S, command)
        for i, a in enumerate(agents):
            while (out := a.poll()) is not None:
                if out["kind"] == "set_cca":
                    ccas[i] = out["cca"]
                elif out["kind"] == "report":
                    manager.handle_report(i, out)
        for i, (rtt, mbps) in enumerate(path(ccas)):
            if ccas[i]:
                agents[i].feedback(t * S, rtt, mbps)
                manager.report_rate(i, mbps)
        manager.evaluate()
    for i, a in enumerate(agents):
        print(f"flow {i}: {a.current}, learning={a.learning}, {a.stats()['periods']} periods")
    print(f"manager: {manager.stats()}, last Jain {manager.last_jain:.3f}")


if __name__ == "__main__":
    main()
