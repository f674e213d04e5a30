#!/bin/sh
# The decision cache's probing savings on netlab (003 §7 item 5, H2):
# repeated `opsel send --ops` transfers toward the same /24 against a CUBIC
# and a BBR background, without and with --decision-cache (root).
# Resumable: rows already in the output directory are kept; rerun to resume.
# Writes one JSON row per transfer, the send logs and table.md.
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:-research/flows/lab-cache}
REPEATS=${REPEATS:-5}
nice -n 10 cargo build --release -p opsel-cli
exec ./target/release/opsel flows lab-cache --out "$OUT" --repeats "$REPEATS" \
    --bg cubic,bbr --seconds 70 --steady 20 --pattern S5-C5-S5-B5
