"""Summarise `opsel lab fastprob-ab --json` files: per method the mean probe time,
each candidate's mean probe samples, estimate and share of forced stops, the
choices, agreement with the fixed-length choice, and the throughput measured
after the choice. Run::

    python research/fastprob/ab_summary.py ab-*.json
"""

import json
import statistics as st
import sys


def main(paths):
    for p in paths:
        d = json.load(open(p))
        c = d["conditions"]
        ev = d["evaluations"]
        print(f"## {c['rate_mbps']} Mbit/s, {c['rtt_ms']} ms, {c['buffer_bdp']} BDP, background {c['background']}, "
              f"class {c['class']}: {len(ev)} evaluations")
        agree = sum(e["fastprob"]["outcome"]["chosen"] == e["fixed"]["outcome"]["chosen"] for e in ev)
        for m in ("fastprob", "fixed"):
            probe = st.mean(e[m]["outcome"]["total_probe_ns"] / 1e9 for e in ev)
            after = [e[m]["steady_bps"] / 1e6 for e in ev]
            per = []
            for i, cca in enumerate(c["candidates"]):
                rs = [e[m]["outcome"]["candidates"][i] for e in ev]
                rs = [r for r in rs if r["probed"]]
                if not rs:
                    per.append(f"{cca}: not probed")
                    continue
                per.append(f"{cca}: {st.mean(r['estimate_bps'] for r in rs) / 1e6:.1f} Mbit/s after "
                           f"{st.mean(r['samples'] for r in rs):.1f} samples, forced {sum(r['forced'] for r in rs)}/{len(rs)}")
            chosen = {cca: sum(e[m]["outcome"]["chosen"] == cca for e in ev) for cca in c["candidates"]}
            print(f"- {m}: probe {probe:.2f} s; {'; '.join(per)}; chosen {chosen}; "
                  f"after the choice {st.mean(after):.1f} Mbit/s (sd {st.pstdev(after):.1f})")
        print(f"- agreement: {agree} of {len(ev)}")


if __name__ == "__main__":
    main(sys.argv[1:])
