"""Smoke test of an installed opsel wheel, run by `make test-packaging` in a
fresh venv outside the repository (numpy only: scikit-learn is absent, so the
estimator's own input checks are the ones exercised)."""

import importlib.util
import os
import pickle
import sys

import numpy as np

import opsel

here = os.path.dirname(os.path.abspath(opsel.__file__))
assert here.startswith(sys.prefix), f"opsel imported from {here}, not from the venv {sys.prefix}"
assert importlib.util.find_spec("sklearn") is None, "this check wants a venv without scikit-learn"

# The shipped models are package data.
names = opsel.models.names()
for name in ("passive", "active-s5c5s5b5", "bwe-live"):
    assert name in names, names
p = opsel.models.path("passive")
assert p.startswith(here) and os.path.isfile(p), p
assert "traces" not in os.listdir(os.path.dirname(p))
assert "passive" in opsel.models.card("passive").lower()
model = opsel.load_model(p)
pred = model.classify(np.full(model.window, 65.0))
assert pred.label in model.classes, pred.label
try:
    opsel.models.path("no-such-model")
except opsel.InvalidInputError as e:
    assert "passive" in str(e), e
else:
    raise AssertionError("an unknown model name must fail")
opsel.BweMl(opsel.models.path("bwe-live"))

# KnnDtw without scikit-learn: fit, predict, exact pickling, clear errors.
X, y = opsel.synthetic_dataset(opsel.SIX_CLASSES, 10, 20, seed=1)
Xq, _ = opsel.synthetic_dataset(opsel.SIX_CLASSES, 3, 20, seed=2)
est = opsel.KnnDtw(n_neighbors=3).fit(X, y)
back = pickle.loads(pickle.dumps(est))
assert back.model_.to_json() == est.model_.to_json()
assert (back.predict(Xq) == est.predict(Xq)).all()
np.testing.assert_array_equal(back.predict_proba(Xq), est.predict_proba(Xq))
for bad, what in (
    (np.asarray(Xq)[:, :-1], "features"),
    (np.asarray(Xq) + 1j, "complex"),
    (np.ones(20), "2-D"),
    (np.full((1, 20), np.nan), "NaN"),
):
    try:
        est.predict(bad)
    except opsel.InvalidInputError as e:
        assert what in str(e), (what, e)
    else:
        raise AssertionError(f"predict accepted bad input ({what})")
print(f"opsel {opsel.__version__} from {here}: {len(names)} shipped models, KnnDtw fits, pickles and checks input")
