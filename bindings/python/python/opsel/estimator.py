"""`KnnDtw`: a scikit-learn compatible DTW K-NN classifier backed by the Rust core.

It follows the scikit-learn estimator contract (``fit`` / ``predict`` /
``predict_proba`` / ``score`` / ``get_params`` / ``set_params``), so it works
with ``cross_val_score``, ``GridSearchCV`` and pipelines. scikit-learn itself is
optional: without it the same methods exist, minus the sklearn base classes.
"""

from __future__ import annotations

import numpy as np

from . import _opsel
from ._errors import InvalidInputError

try:  # scikit-learn is optional
    from sklearn.base import BaseEstimator, ClassifierMixin

    _BASES: tuple = (ClassifierMixin, BaseEstimator)
except ImportError:  # pragma: no cover - exercised only without sklearn
    _BASES = (object,)


class KnnDtw(*_BASES):  # type: ignore[misc]
    """K-nearest-neighbour classifier under banded DTW (000 §3.5).

    Parameters
    ----------
    n_neighbors : int, default 1
        Neighbours that vote (000: 1-NN is best).
    radius : int or None, default 10
        Sakoe–Chiba band radius, |i − j| ≤ radius (000: "max warping 10"). None: unconstrained.
    cost : {"abs", "squared"}, default "abs"
        Local cost. "squared" reports sqrt(sum of squares) like dtaidistance/tslearn.
    normalization : {"none", "subtract-min", "divide-min", "z-score"}, default "none"
        Per-window normalisation; none keeps absolute RTT, which carries load (000 §3.4).
    n_jobs : int, default 0
        Threads for batch prediction (0 = all cores). The GIL is released.
    """

    def __init__(self, n_neighbors=1, radius=10, cost="abs", normalization="none", n_jobs=0):
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.cost = cost
        self.normalization = normalization
        self.n_jobs = n_jobs

    # scikit-learn's get_params/set_params come from BaseEstimator; these keep
    # the estimator usable when scikit-learn is absent.
    if _BASES == (object,):  # pragma: no cover

        def get_params(self, deep=True):
            return {k: getattr(self, k) for k in ("n_neighbors", "radius", "cost", "normalization", "n_jobs")}

        def set_params(self, **params):
            for k, v in params.items():
                if k not in self.get_params():
                    raise ValueError(f"invalid parameter {k!r} for KnnDtw")
                setattr(self, k, v)
            return self

        def score(self, X, y):
            return float(np.mean(self.predict(X) == np.asarray(y)))

    def fit(self, X, y, *, probing="passive", pattern=None, training=None):
        """Store the training windows as the reference set. X: (n, w) RTT windows in ms; y: labels."""
        X = _as_2d(X)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != X.shape[0]:
            raise InvalidInputError(f"y must be 1-D with one label per window: X has {X.shape[0]} windows, y has shape {y.shape}")
        self.classes_, idx = np.unique(y, return_inverse=True)
        self.model_ = _opsel.Model.fit(
            X,
            idx.astype(np.int64).tolist(),
            [str(c) for c in self.classes_],
            k=int(self.n_neighbors),
            radius=None if self.radius is None else int(self.radius),
            cost=self.cost,
            normalization=self.normalization,
            probing=probing,
            pattern=pattern,
            training=training,
        )
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        """Predicted labels for windows X of shape (n, w)."""
        self._check_fitted()
        idx = self.model_.predict_indices(_as_2d(X), threads=int(self.n_jobs))
        return self.classes_[idx]

    def predict_proba(self, X):
        """Vote shares per class, columns in the order of ``classes_``."""
        self._check_fitted()
        return self.model_.predict_proba(_as_2d(X))

    def kneighbors_distance(self, X):
        """Distance to the nearest reference for each window (a novelty signal)."""
        self._check_fitted()
        return np.array([p.distance for p in self.model_.classify_batch(_as_2d(X), threads=int(self.n_jobs))])

    def save(self, path):
        """Write the fitted model as an opsel model file (JSON, version 1)."""
        self._check_fitted()
        self.model_.save(path)

    @classmethod
    def load(cls, path):
        """Load an opsel model file into a fitted estimator (labels become strings)."""
        model = _opsel.load_model(path)
        est = cls(
            n_neighbors=model.k,
            radius=model.radius,
            cost=model.cost,
            normalization=model.normalization,
        )
        est.model_ = model
        est.classes_ = np.array(model.classes)
        est.n_features_in_ = model.window
        return est

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            try:
                from sklearn.exceptions import NotFittedError
            except ImportError:  # pragma: no cover
                NotFittedError = RuntimeError  # noqa: N806
            raise NotFittedError("this KnnDtw is not fitted yet; call fit(X, y) first")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _as_2d(X):
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise InvalidInputError(f"X must be 2-D (windows × samples), got shape {X.shape}")
    return X
