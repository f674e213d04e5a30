"""opsel.train (trace loading, aligned windows, CV, baselines, generalisation,
model export) and opsel.plot, on a small fixture of real netlab traces
(tests/fixtures/traces: a few windows per class, copied from an
`opsel lab collect` run), plus the shipped models in models/."""

import json
import os
import shutil

import numpy as np
import pytest

import opsel
from opsel import plot
from opsel.train import classifier, grid, knn
from opsel.train import __main__ as cli
from opsel_eval import __main__ as evaluation
from opsel_eval import cycles, diagnose, plots
from opsel.train.data import (CSV_HEADER, SIX_CLASSES, at_1hz, dataset, find_traces, find_traces_dir, read_trace,
                              trace_windows)

HERE = os.path.dirname(__file__)
FIX = os.path.join(HERE, "fixtures", "traces")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def write_trace(path, rows, pattern=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(CSV_HEADER + "\n")
        for run, k, rtt in rows:
            r = "" if rtt is None else f"{rtt:.3f}"
            ans = 0 if rtt is None else 10
            cyc = f"{k // 20},{k % 20}" if pattern else ","
            f.write(f"{run},{k},1.0,{r},{r},{r},{ans},{cyc},-\n")
    if pattern:
        with open(os.path.splitext(path)[0] + ".json", "w") as f:
            json.dump({"conditions": {"pattern": pattern}, "runs": [{"base_rtt_ms": [65.2, 65.4]}]}, f)


def test_read_trace_labels_and_torn_line(tmp_path):
    p = tmp_path / "default" / "passive" / "B1-C1.csv"
    write_trace(str(p), [(0, k, 70.0 + k) for k in range(25)])
    with open(p, "a") as f:
        f.write("0,25,1.0,9")  # crash mid-write
    t = read_trace(str(p))
    assert (t.condition, t.mode, t.label) == ("default", "passive", "B1-C1")
    assert len(t.k) == 25 and t.rtt_ms[3] == 73.0
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="header"):
        read_trace(str(bad))


def test_passive_windows_per_run_skip_lost_samples(tmp_path):
    p = str(tmp_path / "B0-C0.csv")
    rows = [(0, k, 65.0 + k) for k in range(45)]  # 2 windows of 20, 5 left over
    rows += [(1, k, None if k == 3 else 66.0) for k in range(40)]  # first window has a lost sample
    write_trace(p, rows)
    X = trace_windows(read_trace(p), 20)
    assert X.shape == (3, 20)
    assert X[1][0] == 85.0  # run 0, window 1 starts at k = 20
    assert np.all(X[2] == 66.0)
    # Leftovers of run 0 never join run 1.
    assert trace_windows(read_trace(p), 45).shape == (1, 45)


def test_a_200ms_trace_read_at_1hz_is_every_fifth_sample(tmp_path):
    p = tmp_path / "r25-d40-b0.25" / "passive-200ms" / "B0-C1.csv"
    # Two runs of 10 s at 200 ms; sample k of run r is 40 + r + k / 100 ms; run 0 lost k = 7.
    write_trace(str(p), [(r, k, None if (r, k) == (0, 7) else 40.0 + r + k / 100) for r in (0, 1) for k in range(50)])
    with open(os.path.splitext(p)[0] + ".json", "w") as f:
        json.dump({"conditions": {"probe": {"sample_interval_ms": 200.0}}, "runs": []}, f)
    t = read_trace(str(p))
    assert t.sample_interval_ms == 200.0
    one = at_1hz(t)
    assert one.sample_interval_ms == 1000.0 and one.stride == 5
    assert list(one.k[:10]) == list(range(10)) and len(one.k) == 20
    # Sample k = 5 s of run 1 is recorded sample 25: 40 + 1 + 0.25.
    assert one.rtt_ms[10 + 5] == pytest.approx(41.25)
    X = trace_windows(one, 10)
    assert X.shape == (2, 10) and X[0][2] == pytest.approx(40.10)
    # The lost sample is not on the 1 Hz grid: both 1 Hz windows stand, one of the 200-ms ones.
    assert trace_windows(t, 50).shape == (1, 50)
    # A 1 Hz trace is its own 1 Hz series.
    q = tmp_path / "default" / "passive" / "B0-C0.csv"
    write_trace(str(q), [(0, k, 65.0) for k in range(20)])
    assert at_1hz(read_trace(str(q))).stride == 1


def test_active_windows_align_to_the_pattern(tmp_path):
    p = str(tmp_path / "B1-C0.csv")
    write_trace(p, [(0, k, float(k)) for k in range(1, 101)] and [(0, k, 100.0 + k) for k in range(100)],
                pattern="S5-C5-S5-B5")
    t = read_trace(p)
    assert t.pattern_len == 20
    X20 = trace_windows(t, 20)
    assert X20.shape == (5, 20) and X20[1][0] == 120.0
    X5 = trace_windows(t, 5)  # the first segment of every cycle
    assert X5.shape == (5, 5) and [x[0] for x in X5] == [100.0, 120.0, 140.0, 160.0, 180.0]
    X50 = trace_windows(t, 50)  # 3-cycle blocks
    assert X50.shape == (1, 50) and X50[0][0] == 100.0
    assert trace_windows(t, 20, aligned=False).shape == (5, 20)


def test_normalisations_match_the_core():
    rng = np.random.default_rng(3)
    X = 65 + 30 * rng.random((7, 20))
    X[0] = 70.0  # constant window: z-score gives zeros
    for m in knn.NORMALIZATIONS:
        ours = classifier.normalize_windows(X, m)
        core = np.array([opsel.normalize(x, m) for x in X])
        np.testing.assert_allclose(ours, core, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError):
        classifier.normalize_windows(X, "nope")


def test_metrics_and_derived_views_golden():
    classes = list(SIX_CLASSES)
    conf = np.diag([10] * 6)
    conf[2, 3] = 5  # B1-C0 taken for B1-C1: BBR present either way
    conf[1, 4] = 5  # B0-C1 taken for B1-B1: a BBR-present error
    m = {r["class"]: r for r in knn.per_class_metrics(conf, classes)}
    assert m["B1-C1"]["precision"] == pytest.approx(10 / 15)
    assert m["B0-C1"]["recall"] == pytest.approx(10 / 15)
    assert m["B0-C0"]["f1"] == 1.0 and m["B0-C0"]["support"] == 10
    v = knn.derived_views(conf, classes)
    assert v["bbr_present"]["accuracy"] == pytest.approx(65 / 70)
    assert v["bbr_present"]["confusion"] == [[30, 5], [0, 35]]
    # heterogeneous = B1-C1 only: the B1-C0 -> B1-C1 errors count, B0-C1 -> B1-B1 does not.
    assert v["heterogeneous"]["accuracy"] == pytest.approx(65 / 70)
    assert knn.bbr_present("B1-B1") and not knn.bbr_present("C1-C1")
    assert knn.heterogeneous("B1-C1") and not knn.heterogeneous("B0-C0")


@pytest.fixture(scope="module")
def passive():
    tr = find_traces(FIX, "default", "passive")
    assert [t.label for t in tr] == list(SIX_CLASSES)
    return tr


def test_fixture_windows_and_cv(passive):
    X, y = dataset(passive, 20)
    assert X.shape[1] == 20 and sorted(set(y)) == sorted(SIX_CLASSES)
    r = knn.cv_knn(X, y, k=1, radius=10, folds=2)
    assert 0.0 <= r["accuracy"] <= 1.0
    assert np.sum(r["confusion"]) == len(y)
    assert set(r["views"]) == {"bbr_present", "heterogeneous"}
    rows = knn.sweep(passive, ws=(10, 20), ks=(1, 3), normalizations=("none", "z-score"), folds=2)
    assert len(rows) == 8 and {r["w"] for r in rows} == {10, 20}
    # Too few windows per class for 5 folds at w = 60: skipped, not an error.
    assert knn.sweep(passive, ws=(60,), folds=5) == []


def test_baselines_run_on_the_fixture(passive):
    X, y = dataset(passive, 10)
    for name in ("gnb", "svm"):
        r = classifier.cv_baseline(X, y, name, folds=2)
        assert 0.0 <= r["accuracy"] <= 1.0 and np.sum(r["confusion"]) == len(y)
    with pytest.raises(ValueError):
        classifier.make_baseline("tree")


def test_generalise_and_model_roundtrip(passive, tmp_path):
    other = find_traces(FIX, "c50", "passive")
    rows = knn.generalise(passive, other, w=10)
    assert [r["normalization"] for r in rows] == list(knn.NORMALIZATIONS)
    assert all(r["n"] == len(dataset(other, 10, balance=True)[1]) for r in rows)
    X, y = dataset(passive, 20)
    clf = knn.fit(X, y, normalization="subtract-min", training={"condition": "default"})
    path = str(tmp_path / "m.json")
    clf.save(path)
    m = opsel.load_model(path)
    assert m.window == 20 and m.normalization == "subtract-min"
    assert [m.classify(x).label for x in X] == list(y)  # 1-NN: each window is its own neighbour


def test_plots_write_pngs(passive, tmp_path):
    X, y = dataset(passive, 20)
    r = knn.cv_knn(X, y, folds=2)
    rows = [{"model": "1-NN", "normalization": "none", "w": w, "accuracy": a} for w, a in ((10, 0.5), (20, 0.7))]
    for path in (
        plot.rtt_signatures(passive, str(tmp_path / "sig.png")),
        plot.accuracy_vs_w(rows, str(tmp_path / "acc.png")),
        plot.confusion(r["confusion"], r["classes"], str(tmp_path / "conf.png"), title="t"),
    ):
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_models_retrains_from_a_collection(tmp_path, capsys):
    root = tmp_path / "collect"
    shutil.copytree(FIX, root)
    models = tmp_path / "models"
    cli.main(["models", str(root), "--models", str(models), "--ws", "10,20", "--report", str(tmp_path / "r.json"),
              "--select-seeds", "0"])
    w60 = opsel.load_model(str(models / "active-s5c5s5b5-w60" / "model.json"))
    assert w60.window == 60 and w60.training["traces"] == "models/active-s5c5s5b5/traces/default"
    assert len(w60.labels) == 6  # the fixture has one 3-cycle window per class
    assert "3 pattern cycles" in (models / "active-s5c5s5b5-w60" / "MODEL_CARD.md").read_text()
    for name in ("passive-netlab", "active-s5c5s5b5"):
        m = opsel.load_model(str(models / name / "model.json"))
        assert m.window == 20
        card = (models / name / "MODEL_CARD.md").read_text()
        assert "0.5 × BDP" in card
        assert (models / name / "confusion.png").exists()
        assert (models / name / "traces" / "default" / "B1-C1.csv").exists()
    assert opsel.load_model(str(models / "passive-netlab" / "model.json")).normalization == "none"
    assert not (models / "passive").exists()  # the default passive model is built by `grid`
    rep = json.loads((tmp_path / "r.json").read_text())
    # No active traces at c50 in the fixture: the active model takes the grid's passive choice.
    assert rep["normalizations"] == {"active-s5c5s5b5": "divide-min"}
    # k and radius chosen by CV where 5 folds fit (5 windows/class at w = 20), the shipped model carries them;
    # the w = 60 model (1 window/class) keeps the thesis's 1-NN, radius 10.
    act = rep["models"]["active-s5c5s5b5"]
    assert len(act["selection"]) == 4 * 2  # k in 1, 3, 5, 10; radius 0 and 10
    best = max(act["selection"], key=lambda r: r["accuracy"])
    mine = next(r for r in act["selection"] if (r["k"], r["radius"]) == (act["k"], act["radius"]))
    assert mine["chosen"] and mine["within_1se"] and mine["accuracy"] >= best["accuracy"] - best["se"] - 1e-12
    ma = opsel.load_model(str(models / "active-s5c5s5b5" / "model.json"))
    assert (ma.k, ma.radius) == (act["k"], act["radius"])
    assert ma.training["k_radius_choice"]["k"] == act["k"]
    assert "How k and the radius were chosen" in (models / "active-s5c5s5b5" / "MODEL_CARD.md").read_text()
    assert (rep["models"]["active-s5c5s5b5-w60"]["k"], rep["models"]["active-s5c5s5b5-w60"]["radius"]) == (1, 10)
    # Retrain without a collection root: from the copies in models/*/traces.
    cli.main(["models", "--models", str(models), "--ws", "20", "--norm", "none"])
    assert opsel.load_model(str(models / "active-s5c5s5b5" / "model.json")).normalization == "none"
    cli.main(["summary", str(root)])
    assert "default/passive" in capsys.readouterr().out


@pytest.mark.parametrize("name,probing,w", [("passive-netlab", "passive", 20), ("active-s5c5s5b5", "active", 20),
                                            ("active-s5c5s5b5-w60", "active", 60)])
def test_shipped_models_classify_their_own_traces(name, probing, w):
    d = os.path.join(REPO, "models", name)
    if not os.path.exists(os.path.join(d, "model.json")):
        pytest.skip(f"models/{name} not in this checkout")
    m = opsel.load_model(os.path.join(d, "model.json"))
    assert m.window == w and sorted(m.classes) == sorted(SIX_CLASSES) and m.probing == probing
    cond = "default"
    shared = (m.training or {}).get("traces")
    tdir = os.path.join(REPO, shared) if shared else os.path.join(d, "traces", cond)
    tr = find_traces(tdir, ".", ".")
    assert [t.label for t in tr] == list(SIX_CLASSES)
    X, y = dataset(tr, w)
    assert len(y) == len(m.labels) if hasattr(m, "labels") else True
    preds = m.classify_batch(X)
    assert all(p.distance == 0.0 for p in preds)  # every window is a reference: its own nearest neighbour
    pred = [p.label for p in preds]
    if m.k == 1:
        assert pred == list(y)
    else:  # the vote may overrule the window itself, but not below the recorded CV accuracy
        assert np.mean(np.array(pred) == y) >= m.training["cv_accuracy_w"]


def _rewrite_condition(src, dst, rows, conditions):
    """A copy of a passive condition's traces: each CSV row (as its fields) becomes the rows
    ``rows(fields)`` returns, and each side-car's ``conditions`` goes through ``conditions(dict)``."""
    os.makedirs(dst, exist_ok=True)
    for f in sorted(os.listdir(src)):
        if f.endswith(".csv"):
            with open(os.path.join(src, f)) as fi, open(os.path.join(dst, f), "w") as fo:
                fo.write(fi.readline())
                for line in fi:
                    for r in rows(line.rstrip("\n").split(",")):
                        fo.write(",".join(r) + "\n")
        elif f.endswith(".json"):
            meta = json.load(open(os.path.join(src, f)))
            conditions(meta.setdefault("conditions", {}))
            json.dump(meta, open(os.path.join(dst, f), "w"))


def _scaled_condition(src, dst, factor, name):
    """A copy of a passive condition with every RTT scaled (another network's amplitude) and its
    side-cars saying so."""
    def rows(c):
        for i in (3, 4, 5):
            if c[i]:
                c[i] = f"{float(c[i]) * factor:.3f}"
        return [c]

    _rewrite_condition(src, dst, rows, lambda m: m.update(rtt_ms=65.0 * factor, rate_mbps=100.0,
                                                          buffer_bytes=406250.0 * factor))


def _at_200ms(src, dst):
    """A 1 Hz passive condition as if recorded every 200 ms: each sample k becomes sample 5 k, and
    the four samples between two seconds get other values (the 1 Hz reading must skip them)."""
    def rows(c):
        out = []
        for j in range(5):
            d = list(c)
            d[1] = str(5 * int(c[1]) + j)
            if j and d[3]:
                d[3] = f"{float(d[3]) * 7:.3f}"
            out.append(d)
        return out

    _rewrite_condition(src, dst, rows, lambda m: m.update(probe={"sample_interval_ms": 200.0}))


def test_grid_pools_conditions_and_scores_each_held_out(tmp_path, capsys):
    root = tmp_path / "collect"
    shutil.copytree(os.path.join(FIX, "default"), root / "default")
    _scaled_condition(os.path.join(FIX, "default", "passive"), str(root / "x2" / "passive"), 2.0, "x2")
    _scaled_condition(os.path.join(FIX, "default", "passive"), str(tmp_path / "x3-1hz"), 3.0, "x3")
    # x3 exists only as a 200-ms recording: it joins the grid read at 1 Hz.
    _at_200ms(str(tmp_path / "x3-1hz"), str(root / "x3" / "passive-200ms"))
    out = tmp_path / "grid"
    cli.main(["grid", str(root), "--mode", "passive", "--w", "10", "--radius", "5", "--min-windows", "1",
              "--out", str(out), "--json", str(tmp_path / "loco.json")])
    m = opsel.load_model(str(out / "model.json"))
    assert (m.window, m.normalization, m.probing) == (10, "divide-min", "passive")
    assert [c["condition"] for c in m.training["conditions"]] == ["default", "x2", "x3"]
    loco = json.loads((tmp_path / "loco.json").read_text())["loco"]
    assert set(loco) == {"default", "x2", "x3"}
    shutil.copytree(str(tmp_path / "x3-1hz"), root / "x3" / "passive")
    shutil.rmtree(root / "x3" / "passive-200ms")
    # The three conditions differ only by an RTT scale, which divide-min removes: each held-out one is
    # classified like its copies, so LOCO accuracy equals the pooled model's on its own windows.
    tr = find_traces(str(root), "x3", "passive")
    X, y = dataset(tr, 10)
    assert loco["x3"]["n"] == len(y)
    assert [p.label for p in m.classify_batch(X)] == list(y)
    assert loco["x3"]["six_class"] == pytest.approx(1.0)
    card = (out / "MODEL_CARD.md").read_text()
    assert "leave-one-condition-out" in card and "`x2`" in card and "| **median** |" in card
    # --max-refs: at most the first N windows per class of each condition are references; LOCO still
    # tests every window of the held-out condition.
    capped_out = tmp_path / "grid-cap"
    cli.main(["grid", str(root), "--w", "10", "--radius", "5", "--min-windows", "1", "--max-refs", "2",
              "--out", str(capped_out), "--json", str(tmp_path / "loco-cap.json")])
    mc = opsel.load_model(str(capped_out / "model.json"))
    per = [c["windows_per_class"] for c in mc.training["conditions"]]
    assert all(v == 2 for wpc in per for v in wpc.values()) and len(mc) == 3 * 6 * 2
    assert mc.training["max_refs_per_class_and_condition"] == 2
    refs = np.asarray(mc.references)[:12]
    first = np.concatenate([trace_windows(t, 10)[:2] for t in find_traces(str(root), "default", "passive")])
    np.testing.assert_array_equal(refs, first)
    cap_loco = json.loads((tmp_path / "loco-cap.json").read_text())["loco"]
    assert {c: r["n"] for c, r in cap_loco.items()} == {c: r["n"] for c, r in loco.items()}
    assert "--max-refs 2" in (capped_out / "MODEL_CARD.md").read_text()
    # Fewer than three complete conditions: a clear error, nothing written.
    shutil.rmtree(root / "x3")
    with pytest.raises(SystemExit, match="need at least 3"):
        cli.main(["grid", str(root), "--w", "10", "--min-windows", "1", "--out", str(tmp_path / "none")])
    assert not (tmp_path / "none").exists()


def test_a_grid_of_200ms_traces_makes_a_200ms_model(tmp_path):
    root = tmp_path / "collect"
    src = os.path.join(FIX, "default", "passive")
    _at_200ms(src, str(root / "default" / "passive-200ms"))
    for f, name in ((2.0, "x2"), (3.0, "x3")):
        _scaled_condition(src, str(tmp_path / f"{name}-1hz"), f, name)
        _at_200ms(str(tmp_path / f"{name}-1hz"), str(root / name / "passive-200ms"))
    out = tmp_path / "grid"
    cli.main(["grid", str(root), "--mode", "passive-200ms", "--w", "10", "--radius", "5", "--min-windows", "1",
              "--out", str(out)])
    m = opsel.load_model(str(out / "model.json"))
    assert (m.sample_interval_ms, m.window, m.radius) == (200.0, 10, 5)
    assert "taken every 200 ms" in (out / "MODEL_CARD.md").read_text()
    # Its references are the 200-ms series themselves (2-s windows), not the 1 Hz reading.
    X, _ = dataset(find_traces_dir(str(root / "default" / "passive-200ms")), 10)
    np.testing.assert_array_equal(np.asarray(m.references)[: len(X)], X)
    with pytest.raises(opsel.InvalidInputError, match="every 200 ms"):
        opsel.Controller(str(out / "model.json"))


def test_default_passive_model_is_pooled_over_the_grid():
    d = os.path.join(REPO, "models", "passive")
    if not os.path.exists(os.path.join(d, "model.json")):
        pytest.skip("models/passive not in this checkout")
    m = opsel.load_model(os.path.join(d, "model.json"))
    conds = m.training["conditions"]
    assert m.training["condition"] == "grid" and len(conds) >= 12 and m.normalization == "divide-min"
    rates = {c["rate_mbps"] for c in conds}
    rtts = {c["rtt_ms"] for c in conds}
    assert min(rates) <= 10 and max(rates) >= 300 and min(rtts) <= 10 and max(rtts) >= 200
    assert set(m.training["loco"]) == {c["condition"] for c in conds}
    # The corpus only grows (recording appends runs): the first windows of every trace the model was
    # trained on are still its references, found at distance 0.
    collect = os.path.join(REPO, "data", "collect")
    for c in conds:
        # A condition's 200-ms traces are references read at 1 Hz (opsel.train.grid.load_grid).
        tr = find_traces(collect, c["condition"], "passive") + [
            at_1hz(t) for m in grid.finer_passive(collect, c["condition"])
            for t in find_traces(collect, c["condition"], m)]
        assert tr, c["condition"]
        for t in tr:
            X = trace_windows(t, m.window)[: c["windows_per_class"][t.label]][:2]
            assert all(p.distance == 0.0 and p.label == t.label for p in m.classify_batch(X)), (c["condition"], t.label)


@pytest.fixture(scope="module")
def active():
    tr = find_traces(FIX, "default", "active-s5c5s5b5")
    assert [t.label for t in tr] == list(SIX_CLASSES)
    return tr


def test_pairwise_dtw_is_the_core_distance():
    rng = np.random.default_rng(5)
    A = 65 + 10 * rng.random((4, 12))
    B = 65 + 10 * rng.random((3, 12))
    D = cycles.pairwise_dtw(A, radius=3, normalization="divide-min")
    assert np.allclose(D, D.T) and np.all(np.diag(D) == 0)
    An = classifier.normalize_windows(A, "divide-min")
    assert D[1, 2] == opsel.dtw_distance(An[1], An[2], 3)
    C = cycles.pairwise_dtw(A, B, radius=0)
    assert C.shape == (4, 3) and C[3, 1] == pytest.approx(np.abs(A[3] - B[1]).sum())


def test_cycle_blocks_are_consecutive_aligned_cycles(active):
    blocks, labels, groups, cyc = cycles.cycle_blocks(active, 2)
    assert cyc.shape == (30, 20)  # 5 cycles of 20 s per class
    assert blocks.shape == (12, 2)  # 100 samples per run: blocks at k = 0 and 40, the 5th cycle is left over
    X40 = trace_windows(active[3], 40)
    mine = [np.concatenate(cyc[b]) for b, lab in zip(blocks, labels) if lab == 3]
    assert np.array_equal(np.array(mine), X40)
    assert set(groups) == {f"{c}/0" for c in SIX_CLASSES}
    with pytest.raises(ValueError, match="at least 1"):
        cycles.cycle_blocks(active, 0)
    with pytest.raises(ValueError, match="active trace"):
        cycles.cycle_blocks(find_traces(FIX, "default", "passive"), 1)


def test_cv_cycles_one_cycle_is_plain_1nn(active):
    rows = cycles.cv_cycles(active, ns=(1, 2))
    one = {r["decision"]: r for r in rows if r["n_cycles"] == 1}
    assert set(one) == set(cycles.DECISIONS)
    assert one["window"]["confusion"] == one["min-sum"]["confusion"] == one["vote"]["confusion"]
    X, y = dataset(active, 20)
    assert one["window"]["n"] == len(y)
    # 2 blocks per class cannot fill 5 folds: skipped, not an error.
    assert not [r for r in rows if r["n_cycles"] == 2]
    # One run per class: a run-grouped split has a single fold; skipped.
    assert cycles.cv_cycles(active, ns=(1,), folding="runs") == []
    with pytest.raises(ValueError, match="folding"):
        cycles.assign_folds([0, 1], np.array(["a", "b"]), folding="nope")


def test_min_sum_beats_one_cycle_on_a_designed_case(tmp_path):
    """Two classes whose cycles alternate between a shared shape and their own level: one cycle
    is ambiguous half the time, two cycles never are (the min-sum adds the informative one)."""
    for label, level in (("B0-C0", 0.0), ("B1-B1", 10.0)):
        rows = []
        for run in range(5):
            for k in range(200):
                cyc = k // 20
                rows.append((run, k, 70.0 + (level if cyc % 2 else 5.0) + 0.01 * ((k * 7 + run) % 3)))
        write_trace(str(tmp_path / "default" / "active-s5c5s5b5" / f"{label}.csv"), rows, pattern="S5-C5-S5-B5")
    tr = find_traces(str(tmp_path), "default", "active-s5c5s5b5")
    rows = cycles.cv_cycles(tr, ns=(1, 2), decisions=("min-sum",))
    acc = {r["n_cycles"]: r["accuracy"] for r in rows}
    assert acc[2] == 1.0 and acc[1] < 0.9
    runs = cycles.cv_cycles(tr, ns=(2,), decisions=("min-sum", "window"), folding="runs")
    assert all(r["accuracy"] == 1.0 for r in runs)


def test_diagnose_on_the_fixture(active, passive, tmp_path):
    assert diagnose.pattern_segments("S5-C5-S5-B5") == [("S", 5), ("C", 5), ("S", 5), ("B", 5)]
    with pytest.raises(ValueError, match="X5"):
        diagnose.pattern_segments("S5-X5")
    rep = diagnose.report(active, passive)
    assert all(a["phase_mismatch"] == 0 and a["segment_mismatch"] == 0 and a["rows"] == 100 for a in rep["alignment"])
    prof = {p["label"]: p for p in rep["profile"]}
    assert prof["B0-C0"]["first"]["cycles"] == 1 and prof["B0-C0"]["later"]["cycles"] == 4
    segs = prof["B0-C0"]["later"]["segments"]
    assert [s["segment"] for s in segs] == ["S5#1", "C5#2", "S5#3", "B5#4"]
    assert sum(s["samples"] for s in segs) == 80 and len(prof["B0-C0"]["later"]["per_phase_median_ms"]) == 20
    # B1-B1 keeps a standing queue; an idle path does not.
    assert prof["B1-B1"]["later"]["segments"][2]["median_ms"] > 10 > prof["B0-C0"]["later"]["segments"][2]["median_ms"]
    good = {g["active"]["label"]: g for g in rep["goodput"]}
    assert good["B0-C0"]["active"]["total_mbps"] == 0 and set(good["B1-C1"]["passive"]["per_flow_mbps"]) == {"bg0-bbr", "bg1-cubic"}
    md = "\n".join(diagnose.markdown(rep))
    assert "rows whose phase is not k mod P: 0" in md and "| C1-C1 |" in md
    path = plots.segment_profile(rep["profile"], str(tmp_path / "seg.png"), title="t")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="not an active trace"):
        diagnose.alignment(passive[0])


def test_cli_report_diagnose_and_cycles(tmp_path, capsys):
    root = tmp_path / "collect"
    shutil.copytree(FIX, root)
    models = tmp_path / "models"
    cli.main(["models", str(root), "--models", str(models), "--ws", "20", "--norm", "none"])
    out = tmp_path / "tables.md"
    evaluation.main(["report", str(models), "--out", str(out), "--ws", "10,20", "--baseline-ws", "10", "--cycle-ns", "1,2",
              "--only", "active-s5c5s5b5", "--figures", str(tmp_path / "fig"), "--json", str(tmp_path / "t.json")])
    md = out.read_text()
    assert "## active probing, pattern S5-C5-S5-B5 (default)" in md and "## passive probing" not in md
    assert "### Several cycles per decision" in md and "| none | 0 | stratified | 1 (20) | 5 |" in md
    assert "rows whose phase is not k mod P: 0" in md and "Generalisation" not in md
    assert (tmp_path / "fig" / "classifier-active-s5c5s5b5-segments.png").exists()
    rep = json.loads((tmp_path / "t.json").read_text())
    assert {r["decision"] for r in rep["active-s5c5s5b5"]["cycles"]} == set(cycles.DECISIONS)
    evaluation.main(["diagnose", str(root), "--json", str(tmp_path / "d.json")])
    assert "Background goodput" in capsys.readouterr().out
    evaluation.main(["cycles", str(root), "--ns", "1", "--folding", "stratified"])
    assert "| stratified | 1 | 20 | 5 | min-sum |" in capsys.readouterr().out


def test_learning_curve_takes_the_first_windows_in_recording_order(active):
    from opsel_eval import learning

    assert learning.default_sizes(120) == [20, 40, 60, 80, 100, 120]
    assert learning.default_sizes(7) == [5, 6, 7] and learning.default_sizes(4) == []
    rows = learning.learning_curve(active, ws=(20,), sizes=(5, 99), ks=(1, 3), radii=(10, 0), seeds=(0, 1))
    # 5 windows/class in the fixture: size 99 is skipped; one row per (k, radius).
    assert {(r["per_class"], r["k"], r["radius"]) for r in rows} == {(5, 1, 10), (5, 3, 10), (5, 1, 0), (5, 3, 0)}
    X, y = dataset(active, 20, balance=True)
    one = next(r for r in rows if r["k"] == 1 and r["radius"] == 10)
    assert one["accuracies"] == [knn.cv_knn(X, y, seed=s)["accuracy"] for s in (0, 1)]
    assert one["accuracy"] == pytest.approx(np.mean(one["accuracies"])) and one["sd"] >= 0
    md = "\n".join(learning.markdown(rows))
    assert "| w = 20 (none): windows/class | 1-NN r=10 | 3-NN r=10 | 1-NN r=0 | 3-NN r=0 |" in md


def _burst_traces(tmp_path, shift):
    """Two classes whose cycles differ only in where a 5 s burst sits (``shift`` s apart): no
    warping tells them apart, a wide band warps one onto the other."""
    rng = np.random.default_rng(7)
    for label, start in (("B0-C0", 5), ("B1-B1", 5 + shift)):
        rows = []
        for run in range(2):
            for k in range(200):
                ph = k % 20
                rows.append((run, k, 70.0 + (20.0 if start <= ph < start + 5 else 0.0) + rng.random()))
        write_trace(str(tmp_path / "default" / "active-s5c5s5b5" / f"{label}.csv"), rows, pattern="S5-C5-S5-B5")
    return find_traces(str(tmp_path), "default", "active-s5c5s5b5")


def test_select_config_prefers_no_warping_when_warping_confuses(tmp_path):
    tr = _burst_traces(tmp_path, 3)
    k, radius, rows = cli.select_config(tr, 20, "none", (1, 3), (0, 10), (0, 1), log=lambda *_: None)
    acc = {(r["k"], r["radius"]): r["accuracy"] for r in rows}
    assert acc[(1, 0)] == 1.0 and acc[(1, 10)] < 0.9
    assert (k, radius) == (1, 0)


def test_select_config_keeps_the_thesis_config_on_a_tie(tmp_path):
    # Bursts 10 s apart: warping the burst onto the other leaves 10 samples matched against a burst
    # sample, so every radius separates the classes and every cell is 100 %.
    tr = _burst_traces(tmp_path, 10)
    k, radius, rows = cli.select_config(tr, 20, "none", (1, 3), (0, 10), (0,), log=lambda *_: None)
    assert all(r["accuracy"] == 1.0 for r in rows)
    assert (k, radius) == (1, 10)
    # Too few windows for 5 folds: the thesis's configuration, no rows.
    assert cli.select_config(tr, 200, "none", (1,), (0,), (0,), log=lambda *_: None) == (1, 10, [])


def test_pick_config_one_standard_error_rule():
    def rows(*cells):
        return [{"k": k, "radius": r, "accuracy": a, "se": se} for k, r, a, se in cells]

    # The thesis's 1-NN/radius 10 is within one SE of the best: kept.
    assert cli.pick_config(rows((1, 10, 0.90, 0.01), (5, 10, 0.905, 0.01), (1, 0, 0.89, 0.01)))["k"] == 1
    # It is not: the smallest k within one SE of the best, then the radius closest to 10.
    got = cli.pick_config(rows((1, 10, 0.87, 0.01), (5, 10, 0.91, 0.01), (1, 0, 0.905, 0.01), (1, 2, 0.90, 0.01),
                               (1, 20, 0.85, 0.01)))
    assert (got["k"], got["radius"]) == (1, 2)
    r = rows((1, 10, 0.80, 0.01), (3, 10, 0.95, 0.01), (1, 0, 0.90, 0.01), (1, None, 0.94, 0.0))
    got = cli.pick_config(r)
    assert (got["k"], got["radius"]) == (1, None)  # k = 1 beats k = 3 within one SE, whatever the radius
    assert [x["within_1se"] for x in r] == [False, True, False, True] and [x["chosen"] for x in r] == [False, False, False, True]


def test_extend_adds_references_with_the_base_configuration(passive, tmp_path):
    from opsel.train import calibrate

    X, y = dataset(passive, 10)
    knn.fit(X[::2], y[::2], k=1, radius=4, normalization="divide-min").save(str(tmp_path / "base.json"))
    base = opsel.load_model(str(tmp_path / "base.json"))
    new_X, new_y = X[1::2], y[1::2]
    m = calibrate.extend(base, new_X, new_y, note={"rate_mbps": 20})
    assert len(m) == len(base) + len(new_y)
    assert (m.window, m.k, m.radius, m.normalization, m.probing) == (10, 1, 4, "divide-min", "passive")
    assert m.training["calibration"] == {"rate_mbps": 20, "windows_added": len(new_y)}
    np.testing.assert_array_equal(np.asarray(m.references)[: len(base)], np.asarray(base.references))
    # Every added window is now its own nearest reference.
    assert all(p.distance == 0.0 and p.label == t for p, t in zip(m.classify_batch(new_X), new_y))
    with pytest.raises(ValueError, match=r"needs \(n, 10\)"):
        calibrate.extend(base, X[:, :9], y)
    with pytest.raises(ValueError, match="not among the base model"):
        calibrate.extend(base, X[:1], ["B9-C9"])
    # The CLI: base model file + a folder of traces -> a model file.
    out = tmp_path / "cal.json"
    cli.main(["extend", str(tmp_path / "base.json"), os.path.join(FIX, "default", "passive"), "--out", str(out)])
    assert len(opsel.load_model(str(out))) == len(base) + len(dataset(passive, 10)[1])


def test_a_200ms_calibration_extends_at_1hz_or_makes_the_paths_own_model(passive, tmp_path, capsys):
    from opsel.train import calibrate

    fast = tmp_path / "cal" / "passive-200ms"
    _at_200ms(os.path.join(FIX, "default", "passive"), str(fast))
    X, y = dataset(passive, 10)
    knn.fit(X, y, k=1, radius=4, normalization="divide-min").save(str(tmp_path / "base.json"))
    base = opsel.load_model(str(tmp_path / "base.json"))
    assert base.sample_interval_ms == 1000.0
    # Extending the 1 Hz model reads the 200-ms traces at 1 Hz: the same windows as the 1 Hz fixture
    # (the four samples between two seconds were rewritten and must be skipped).
    m, before, n = calibrate.extend_from_traces(str(tmp_path / "base.json"), str(fast))
    assert n == len(y) and before == 1.0 and m.sample_interval_ms == 1000.0
    np.testing.assert_array_equal(np.asarray(m.references)[len(base):], X)
    # --own-window-s: the traces alone, every 200 ms, 2-s windows of 10 samples, the band as the same share.
    own, before, n = calibrate.extend_from_traces(str(tmp_path / "base.json"), str(fast), own_window_s=2)
    assert (own.sample_interval_ms, own.window, own.radius, own.normalization) == (200.0, 10, 4, "divide-min")
    assert len(own) == n and own.training["calibration"]["references"] == "the recorded path's alone"
    X5, y5 = dataset(find_traces_dir(str(fast)), 10)
    assert n == len(y5) and len(y5) == 5 * len(y)
    np.testing.assert_array_equal(np.asarray(own.references), X5)
    # It is written with its period, and OPS takes it only at that period.
    out = tmp_path / "own.json"
    cli.main(["extend", str(tmp_path / "base.json"), str(fast), "--out", str(out), "--own-window-s", "2"])
    assert "references of these traces alone" in capsys.readouterr().out
    saved = opsel.load_model(str(out))
    assert (saved.sample_interval_ms, saved.window) == (200.0, 10)
    with pytest.raises(opsel.InvalidInputError, match="every 200 ms"):
        opsel.Controller(str(out))
    assert opsel.Controller(str(out), sample_period_s=0.2).window_len == 10
    with pytest.raises(SystemExit, match="whole number"):
        calibrate.extend_from_traces(str(tmp_path / "base.json"), str(fast), own_window_s=0.3)
    # A 1 Hz corpus cannot make a 200-ms model's references.
    own.save(str(tmp_path / "own-base.json"))
    with pytest.raises(SystemExit, match="cannot be read every 200 ms"):
        calibrate.extend_from_traces(str(tmp_path / "own-base.json"), os.path.join(FIX, "default", "passive"))
    with pytest.raises(opsel.InvalidModelError, match="sample_interval_ms is -1"):
        opsel.Model.fit(X, [0] * len(y), ["B0-C0"], sample_interval_ms=-1.0)


def test_calibrate_example_improves_on_held_out_windows(tmp_path):
    """examples/python/calibrate.py on the shipped 20 Mbit/s, 150 ms corpus and its separate hold-out."""
    import re
    import subprocess
    import sys

    ex = os.path.join(REPO, "examples", "python", "calibrate.py")
    if not os.path.exists(os.path.join(REPO, "data", "holdout")):
        pytest.skip("data/holdout not in this checkout")
    r = subprocess.run([sys.executable, ex, "--out", str(tmp_path / "cal.json")], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    acc = {m.group(1): float(m.group(2)) for m in re.finditer(r"(base|calibrated) on \d+ held-out windows: "
                                                               r"6-class ([\d.]+) %", r.stdout)}
    assert set(acc) == {"base", "calibrated"} and acc["calibrated"] >= acc["base"], r.stdout
    assert len(opsel.load_model(str(tmp_path / "cal.json"))) > len(opsel.load_model(
        os.path.join(REPO, "models", "passive", "model.json")))
