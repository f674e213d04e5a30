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
    with pytest.raises(opsel.InvalidInputError, match="2D array"):
        opsel.KnnDtw().fit(np.ones(5), [1])
    with pytest.raises(opsel.InvalidInputError, match="inconsistent numbers of samples"):
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


def test_pickle_round_trip_is_exact(data):
    import copy
    import pickle

    X, y, Xq, _ = data
    est = opsel.KnnDtw(n_neighbors=3, radius=4, normalization="z-score").fit(X, y, training={"note": "pickle"})
    for back in (pickle.loads(pickle.dumps(est)), copy.deepcopy(est)):
        assert back.get_params() == est.get_params()
        assert back.model_.to_json() == est.model_.to_json()
        assert (back.classes_ == est.classes_).all() and back.n_features_in_ == est.n_features_in_
        np.testing.assert_array_equal(back.model_.references, est.model_.references)
        assert (back.predict(Xq) == est.predict(Xq)).all()
        np.testing.assert_array_equal(back.predict_proba(Xq), est.predict_proba(Xq))
        np.testing.assert_array_equal(back.kneighbors_distance(Xq), est.kneighbors_distance(Xq))
    # The core Model alone pickles too (through its model file text).
    m = pickle.loads(pickle.dumps(est.model_))
    assert m.to_json() == est.model_.to_json()


def test_unpickling_a_corrupt_model_fails_clearly(data):
    import pickle

    X, y, _, _ = data
    blob = pickle.dumps(opsel.KnnDtw().fit(X, y).model_)
    bad = blob.replace(b'"opsel-model"', b'"other-model"')
    assert bad != blob
    with pytest.raises(opsel.InvalidModelError):
        pickle.loads(bad)


def test_clear_errors_on_bad_input(data):
    X, y, Xq, _ = data
    est = opsel.KnnDtw().fit(X, y)
    with pytest.raises(opsel.InvalidInputError, match=f"expecting {W} features"):
        est.predict(Xq[:, :-1])
    with pytest.raises(ValueError, match="Complex data not supported"):
        opsel.KnnDtw().fit(X + 1j, y)
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        opsel.KnnDtw().fit(np.empty((3, 0)), [1, 2, 3])
    with pytest.raises(ValueError, match="0 sample"):
        opsel.KnnDtw().fit(np.empty((0, W)), [])
    with pytest.raises(ValueError, match="NaN"):
        est.predict(np.full((1, W), np.nan))
    with pytest.raises(ValueError, match="continuous"):
        opsel.KnnDtw().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="requires y"):
        opsel.KnnDtw().fit(X, None)
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="[Ss]parse"):
        opsel.KnnDtw().fit(scipy_sparse.csr_matrix(X), y)


def test_check_estimator_passes():
    """Every scikit-learn estimator check (docs/results/packaging.md lists them)."""
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(opsel.KnnDtw(), on_fail=None)
    failed = [(r["check_name"], r["exception"]) for r in results if r["status"] == "failed"]
    assert not failed, failed
    assert sum(r["status"] == "passed" for r in results) >= 50
