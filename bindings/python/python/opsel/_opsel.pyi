"""Type stubs for the compiled core module `opsel._opsel`."""

from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

__version__: str
DEFAULT_RADIUS: int
SIX_CLASSES: list[str]

def dtw_distance(a: npt.ArrayLike, b: npt.ArrayLike, radius: Optional[int] = 10, cost: str = "abs") -> float:
    """DTW distance; radius None = unconstrained; cost "abs" or "squared" (reported as sqrt)."""

def parse_mix(label: str) -> dict[str, Any]:
    """Parse "B1-C1" / "bbr:2-cubic:1" into counts, bbr_present, heterogeneous, canonical."""

def aggregate(echo_rtt_ms: npt.ArrayLike, echoes_per_sample: int = 10) -> npt.NDArray[np.float64]: ...
def windows(samples: npt.ArrayLike, w: int) -> npt.NDArray[np.float64]: ...
def normalize(window: npt.ArrayLike, method: str) -> npt.NDArray[np.float64]: ...
def synthetic_series(label: str, seconds: int, seed: int = 0) -> npt.NDArray[np.float64]: ...
def synthetic_dataset(
    classes: Sequence[str], per_class: int, w: int, seed: int = 0
) -> tuple[npt.NDArray[np.float64], list[str]]: ...

class Prediction:
    label: str
    class_index: int
    distance: float
    neighbor: int
    votes: int
    confidence: float
    @property
    def bbr_present(self) -> Optional[bool]: ...
    @property
    def heterogeneous(self) -> Optional[bool]: ...

class Model:
    @staticmethod
    def fit(
        x: npt.ArrayLike,
        y: Sequence[int],
        classes: Sequence[str],
        k: int = 1,
        radius: Optional[int] = 10,
        cost: str = "abs",
        normalization: str = "none",
        probing: str = "passive",
        pattern: Optional[str] = None,
        training: Any = None,
    ) -> "Model": ...
    @staticmethod
    def from_json(text: str) -> "Model": ...
    def to_json(self) -> str: ...
    def save(self, path: str) -> None: ...
    def classify(self, window: npt.ArrayLike) -> Prediction: ...
    def classify_batch(self, windows: npt.ArrayLike, threads: int = 0) -> list[Prediction]: ...
    def predict_indices(self, windows: npt.ArrayLike, threads: int = 0) -> npt.NDArray[np.int64]: ...
    def predict_proba(self, windows: npt.ArrayLike) -> npt.NDArray[np.float64]: ...
    @property
    def window(self) -> int: ...
    @property
    def classes(self) -> list[str]: ...
    @property
    def k(self) -> int: ...
    @property
    def radius(self) -> Optional[int]: ...
    @property
    def cost(self) -> str: ...
    @property
    def normalization(self) -> str: ...
    @property
    def probing(self) -> str: ...
    @property
    def pattern(self) -> Optional[str]: ...
    @property
    def training(self) -> Any: ...
    @property
    def references(self) -> npt.NDArray[np.float64]: ...
    @property
    def labels(self) -> npt.NDArray[np.int64]: ...
    def __len__(self) -> int: ...

def load_model(path: str) -> Model: ...
def cross_validate(
    x: npt.ArrayLike,
    y: Sequence[int],
    classes: Sequence[str],
    k: int = 1,
    radius: Optional[int] = 10,
    cost: str = "abs",
    normalization: str = "none",
    folds: int = 5,
    seed: int = 0,
) -> dict[str, Any]: ...

# --- bandwidth estimation (opsel::bwe, document 001) -------------------------------

class Abest:
    abest_bps: float
    excursion_start: Optional[int]
    below_range: bool
    above_range: bool

def bwe_estimate(
    send_gaps_ns: npt.ArrayLike,
    recv_gaps_ns: npt.ArrayLike,
    r_avg_bps: float,
    n_rates: int = 4,
    packets_per_rate: int = 16,
    range: float = 0.5,
    packet_bytes: int = 9038,
    thresholds: str = "thesis",
    reference_gap_ns: float = ...,
    avg_window: Optional[int] = None,
    window: str = "trailing",
    head: str = "average",
    tail: str = "average",
    variant: str = "corrected",
    epsilon_ns: float = 100.0,
    min_excursion: int = 4,
    abest_variant: str = "corrected",
) -> Abest:
    """Multi-pass BASS + AVG_WINDOW + ABest (001 Alg. 5) on float64 gap arrays in ns."""

def bwe_decide_single_rate(
    send_gaps_ns: npt.ArrayLike,
    recv_gaps_ns: npt.ArrayLike,
    rel_tol: float = 0.0,
    thresholds: str = "thesis",
    reference_gap_ns: float = ...,
    head: str = "average",
    tail: str = "average",
    variant: str = "corrected",
) -> bool:
    """True when the single probing rate exceeds the available bandwidth (001 §5.3.2)."""

def pstream_rates(
    r_avg_bps: float, n_rates: int = 4, packets_per_rate: int = 16, range: float = 0.5, packet_bytes: int = 9038
) -> npt.NDArray[np.float64]: ...
def pstream_send_gaps(
    r_avg_bps: float, n_rates: int = 4, packets_per_rate: int = 16, range: float = 0.5, packet_bytes: int = 9038
) -> npt.NDArray[np.float64]: ...

class BweMl:
    """ML multi-rate estimator (001 Ch 6): tree regressor on FFT-magnitude features."""
    def __init__(self, path: Optional[str] = None, json: Optional[str] = None, n_packets: int = 64) -> None: ...
    @property
    def n_packets(self) -> int: ...
    def estimate(self, send_gaps_ns: npt.ArrayLike, recv_gaps_ns: npt.ArrayLike, r_avg_bps: float) -> float: ...

class RateAdapter:
    """Rapid's rate adapter (001 §2.3, §8.1)."""
    def __init__(
        self,
        init_bps: float = 100e3,
        min_bps: float = 100e3,
        max_bps: float = ...,
        tau_ns: float = 50e6,
        eta: float = 0.25,
        eta_param: str = "tabulated",
        gamma: int = 3,
        loss_cut: float = 0.25,
    ) -> None: ...
    @property
    def r_avg_bps(self) -> float: ...
    def on_estimate(self, abest_bps: float, duration_ns: float) -> Optional[float]: ...
    def on_loss(self) -> float: ...
