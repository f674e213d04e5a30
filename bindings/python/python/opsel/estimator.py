"""`KnnDtw`: a scikit-learn compatible DTW K-NN classifier backed by the Rust core.

It follows the scikit-learn estimator contract (``fit`` / ``predict`` /
``predict_proba`` / ``score`` / ``get_params`` / ``set_params``), so it works
with ``cross_val_score``, ``GridSearchCV``, pipelines and ``pickle``, and it
passes ``sklearn.utils.estimator_checks.check_estimator``. scikit-learn itself
is optional: without it the same methods exist, minus the sklearn base classes,
and input is checked by the numpy fallback below.

Only input checking and the estimator protocol live here; fitting and
prediction are the core's (DESIGN.md: bindings hold no algorithm).
"""

from __future__ import annotations

import copyreg
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from . import _opsel
from ._errors import InvalidInputError

try:  # scikit-learn is optional
    from sklearn.base import BaseEstimator, ClassifierMixin  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from sklearn.utils.multiclass import check_classification_targets  # type: ignore[import-untyped,import-not-found,unused-ignore]

    try:  # scikit-learn >= 1.6
        from sklearn.utils.validation import validate_data as _sk_validate_data  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:  # pragma: no cover - older scikit-learn
        _sk_validate_data = None

    _BASES: tuple[type, ...] = (ClassifierMixin, BaseEstimator)
    _HAVE_SKLEARN = True
except ImportError:  # pragma: no cover - exercised only without sklearn
    _BASES = (object,)
    _HAVE_SKLEARN = False


# A fitted Model pickles as its model file text: the JSON form is the core's one
# versioned format, it round-trips every f64 exactly (serde_json float_roundtrip),
# and loading it re-runs the core's validation, so an unpickled model is checked
# like any model file. Registered here rather than in Rust so the compiled module
# needs no pickle protocol of its own.
def _reduce_model(model: _opsel.Model) -> tuple[Any, tuple[str]]:
    return (_opsel.Model.from_json, (model.to_json(),))


copyreg.pickle(_opsel.Model, _reduce_model)

_PARAMS = ("n_neighbors", "radius", "cost", "normalization", "n_jobs", "stage2", "stage2_k", "stage2_weight", "stage1_steps")


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
    normalization : {"none", "subtract-min", "divide-min", "z-score", "z-sorted"}, default "none"
        Per-window normalisation; none keeps absolute RTT, which carries load (000 §3.4).
        z-sorted is z-score with the samples sorted (the window's value distribution).
    n_jobs : int, default 0
        Threads for batch prediction (0 = all cores). The GIL is released.
    stage2 : {"none", "subtract-min", "divide-min", "z-score", "z-sorted"} or None, default None
        A two-stage model (our extension of 000 §3.5, ``core/src/knn/two_stage.rs``): stage 1
        decides BBR present with ``normalization``, stage 2 picks the mix with a 1-NN among the
        references on that side, each window normalised with ``stage2``. Needs ``n_neighbors=1``
        and mix labels. None: one stage.
    stage2_k : int, default 1
        Stage 2's neighbours (a k-NN vote; above 1 needs ``stage2="z-sorted"``).
    stage2_weight : float, default 0.0
        Weight a of stage 1's DTW distance in stage 2's combined distance
        L/s2 + a·D1/s1 (``core/src/knn/combined.rs``; the scales are fitted by the core).
        Above 0 needs ``stage2="z-sorted"``.
    stage1_steps : float, default 0.0
        Weight b of the sorted-steps term in the 1-NN of record (stage 1 of a
        two-stage model): it ranks by D1/s1 + b·F/sF, F the L1 distance of the
        windows' sorted sample-to-sample steps over their standard deviation
        (``core/src/knn/steps.rs``; the scales are fitted by the core; file
        version 4). 0: DTW alone. Needs ``n_neighbors=1``.

    Attributes (after ``fit``)
    --------------------------
    classes_ : ndarray of the distinct labels, in sorted order.
    n_features_in_ : int, the window length w.
    model_ : opsel.Model, the fitted core model.
    """

    classes_: npt.NDArray[Any]
    n_features_in_: int
    model_: _opsel.Model

    def __init__(
        self,
        n_neighbors: int = 1,
        radius: Optional[int] = 10,
        cost: str = "abs",
        normalization: str = "none",
        n_jobs: int = 0,
        stage2: Optional[str] = None,
        stage2_k: int = 1,
        stage2_weight: float = 0.0,
        stage1_steps: float = 0.0,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.cost = cost
        self.normalization = normalization
        self.n_jobs = n_jobs
        self.stage2 = stage2
        self.stage2_k = stage2_k
        self.stage2_weight = stage2_weight
        self.stage1_steps = stage1_steps

    # scikit-learn's get_params/set_params/score come from its base classes;
    # these keep the estimator usable when scikit-learn is absent.
    if not _HAVE_SKLEARN:  # pragma: no cover

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            return {k: getattr(self, k) for k in _PARAMS}

        def set_params(self, **params: Any) -> "KnnDtw":
            for k, v in params.items():
                if k not in _PARAMS:
                    raise ValueError(f"invalid parameter {k!r} for KnnDtw; valid: {', '.join(_PARAMS)}")
                setattr(self, k, v)
            return self

        def score(self, X: npt.ArrayLike, y: npt.ArrayLike) -> float:
            return float(np.mean(self.predict(X) == np.asarray(y)))

    def fit(
        self,
        X: npt.ArrayLike,
        y: npt.ArrayLike,
        *,
        probing: str = "passive",
        pattern: Optional[str] = None,
        training: Any = None,
        sample_interval_ms: float = 1000.0,
    ) -> "KnnDtw":
        """Store the training windows as the reference set. X: (n, w) RTT windows in ms; y: labels.

        ``sample_interval_ms`` is the time between the windows' samples (1000: 000 §3.2's
        1 Hz; 200 for ``opsel lab collect --mode passive-200ms`` traces). It is written
        to the model file, and OPS refuses to probe at any other period."""
        Xa, ya = self._validate_fit(X, y)
        classes, idx = np.unique(ya, return_inverse=True)
        model = _opsel.Model.fit(
            Xa,
            idx.astype(np.int64).tolist(),
            [str(c) for c in classes],
            k=int(self.n_neighbors),
            radius=None if self.radius is None else int(self.radius),
            cost=self.cost,
            normalization=self.normalization,
            probing=probing,
            pattern=pattern,
            training=training,
            sample_interval_ms=float(sample_interval_ms),
            stage2=self.stage2,
            stage2_k=int(self.stage2_k),
            stage2_weight=float(self.stage2_weight),
            stage1_steps=float(self.stage1_steps),
        )
        # Set only once the core accepted the parameters, so a failed fit
        # leaves no half-fitted estimator behind.
        self.classes_ = classes
        self.model_ = model
        self.n_features_in_ = int(Xa.shape[1])
        return self

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[Any]:
        """Predicted labels for windows X of shape (n, w)."""
        Xa = self._validate_predict(X)
        idx = self.model_.predict_indices(Xa, threads=int(self.n_jobs))
        return self.classes_[idx]

    def predict_proba(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Vote shares per class, columns in the order of ``classes_``."""
        Xa = self._validate_predict(X)
        return self.model_.predict_proba(Xa)

    def kneighbors_distance(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Distance to the nearest reference for each window (a novelty signal)."""
        Xa = self._validate_predict(X)
        return np.array([p.distance for p in self.model_.classify_batch(Xa, threads=int(self.n_jobs))])

    def save(self, path: str) -> None:
        """Write the fitted model as an opsel model file (JSON; version 1, 2 with ``stage2``, 3 when
        stage 2 is a k-NN or has a stage-1 weight)."""
        self._check_fitted()
        self.model_.save(path)

    @classmethod
    def load(cls, path: str) -> "KnnDtw":
        """Load an opsel model file into a fitted estimator (labels become strings)."""
        model = _opsel.load_model(path)
        est = cls(
            n_neighbors=model.k,
            radius=model.radius,
            cost=model.cost,
            normalization=model.normalization,
            stage2=None if model.stage2 is None else model.stage2["normalization"],
            stage2_k=1 if model.stage2 is None else model.stage2.get("k", 1),
            stage2_weight=0.0 if model.stage2 is None else model.stage2.get("stage1_weight", 0.0),
            stage1_steps=0.0 if model.stage1_term is None else model.stage1_term["weight"],
        )
        est.model_ = model
        est.classes_ = np.array(model.classes)
        est.n_features_in_ = model.window
        return est

    # --- input checks -------------------------------------------------------
    # With scikit-learn, its own validators give the messages its tooling and
    # users expect (sparse, complex, empty, NaN/inf, n_features_in_ at predict,
    # continuous targets); without it, the numpy fallback checks the same things.

    def _validate_fit(self, X: npt.ArrayLike, y: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[Any]]:
        if y is None:
            raise ValueError(
                "KnnDtw requires y to be passed, but the target y is None: fit(X, y) needs one label per window"
            )
        if _HAVE_SKLEARN:
            try:
                if _sk_validate_data is not None:
                    Xa, ya = _sk_validate_data(self, X, y, dtype=np.float64, ensure_min_features=1)
                else:  # pragma: no cover - older scikit-learn
                    Xa, ya = self._validate_data(X, y, dtype=np.float64)
                check_classification_targets(ya)
            except ValueError as e:
                raise _invalid(e) from e
        else:  # pragma: no cover - exercised only without sklearn
            Xa = _as_2d(X)
            ya = np.asarray(y)
            if ya.ndim == 2 and ya.shape[1] == 1:
                ya = ya.ravel()
            if ya.ndim != 1 or len(ya) != Xa.shape[0]:
                raise InvalidInputError(
                    f"y must be 1-D with one label per window: X has {Xa.shape[0]} windows, y has shape {ya.shape}"
                )
            if ya.dtype.kind == "f":
                if not np.isfinite(ya).all():
                    raise InvalidInputError("y contains NaN or infinity; labels must be finite")
                if not np.array_equal(ya, np.round(ya)):
                    raise InvalidInputError("Unknown label type: continuous y; KnnDtw needs class labels")
        if Xa.shape[0] < 1:
            raise InvalidInputError(f"fit needs at least one window; X has shape {Xa.shape}")
        return np.ascontiguousarray(Xa, dtype=np.float64), ya

    def _validate_predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        self._check_fitted()
        if _HAVE_SKLEARN:
            try:
                if _sk_validate_data is not None:
                    Xa = _sk_validate_data(self, X, dtype=np.float64, reset=False)
                else:  # pragma: no cover - older scikit-learn
                    Xa = self._validate_data(X, dtype=np.float64, reset=False)
            except ValueError as e:
                raise _invalid(e) from e
        else:  # pragma: no cover - exercised only without sklearn
            Xa = _as_2d(X)
            if Xa.shape[1] != self.n_features_in_:
                raise InvalidInputError(
                    f"X has {Xa.shape[1]} features (samples per window), but KnnDtw is fitted "
                    f"for {self.n_features_in_}"
                )
        return np.ascontiguousarray(Xa, dtype=np.float64)

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            try:
                from sklearn.exceptions import NotFittedError  # type: ignore[import-untyped,import-not-found,unused-ignore]
            except ImportError:  # pragma: no cover
                raise RuntimeError("this KnnDtw is not fitted yet; call fit(X, y) first") from None
            raise NotFittedError("this KnnDtw is not fitted yet; call fit(X, y) first")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _invalid(e: ValueError) -> ValueError:
    """scikit-learn's message, raised as opsel's InvalidInputError (still a ValueError)."""
    return e if isinstance(e, InvalidInputError) else InvalidInputError(str(e))


def _as_2d(X: Union[npt.ArrayLike, Any]) -> npt.NDArray[np.float64]:
    """The fallback check without scikit-learn: a dense, real, finite, non-empty 2-D array."""
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise InvalidInputError("sparse input is not supported: pass a dense array of windows (X.toarray())")
    arr = np.asarray(X)
    if np.iscomplexobj(arr):
        raise InvalidInputError("complex data is not supported: RTT windows are real numbers in ms")
    Xa = np.ascontiguousarray(arr, dtype=np.float64)
    if Xa.ndim != 2:
        raise InvalidInputError(
            f"X must be 2-D (windows × samples), got shape {Xa.shape}; "
            "reshape your data with X.reshape(1, -1) for a single window"
        )
    if Xa.shape[1] == 0:
        raise InvalidInputError(f"X has 0 feature(s) (shape={Xa.shape}); windows need at least one sample")
    if not np.isfinite(Xa).all():
        raise InvalidInputError("X contains NaN or infinity; RTT samples must be finite")
    return Xa
