"""KnnDtw follows the scikit-learn estimator contract and agrees with a
dtaidistance-based 1-NN on the same data."""

import numpy as np
import pytest

import opsel

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402

W = 20


@pytest.fixture(scope="module")
def data():
    X, y = opsel.synthetic_dataset(opsel.SIX_CLASSES, 30, W, seed=5)
    Xq, yq = opsel.synthetic_dataset(opsel.SIX_CLASSES, 8, W, seed=6)
    return X, np.array(y), Xq, np.array(yq)


def test_fit_predict_score(data):
    X, y, Xq, yq = data
    est = opsel.KnnDtw().fit(X, y)
    assert list(est.classes_) == sorted(set(y))
    pred = est.predict(Xq)
    assert pred.dtype == y.dtype and pred.shape == yq.shape
    assert est.score(Xq, yq) == pytest.approx(np.mean(pred == yq))
    pr = est.predict_proba(Xq)
    assert pr.shape == (len(Xq), 6)
    assert (est.classes_[pr.argmax(axis=1)] == pred).all()


def test_integer_labels_keep_their_type(data):
    X, y, Xq, _ = data
    yi = np.array([opsel.SIX_CLASSES.index(v) for v in y]) * 10
    est = opsel.KnnDtw(n_neighbors=3).fit(X, yi)
    assert set(est.predict(Xq)) <= set(yi)


def test_params_clone_and_cross_val_score(data):
    X, y, _, _ = data
    est = opsel.KnnDtw(n_neighbors=3, radius=5, normalization="z-score")
    assert est.get_params()["radius"] == 5
    est.set_params(radius=7)
    assert clone(est).get_params() == est.get_params()
    scores = cross_val_score(opsel.KnnDtw(), X, y, cv=5)
    assert scores.shape == (5,) and scores.mean() > 0.6
    gs = GridSearchCV(opsel.KnnDtw(), {"n_neighbors": [1, 3]}, cv=3).fit(X, y)
    assert gs.best_params_["n_neighbors"] in (1, 3)


def test_save_load(tmp_path, data):
    X, y, Xq, _ = data
    est = opsel.KnnDtw(radius=4).fit(X, y)
    est.save(str(tmp_path / "m.json"))
    back = opsel.KnnDtw.load(str(tmp_path / "m.json"))
    assert back.get_params()["radius"] == 4
    assert (back.predict(Xq) == est.predict(Xq)).all()


def test_not_fitted_and_bad_shapes():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        opsel.KnnDtw().predict(np.ones((2, 3)))
    with pytest.raises(opsel.InvalidInputError, match="2-D"):
        opsel.KnnDtw().fit(np.ones(5), [1])
    with pytest.raises(ValueError, match="one label per window"):
        opsel.KnnDtw().fit(np.ones((3, 4)), [1, 2])


def test_one_nn_agrees_with_dtaidistance(data):
    dtaidistance = pytest.importorskip("dtaidistance")
    X, y, Xq, _ = data
    est = opsel.KnnDtw(cost="squared", radius=10).fit(X, y)
    # dtaidistance: distances between every query and reference (window = radius + 1).
    both = np.vstack([Xq, X])
    d = dtaidistance.dtw.distance_matrix_fast(both, window=11, block=((0, len(Xq)), (len(Xq), len(both))), compact=False)
    d = d[: len(Xq), len(Xq):]
    nn = np.argmin(d, axis=1)
    assert (est.predict(Xq) == y[nn]).all()
    got = est.kneighbors_distance(Xq)
    np.testing.assert_allclose(got, d[np.arange(len(Xq)), nn], rtol=1e-9)
