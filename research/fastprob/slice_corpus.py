"""Write the first N transfers (seq 0..N-1, i.e. transfers 1..N) of a recorded plan's
folder to one JSON-lines file, reading only complete lines, so that a folder whose last
segment is still being appended to gives the same file as a finished one. Fails unless
every seq below N is present exactly once.

    python research/fastprob/slice_corpus.py data/tput-logs/fastprob-100ms --upto 3600 -o corpus3600.jsonl
"""

import argparse
import glob
import gzip
import json
import os
import sys


def lines(folder):
    for p in sorted(glob.glob(os.path.join(folder, "transfers-*.jsonl.gz"))):
        with gzip.open(p, "rt") as f:
            yield from f
    tail = os.path.join(folder, "transfers.jsonl")
    if os.path.exists(tail):
        with open(tail) as f:
            for line in f:
                if line.endswith("\n"):  # a line still being written has no newline yet
                    yield line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--upto", type=int, required=True, help="N: keep transfers with seq < N")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    keep = {}
    for line in lines(a.folder):
        if not line.strip():
            continue
        seq = json.loads(line)["seq"]
        if seq < a.upto:
            if seq in keep:
                sys.exit(f"seq {seq} twice")
            keep[seq] = line
    missing = [s for s in range(a.upto) if s not in keep]
    if missing:
        sys.exit(f"{len(missing)} of {a.upto} transfers missing (first seq {missing[0]}); not complete yet")
    with open(a.out, "w") as f:
        for s in range(a.upto):
            f.write(keep[s])
    print(f"wrote transfers 1-{a.upto} to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
