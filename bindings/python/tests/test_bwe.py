"""Bandwidth estimation (opsel.bwe_*, document 001) against the shared golden fixture
tests/fixtures/bwe_golden.json (also used by the Rust, C and Node suites)."""

import json
import pathlib

import numpy as np
import pytest

import opsel

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures"
GOLDEN = json.loads((FIXTURES / "bwe_golden.json").read_text())
TOL = GOLDEN["tolerance"]["relative"]


def close(got, want):
    return abs(got - want) <= TOL * max(1.0, abs(want))


def spec_kwargs(s):
    return dict(n_rates=s["n_rates"], packets_per_rate=s["packets_per_rate"], range=s["range"], packet_bytes=s["packet_bytes"])


def check(a, want):
    assert close(a.abest_bps, want["abest_bps"])
    assert a.excursion_start == want["excursion_start"]
    assert (a.below_range, a.above_range) == (want["below_range"], want["above_range"])


@pytest.fixture(scope="module")
def ml():
    return opsel.BweMl(path=str(FIXTURES / GOLDEN["model_file"]), n_packets=64)


@pytest.mark.parametrize("i", range(len(GOLDEN["streams"])))
def test_streams(ml, i):
    s = GOLDEN["streams"][i]
    gs, gr = np.array(s["send_gaps_ns"]), np.array(s["recv_gaps_ns"])
    r = s["spec"]["r_avg_bps"]
    kw = spec_kwargs(s["spec"])
    check(opsel.bwe_estimate(gs, gr, r, **kw), s["bass_thesis"])
    check(opsel.bwe_estimate(gs, gr, r, thresholds="relative", reference_gap_ns=GOLDEN["reference_gap_ns"], **kw), s["bass_relative"])
    check(opsel.bwe_estimate(gs, gr, r, window="centred", **kw), s["bass_centred"])
    assert close(ml.estimate(gs, gr, r), s["ml_bps"])


def test_single_rate():
    for s in GOLDEN["single_rate"]:
        gs, gr = np.array(s["send_gaps_ns"]), np.array(s["recv_gaps_ns"])
        assert opsel.bwe_decide_single_rate(gs, gr) == s["exceeds_thesis_rule"]
        assert opsel.bwe_decide_single_rate(gs, gr, rel_tol=0.02) == s["exceeds_tol_0_02"]


def test_baselines():
    # 001 Ch 5 baselines: Pathload PCT/PDT on one-way delays, raw Pathload, IMR-avg, IMR-wavelet.
    seen = set()
    for s in GOLDEN["baselines"]:
        gs, gr = np.array(s["send_gaps_ns"]), np.array(s["recv_gaps_ns"])
        trend, pct, pdt = opsel.bwe_trend(np.cumsum(gr - gs))
        assert trend == s["owd_trend"]
        assert close(pct, s["owd_pct"]) and close(pdt, s["owd_pdt"])
        for method, key in [("pathload", "pathload"), ("imr-avg", "imr_avg"), ("imr-wavelet", "imr_wavelet_3")]:
            got = opsel.bwe_baseline(gs, gr, method=method)
            assert got == s[key], (method, got, s[key])
            seen.add(got)
        assert opsel.bwe_baseline(gs, gr) == s["imr_avg"]
    assert seen == {"increasing", "no_trend", "ambiguous"}
    gs = np.full(16, 10_000.0)
    with pytest.raises(ValueError, match="method"):
        opsel.bwe_baseline(gs, gs, method="pathchirp")
    with pytest.raises(ValueError, match="need >= 8"):
        opsel.bwe_baseline(gs, gs, method="imr-wavelet")
    with pytest.raises(ValueError, match="at least 10"):
        opsel.bwe_baseline(gs[:9], gs[:9])
    with pytest.raises(ValueError, match="at least 2"):
        opsel.bwe_trend(np.array([1.0]))


def test_pstream_and_adapter():
    want = GOLDEN["thesis_pstream_7gbps"]
    rates = opsel.pstream_rates(7e9, 4, 16, range=1.15**3 - 1)
    assert np.allclose(rates, want["rates_bps"], rtol=1e-12)
    # 001 §1.3 prints the rates to 3 decimals (6.6075 appears as 6.608): within 0.6 Mbit/s.
    assert np.allclose(rates / 1e9, [5.746, 6.608, 7.599, 8.738], rtol=0, atol=6e-4)
    gaps = opsel.pstream_send_gaps(7e9, range=1.15**3 - 1)
    assert gaps.shape == (64,) and np.allclose(gaps, want["send_gaps_ns"], rtol=1e-12)
    a = opsel.RateAdapter(init_bps=GOLDEN["adapter"]["init_bps"])
    for st in GOLDEN["adapter"]["steps"]:
        r = a.on_estimate(st["abest_bps"], st["duration_ns"])
        assert (r is not None) == st["updated"]
        assert close(a.r_avg_bps, st["r_avg_bps"])
    assert close(a.on_loss(), GOLDEN["adapter"]["after_loss_bps"])


def test_bad_input_raises_clear_errors(ml):
    gs = np.full(64, 10_329.0)
    gr = np.full(64, 10_400.0)
    with pytest.raises(ValueError, match="64 packets"):
        opsel.bwe_estimate(gs[:32], gr[:32], 7e9)
    bad = gs.copy()
    bad[3] = np.nan
    with pytest.raises(opsel.InvalidInputError, match="send gaps"):
        opsel.bwe_estimate(bad, gr, 7e9)
    with pytest.raises(opsel.InvalidInputError, match="window"):
        opsel.bwe_estimate(gs, gr, 7e9, window="sideways")
    with pytest.raises(opsel.InvalidInputError, match="r_avg_bps"):
        opsel.bwe_estimate(gs, gr, -1.0)
    with pytest.raises(opsel.InvalidInputError):
        ml.estimate(gs[:10], gr[:10], 7e9)
    with pytest.raises(opsel.InvalidInputError, match="66 features"):
        opsel.BweMl(path=str(FIXTURES / GOLDEN["model_file"]), n_packets=32)
    with pytest.raises(opsel.InvalidModelError):
        opsel.BweMl(json='{"format": "nope"}')
    with pytest.raises(opsel.OpselIOError):
        opsel.BweMl(path="/nonexistent/model.json")
    with pytest.raises(opsel.InvalidInputError, match="eta_param"):
        opsel.RateAdapter(eta_param="sometimes")


def test_shipped_fft_reim_model_reproduces_sklearn():
    """models/bwe-mr (fft-reim features, read off the feature count) through the binding:
    the estimate of raw gaps equals scikit-learn's prediction (core/tests/fixtures/bwe_mr_rx120.json)."""
    root = pathlib.Path(__file__).resolve().parents[3]
    fx = json.loads((root / "core" / "tests" / "fixtures" / "bwe_mr_rx120.json").read_text())
    ml = opsel.BweMl(path=str(root / "models" / "bwe-mr" / "mr_gbt_rx120.json"), n_packets=64)
    for i, s in enumerate(fx["streams"]):
        want = fx["expected"][i] * s["r_avg_bps"]
        got = ml.estimate(np.array(s["gs"]), np.array(s["gr"]), s["r_avg_bps"])
        assert abs(got - want) <= 1e-9 * want, (i, got, want)
    with pytest.raises(opsel.InvalidInputError, match="neither fft-magnitude"):
        opsel.BweMl(path=str(root / "models" / "bwe-mr" / "mr_gbt_rx120.json"), n_packets=32)
