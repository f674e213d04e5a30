"""opsel.AlphaIdentifier, opsel.QosPlan and opsel.DecisionCache: document
003 through thin conversions into opsel::flows. The expected values are the
document's definitions worked by hand: eq 3.1 (an α report has >= H
sampling-corrected bytes), eq 3.2 (α-bytes sum) and eq 3.3 (α-time is the
union of the α-intervals, overlaps merged)."""

import sys

import numpy as np
import pytest

import opsel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux bindings")

S = 1_000_000_000
DAY = 86_400 * S


def record(src, dst, sampled_bytes, first_s, last_s, n=1000, sport=40000, dport=2811):
    return {
        "src_addr": src, "dst_addr": dst, "src_port": sport, "dst_port": dport, "proto": 6,
        "bytes": sampled_bytes, "packets": max(1, sampled_bytes // 1500),
        "first_ns": first_s * S, "last_ns": last_s * S, "sampling_interval": n,
    }


def test_alpha_reports_bytes_and_time_as_003_defines_them():
    ident = opsel.AlphaIdentifier()
    assert ident.spec["h_bytes"] == 1_000_000_000 and ident.spec["prefix_len_v4"] == 24
    # 1.5 MB sampled at 1-in-1000 = 1.5 GB >= H: alpha (eq 3.1).
    assert ident.push(record("10.1.2.3", "10.9.9.9", 1_500_000, 0, 60))
    # The same /24 pair, overlapping in time: merged α-time (eq 3.3).
    assert ident.push(record("10.1.2.77", "10.9.9.1", 2_000_000, 30, 90, sport=40001))
    # 0.5 GB corrected: not alpha.
    assert not ident.push(record("10.1.2.3", "10.9.9.9", 500_000, 100, 200, sport=40002))
    # Next day, another pair.
    assert ident.push(record("192.0.2.1", "198.51.100.1", 1_000_000, 86_400 + 10, 86_400 + 20))
    days = ident.finish()
    assert [d["day"] for d in days] == [0, 1]
    d0 = days[0]
    assert d0["reports"] == 3 and d0["alpha_reports"] == 2 and len(d0["alpha_flows"]) == 2
    (pf,) = d0["prefix_flows"]
    assert pf["id"] == {"src": "10.1.2.0/24", "dst": "10.9.9.0/24"}
    assert pf["alpha_bytes"] == 1_500_000_000 + 2_000_000_000  # eq 3.2
    assert pf["alpha_time_ns"] == 90 * S  # [0, 60] ∪ [30, 90] (eq 3.3)
    assert d0["est_bytes"] == 4_000_000_000
    with pytest.raises(opsel.InvalidInputError, match="finish"):
        ident.push(record("10.1.2.3", "10.9.9.9", 1, 0, 1))


def test_columns_from_numpy_arrays_give_the_same_days():
    recs = [record(f"10.0.{i % 3}.{i}", "10.200.0.1", (i + 1) * 400_000, i * 100, i * 100 + 50, sport=i)
            for i in range(30)]
    one = opsel.AlphaIdentifier({"prefix_len_v4": 24})
    for r in recs:
        one.push(r)
    cols = opsel.AlphaIdentifier({"prefix_len_v4": 24})
    col = lambda k, dt: np.array([r[k] for r in recs], dtype=dt)  # noqa: E731
    n_alpha = cols.push_columns(
        [r["src_addr"] for r in recs], [r["dst_addr"] for r in recs],
        col("src_port", np.uint16), col("dst_port", np.uint16), col("proto", np.uint8),
        col("bytes", np.uint64), col("packets", np.uint64), col("first_ns", np.uint64),
        col("last_ns", np.uint64), col("sampling_interval", np.uint32),
    )
    assert n_alpha == sum(r["bytes"] * 1000 >= 1_000_000_000 for r in recs)
    assert cols.finish() == one.finish()
    with pytest.raises(opsel.InvalidInputError, match="different lengths"):
        opsel.AlphaIdentifier().push_columns(["10.0.0.1"], [], [], [], [], [], [], [], [], [])
    with pytest.raises(opsel.InvalidInputError, match="not an IPv4"):
        opsel.AlphaIdentifier().push_columns(["nope"], ["10.0.0.1"], [1], [2], [6], [1], [1], [0], [1], [1])


def test_bad_specs_and_records():
    with pytest.raises(opsel.InvalidInputError, match="prefix_len_v4"):
        opsel.AlphaIdentifier({"prefix_len_v4": 40})
    with pytest.raises(opsel.InvalidInputError, match="bogus"):
        opsel.AlphaIdentifier({"bogus": 1})
    with pytest.raises(opsel.InvalidInputError):
        opsel.AlphaIdentifier().push(record("10.0.0.1", "10.0.0.2", 1, 50, 10))  # last before first


def test_qos_plan_has_two_classes_and_a_filter_per_prefix():
    plan = opsel.QosPlan(["10.1.2.0/24 -> 10.9.9.0/24", "192.0.2.0/24 198.51.100.0/24"],
                         "default", link_rate_bps=100_000_000)
    d = plan.to_dict()
    assert d["default_class"] == "1:20"
    assert {c["classid"] for c in d["classes"]} >= {"1:10", "1:20"}
    assert len(d["filters"]) == 2
    cmds = plan.commands("eth0", netns="lab")
    # Argument lists for tc, each in the namespace.
    assert all(c[:2] == ["-n", "lab"] for c in cmds)
    assert cmds[0][2:] == ["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "20"]
    assert sum("u32" in c for c in cmds) == 2
    assert "tc " in plan.script("eth0")
    low = opsel.QosPlan(["10.1.2.0/24 -> 10.9.9.0/24"], {"link_rate_bps": 10**9, "alpha_share": 0.8})
    assert any("30" in n for n in low.notes), low.notes
    with pytest.raises(opsel.InvalidInputError, match="preset"):
        opsel.QosPlan([], "fast")
    with pytest.raises(opsel.InvalidInputError, match="line 1"):
        opsel.QosPlan(["10.1.2.0/24"], "default", link_rate_bps=10**8)


def test_decision_cache_round_trip(tmp_path):
    c = opsel.DecisionCache()
    c.record("10.1.2.3", "B1-C1", "bbr", 0.9, 1000.0)
    hit = c.lookup("10.1.2.200", 1000.0 + 3600)
    assert hit == {"prefix": "10.1.2.0/24", "label": "B1-C1", "cca": "bbr", "confidence": 0.9,
                   "at_s": 1000.0, "age_s": 3600.0}
    assert c.lookup("10.1.3.1", 1001.0) is None
    assert c.lookup("10.1.2.3", 1000.0 + 30 * 86_400) is None  # aged out
    path = tmp_path / "cache.json"
    c.save(path, 2000.0)
    back = opsel.DecisionCache.load(path)
    assert len(back) == 1 and back.lookup("10.1.2.9", 2000.0)["cca"] == "bbr"
    path.write_text("{broken")
    with pytest.raises(opsel.InvalidInputError, match="left as it is"):
        opsel.DecisionCache.load(path)
    assert path.read_text() == "{broken"
    assert len(opsel.DecisionCache.load(tmp_path / "new.json")) == 0
    with pytest.raises(opsel.InvalidInputError, match="confidence"):
        c.record("10.1.2.3", "B1-C1", "bbr", 1.5, 0.0)
    assert c.forget("10.1.2.1") and len(c) == 0


FLOWS = __import__("pathlib").Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "flows"


def test_read_nfcapd_agrees_with_nfdump(tmp_path):
    # A file written by the real nfcapd (tests/fixtures/flows/README.md), read beside what
    # nfdump itself printed for it: every record, in file order.
    recs = opsel.read_nfcapd(FLOWS / "nfcapd.sample")
    import json

    want = json.loads((FLOWS / "nfcapd.sample.nfdump.json").read_text())["records"]
    got = [{k: r[k] for k in ("src_addr", "dst_addr", "src_port", "dst_port", "proto", "packets", "bytes")}
           for r in recs]
    assert got == want
    # The records are what AlphaIdentifier.push takes.
    ident = opsel.AlphaIdentifier()
    for r in recs:
        ident.push(r)
    bad = tmp_path / "not-nfcapd"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(opsel.InvalidInputError, match="not an nfdump file"):
        opsel.read_nfcapd(bad)
    with pytest.raises(opsel.OpselIOError, match="missing"):
        opsel.read_nfcapd(tmp_path / "missing")
