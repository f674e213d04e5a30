"""Model classification, batch, probabilities, model files and errors."""

import json

import numpy as np
import pytest

import opsel

W = 20


@pytest.fixture(scope="module")
def data():
    X, y = opsel.synthetic_dataset(opsel.SIX_CLASSES, 40, W, seed=1)
    Xq, yq = opsel.synthetic_dataset(opsel.SIX_CLASSES, 10, W, seed=2)
    return X, y, Xq, yq


@pytest.fixture(scope="module")
def model(data):
    X, y, _, _ = data
    classes = list(opsel.SIX_CLASSES)
    return opsel.Model.fit(X, [classes.index(l) for l in y], classes, training={"source": "synthetic"})


def test_classify_single_and_batch_agree(model, data):
    _, _, Xq, yq = data
    batch = model.classify_batch(Xq)
    singles = [model.classify(x) for x in Xq]
    assert [p.label for p in batch] == [p.label for p in singles]
    assert [p.distance for p in batch] == [p.distance for p in singles]
    acc = np.mean([p.label == t for p, t in zip(batch, yq)])
    assert acc > 0.7
    p = singles[0]
    assert p.label in opsel.SIX_CLASSES and p.class_index == opsel.SIX_CLASSES.index(p.label)
    assert p.confidence == 1.0 and p.votes == 1
    assert p.bbr_present == opsel.parse_mix(p.label)["bbr_present"]


def test_predict_proba_rows_sum_to_one(data):
    X, y, Xq, _ = data
    classes = sorted(set(y))
    m = opsel.Model.fit(X, [classes.index(l) for l in y], classes, k=5)
    pr = m.predict_proba(Xq)
    assert pr.shape == (len(Xq), 6)
    np.testing.assert_allclose(pr.sum(axis=1), 1.0)
    assert set(np.unique(pr * 5).round(9)) <= {0, 1, 2, 3, 4, 5}


def test_model_file_round_trip(model, tmp_path, data):
    p = tmp_path / "m.json"
    model.save(str(p))
    back = opsel.load_model(str(p))
    assert back.to_json() == model.to_json()
    assert back.training == {"source": "synthetic"}
    assert back.window == W and back.k == 1 and back.radius == 10 and back.cost == "abs"
    assert back.normalization == "none" and back.probing == "passive" and back.pattern is None
    np.testing.assert_array_equal(back.references, model.references)
    _, _, Xq, _ = data
    assert [p.label for p in back.classify_batch(Xq)] == [p.label for p in model.classify_batch(Xq)]


def test_errors(model, tmp_path):
    with pytest.raises(opsel.InvalidInputError, match="19 samples"):
        model.classify(np.ones(19))
    with pytest.raises(ValueError, match="NaN"):
        model.classify(np.r_[np.ones(19), np.nan])
    with pytest.raises(opsel.InvalidInputError, match="21 samples per row"):
        model.classify_batch(np.ones((3, 21)))
    with pytest.raises(opsel.InvalidInputError, match="k = 500"):
        opsel.Model.fit(np.ones((4, 3)), [0, 1, 0, 1], ["a", "b"], k=500)
    with pytest.raises(opsel.InvalidInputError, match="empty"):
        opsel.Model.fit(np.ones((0, 3)), [], ["a"])
    with pytest.raises(opsel.InvalidInputError, match="label 7"):
        opsel.Model.fit(np.ones((2, 3)), [0, 7], ["a", "b"])
    bad = tmp_path / "bad.json"
    bad.write_text("{broken")
    with pytest.raises(opsel.InvalidModelError, match="not valid JSON"):
        opsel.load_model(str(bad))
    newer = json.loads(model.to_json())
    newer["version"] = 7
    bad.write_text(json.dumps(newer))
    with pytest.raises(opsel.UnsupportedVersionError, match="version 7"):
        opsel.load_model(str(bad))
    with pytest.raises(opsel.OpselIOError, match="missing.json"):
        opsel.load_model(str(tmp_path / "missing.json"))


def test_cross_validate_reports_confusion(data):
    X, y, _, _ = data
    classes = list(opsel.SIX_CLASSES)
    r = opsel.cross_validate(X, [classes.index(l) for l in y], classes, folds=5, seed=3)
    assert len(r["fold_accuracy"]) == 5
    assert r["confusion"].shape == (6, 6) and r["confusion"].sum() == len(y)
    assert 0.6 < r["mean_accuracy"] <= 1.0


def test_series_helpers():
    s = opsel.aggregate(np.arange(25, dtype=float), 10)
    np.testing.assert_array_equal(s, [4.5, 14.5])
    w = opsel.windows(np.arange(45, dtype=float), 20)
    assert w.shape == (2, 20) and w[1, 0] == 20
    np.testing.assert_array_equal(opsel.normalize(np.array([66.0, 70.0]), "subtract-min"), [0.0, 4.0])
    with pytest.raises(opsel.InvalidInputError, match="log"):
        opsel.normalize(np.ones(3), "log")
    assert opsel.parse_mix("B1-B1")["counts"] == {"bbr": 2}
    with pytest.raises(ValueError):
        opsel.parse_mix("X9")
