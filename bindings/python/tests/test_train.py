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
from opsel.train import classifier, knn
from opsel.train import __main__ as cli
from opsel.train.data import CSV_HEADER, SIX_CLASSES, dataset, find_traces, read_trace, trace_windows

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
    cli.main(["models", str(root), "--models", str(models), "--ws", "10,20", "--report", str(tmp_path / "r.json")])
    for name in ("passive", "active-s5c5s5b5"):
        m = opsel.load_model(str(models / name / "model.json"))
        assert m.window == 20
        card = (models / name / "MODEL_CARD.md").read_text()
        assert "0.5 × BDP" in card and "1.5 × BDP" in card
        assert (models / name / "confusion.png").exists()
        assert (models / name / "traces" / "default" / "B1-C1.csv").exists()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["normalization"] in knn.NORMALIZATIONS
    assert len(rep["generalisation"]) == 8  # 4 normalisations x 2 directions
    # Retrain without a collection root: from the copies in models/*/traces.
    cli.main(["models", "--models", str(models), "--ws", "20", "--norm", "none"])
    assert opsel.load_model(str(models / "passive" / "model.json")).normalization == "none"
    cli.main(["summary", str(root)])
    assert "default/passive" in capsys.readouterr().out


@pytest.mark.parametrize("name,probing", [("passive", "passive"), ("active-s5c5s5b5", "active")])
def test_shipped_models_classify_their_own_traces(name, probing):
    d = os.path.join(REPO, "models", name)
    if not os.path.exists(os.path.join(d, "model.json")):
        pytest.skip(f"models/{name} not in this checkout")
    m = opsel.load_model(os.path.join(d, "model.json"))
    assert m.window == 20 and sorted(m.classes) == sorted(SIX_CLASSES)
    cond = "default"
    tr = find_traces(os.path.join(d, "traces"), cond, ".")
    assert [t.label for t in tr] == list(SIX_CLASSES)
    X, y = dataset(tr, 20)
    assert len(y) == len(m.labels) if hasattr(m, "labels") else True
    pred = [p.label for p in m.classify_batch(X)]
    assert pred == list(y)
