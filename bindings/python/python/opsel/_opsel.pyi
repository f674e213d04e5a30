"""Type stubs for the compiled core module `opsel._opsel`."""

import os
from typing import Any, Callable, Optional, Sequence, Union

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
        sample_interval_ms: float = 1000.0,
        stage2: Optional[str] = None,
        stage2_k: int = 1,
        stage2_weight: float = 0.0,
        stage1_steps: float = 0.0,
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
    def stage2(self) -> Optional[dict[str, Any]]: ...
    @property
    def stage1_term(self) -> Optional[dict[str, Any]]: ...
    @property
    def probing(self) -> str: ...
    @property
    def sample_interval_ms(self) -> float: ...
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

# --- Linux socket adapter (opsel::sys::linux) -------------------------------
# Sockets are a socket.socket (anything with fileno()) or an int descriptor;
# opsel borrows them and never closes them. Error mapping (stable):
# unknown CCA (ENOENT) and non-TCP sockets -> InvalidInputError;
# CCA not in net.ipv4.tcp_allowed_congestion_control (EPERM) -> OpselPermissionError.

SocketLike = Any  # socket.socket or int fd

def available_ccas() -> list[str]: ...
def allowed_ccas() -> list[str]: ...
def get_cca(sock: SocketLike) -> str: ...
def set_cca(sock: SocketLike, name: str) -> str:
    """Switch a live TCP socket's CCA and return the read-back name."""

def tcp_info(sock: SocketLike) -> dict[str, Any]:
    """TCP_INFO snapshot: rtt_us, rttvar_us, min_rtt_us, snd_cwnd, snd_ssthresh, pacing_rate_bytes_per_s,
    delivery_rate_bytes_per_s, bytes_sent/acked/received/retrans, lost, ca_state, ... (None = not reported)."""

def tcp_rtt_ns(sock: SocketLike) -> int: ...
def set_max_pacing_rate(sock: SocketLike, rate_bps: Optional[int]) -> None: ...
def get_max_pacing_rate(sock: SocketLike) -> Optional[int]: ...
def detect_txtime(dst: str) -> dict[str, Any]:
    """{"enforced": bool, "device": str, "root_qdisc": str, "clockid": int | None, "reason": str}"""

class TcpInfoSampler:
    def __init__(self, sock: SocketLike) -> None: ...
    def sample(self) -> Optional[dict[str, Any]]:
        """at_ns, interval_ns, acked_bytes, received_bytes, acked_rate_bps, received_rate_bps, rtt_ns, rttvar_ns,
        min_rtt_ns, retrans_segs, cwnd."""
    def last(self) -> dict[str, Any]: ...

class PacedSender:
    def __init__(
        self,
        dst: str,
        payload_max: int = 1472,
        bind: Optional[str] = None,
        backend: str = "auto",
        catch_up: str = "rebase",
        sched_fifo: bool = False,
        spin_ns: Optional[int] = None,
        stall_ns: Optional[int] = None,
        tx_timestamps: bool = True,
        start_delay_ns: Optional[int] = None,
    ) -> None: ...
    @property
    def backend(self) -> str:
        """"txtime" or "userspace"."""
    @property
    def txtime(self) -> dict[str, Any]: ...
    @property
    def tx_timestamping(self) -> bool: ...
    def send_train(self, schedule_ns: npt.ArrayLike, payload_len: int = 1472, train_id: int = 0) -> dict[str, Any]:
        """Blocks (GIL released). Arrays: seq, scheduled_ns, departure_ns, sent_ns (uint64), tx_stamped_mask (bool)."""

class ProbeReceiver:
    def __init__(self, bind: str = "127.0.0.1:0", buf_len: int = 2048) -> None: ...
    @property
    def port(self) -> int: ...
    def recv_train(self, expected: int, idle_s: float = 0.2) -> dict[str, npt.NDArray[Any]]:
        """Arrays: seq, train_id, sched_offset_ns, send_ns, rx_ns, rx_kernel_mask, len."""

class IcmpProber:
    def __init__(self, dst: str) -> None: ...
    @property
    def kind(self) -> str: ...
    def burst(self, count: int = 10, interval_ns: int = 1_000_000, timeout_ns: int = 1_000_000_000) -> dict[str, Any]:
        """{"rtts_ms": ndarray (NaN = lost), "mean_rtt_ms": float | None, "lost": int, "start_ns": int}"""

class UdpEchoProber:
    def __init__(self, dst: str) -> None: ...
    def burst(self, count: int = 10, interval_ns: int = 1_000_000, timeout_ns: int = 1_000_000_000) -> dict[str, Any]: ...

class UdpEchoResponder:
    def __init__(self, bind: str = "127.0.0.1:0", delay_s: float = 0.0) -> None: ...
    @property
    def port(self) -> int: ...
    def stop(self) -> int: ...
    def __enter__(self) -> "UdpEchoResponder": ...
    def __exit__(self, _t: Any, _v: Any, _tb: Any) -> bool: ...

# --- FastProb early-stopping throughput probe (opsel::fastprob) -------------

class FastProbModel:
    @staticmethod
    def load(path: Union[str, "os.PathLike[str]"]) -> "FastProbModel": ...
    @staticmethod
    def from_json(text: str) -> "FastProbModel": ...
    @property
    def spec(self) -> dict[str, Any]: ...
    def predict_fixed(self, prefix: Sequence[float]) -> float: ...
    @property
    def family_budgets(self) -> dict[str, float]: ...
    def probe(
        self,
        threshold: Optional[float] = None,
        *,
        family: Optional[str] = None,
        stop_error_pct: Optional[float] = None,
    ) -> "FastProbe": ...

class FastProbe:
    def __init__(
        self,
        model: FastProbModel,
        threshold: Optional[float] = None,
        *,
        family: Optional[str] = None,
        stop_error_pct: Optional[float] = None,
    ) -> None: ...
    def push(self, sample_bps: float) -> dict[str, Any]: ...
    def reset(self) -> None: ...
    def __len__(self) -> int: ...

# --- α flows, QoS advice and the decision cache (opsel::flows) --------------

def read_nfcapd(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every flow record of an nfdump capture file (nfcapd's files; layout 2,
    uncompressed or LZ4), in file order, as the dicts AlphaIdentifier.push takes."""
    ...

class AlphaIdentifier:
    def __init__(self, spec: Optional[Union[dict[str, Any], str]] = None) -> None: ...
    @property
    def spec(self) -> dict[str, Any]: ...
    def push(self, record: Union[dict[str, Any], str]) -> bool: ...
    def push_columns(
        self,
        src_addr: Sequence[str],
        dst_addr: Sequence[str],
        src_port: Any,
        dst_port: Any,
        proto: Any,
        bytes: Any,
        packets: Any,
        first_ns: Any,
        last_ns: Any,
        sampling_interval: Any,
    ) -> int: ...
    def take_days_before(self, day: int) -> list[dict[str, Any]]: ...
    def finish(self) -> list[dict[str, Any]]: ...

class QosPlan:
    def __init__(
        self,
        prefix_ids: Sequence[str],
        spec: Optional[Union[dict[str, Any], str]] = None,
        link_rate_bps: Optional[int] = None,
    ) -> None: ...
    def to_dict(self) -> dict[str, Any]: ...
    @property
    def notes(self) -> list[str]: ...
    def commands(self, dev: str, netns: Optional[str] = None) -> list[list[str]]: ...
    def script(self, dev: str, netns: Optional[str] = None) -> str: ...

class DecisionCache:
    def __init__(self, spec: Optional[Union[dict[str, Any], str]] = None) -> None: ...
    @staticmethod
    def load(path: Union[str, "os.PathLike[str]"], spec: Optional[Union[dict[str, Any], str]] = None) -> "DecisionCache": ...
    def save(self, path: Union[str, "os.PathLike[str]"], now_s: float) -> None: ...
    def record(self, dst: str, label: str, cca: str, confidence: float, at_s: float) -> None: ...
    def lookup(self, dst: str, now_s: float) -> Optional[dict[str, Any]]: ...
    def forget(self, dst: str) -> bool: ...
    def __len__(self) -> int: ...

# --- DPS learner (opsel::dps) and fairness manager (opsel::fair) ------------

class DpsAgent:
    def __init__(self, spec: Union[dict[str, Any], str], managed: bool = False) -> None: ...
    def start(self, now_ns: int) -> None: ...
    def feedback(self, now_ns: int, rtt_ms: float, delivery_rate_mbps: float) -> None: ...
    def handle_feedback(self, now_ns: int, feedback: dict[str, Any]) -> None: ...
    def handle_timeout(self, now_ns: int) -> None: ...
    def handle_command(self, now_ns: int, command: dict[str, Any]) -> None: ...
    def set_network_state(self, label: str) -> None: ...
    def poll(self) -> Optional[dict[str, Any]]: ...
    def poll_timeout(self) -> Optional[int]: ...
    @property
    def current(self) -> Optional[str]: ...
    @property
    def phase(self) -> dict[str, Any]: ...
    @property
    def learning(self) -> bool: ...
    @property
    def state_key(self) -> str: ...
    def stats(self) -> dict[str, Any]: ...

class FairManager:
    def __init__(self, spec: Optional[dict[str, Any]] = None) -> None: ...
    def register(self, flow: int) -> None: ...
    def deregister(self, flow: int) -> None: ...
    def handle_report(self, flow: int, report: dict[str, Any]) -> None: ...
    def report_rate(self, flow: int, rate_mbps: float) -> None: ...
    def evaluate(self) -> Optional[float]: ...
    def poll(self) -> Optional[tuple[int, dict[str, Any]]]: ...
    @property
    def unlocked(self) -> Optional[int]: ...
    @property
    def last_jain(self) -> Optional[float]: ...
    def stats(self) -> dict[str, Any]: ...

# --- OPS controller (opsel::ops) and fairness (opsel::fair) ----------------

class Controller:
    def __init__(
        self,
        model: Any,  # opsel.Model or a model-file path
        spec: Optional[dict[str, Any]] = None,  # the same fields as a dict (opsel::ops::ControllerSpec)
        *,
        mode: str = "passive",
        pattern: Optional[str] = None,  # active only; default "S5-C5-S5-B5"
        steady_s: Optional[float] = None,  # default 60 (passive) / 100 (active); 0 = probe once
        policy: Any = "stump",  # "stump", a table spec "B1-C1=bbr, *=cubic", or Callable[[dict], str]
        initial_cca: str = "cubic",
        adaptive: Any = None,  # True or {"min_s", "max_s", "grow", "shrink", "key"}
        progressive: Any = None,  # True or {"min_samples", "step", "min_confidence", "agree"}
        prefix_lens: Optional[Sequence[int]] = None,  # default every step from min_samples below w
        sample_period_s: float = 1.0,
        grace_periods: int = 5,
        steady_jitter: float = 0.0,
        seed: int = 0,
        cycles: int = 1,  # windows per decision; > 1 = min-sum; with progressive, stop after a window whose margin >= min_confidence
        gate_margin: Optional[float] = None,  # margin-gated probing (cycles >= 2)
        gate: Optional[str] = None,  # probe gate file, e.g. models/passive/gate.json; stats()["gate_exits"]
        gate_threshold: Optional[float] = None,  # override of the gate file's threshold, in [0, 1]
        check_model: bool = True,  # reject a model trained for another probing mode/pattern
    ) -> None: ...
    def start(self, now_ns: int) -> None: ...
    def handle_sample(self, now_ns: int, rtt_ms: float) -> None: ...
    def handle_timeout(self, now_ns: int) -> None: ...
    def handle_bytes(self, now_ns: int, bytes: int) -> None: ...
    def poll_timeout(self) -> Optional[int]: ...
    def poll(self) -> Optional[dict[str, Any]]: ...
    def drain(self) -> list[dict[str, Any]]: ...
    @property
    def phase(self) -> str: ...
    @property
    def cycle(self) -> int: ...
    @property
    def socket_cca(self) -> str: ...
    @property
    def steady_ns(self) -> int: ...
    @property
    def window_len(self) -> int: ...
    @property
    def cycles(self) -> int: ...
    @property
    def classes(self) -> list[str]: ...
    def stats(self, now_ns: Optional[int] = None) -> dict[str, int]: ...

# --- OPS driver (opsel::sys::linux::ops_driver) -----------------------------

class OpsDriver:
    """Run OPS on your own connected TCP socket; one run per driver."""

    def __init__(
        self,
        model: Any,  # opsel.Model, a model-file path, or a fresh opsel.Controller
        probe: str,  # "HOST:PORT" / "udp:HOST:PORT" (UDP echo) or "icmp:IP" (ICMPv6 for an IPv6 address)
        *,
        time_limit_s: Optional[float] = None,
        interval_s: float = 1.0,
        lead_in: bool = True,
        notsent_lowat_bytes: Optional[int] = 131072,
        chunk_bytes: int = 262144,
        echo_count: int = 10,
        echo_interval_s: float = 0.001,
        echo_timeout_s: float = 0.4,
        **controller: Any,  # opsel.Controller keywords (mode, pattern, steady_s, policy, ...)
    ) -> None: ...
    def run(
        self,
        sock: Any,  # int descriptor or object with fileno(); connected TCP
        data: Any,  # bytes-like, binary file object, or Callable[[int], bytes]
        on_event: Optional[Callable[[dict[str, Any]], Any]] = None,
        collect_events: Optional[bool] = None,  # default: when on_event is None
    ) -> dict[str, Any]: ...
    def stop(self) -> None: ...
    @property
    def classes(self) -> list[str]: ...

def send_fixed(
    sock: Any,
    data: Any,
    cca: str,
    on_event: Optional[Callable[[dict[str, Any]], Any]] = None,
    collect_events: Optional[bool] = None,
    *,
    time_limit_s: Optional[float] = None,
    interval_s: float = 1.0,
    notsent_lowat_bytes: Optional[int] = 131072,
    chunk_bytes: int = 262144,
) -> dict[str, Any]: ...

def jain(rates: Sequence[float]) -> float: ...
def fair_share(capacity: float, n_streams: int) -> float: ...

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

def bwe_trend(owd: npt.ArrayLike) -> tuple[str, float, float]:
    """Pathload PCT/PDT trend tests (001 §2.2.1.2) on one-way delays: (trend, pct, pdt),
    trend "increasing", "no_trend" or "ambiguous"."""

def bwe_baseline(
    send_gaps_ns: npt.ArrayLike,
    recv_gaps_ns: npt.ArrayLike,
    method: str = "imr-avg",
    levels: int = 3,
) -> str:
    """Single-rate baseline of 001 Ch 5: "pathload", "imr-avg" or "imr-wavelet" (levels-stage
    Daubechies D4) on the one-way delays rebuilt from the gaps; returns the trend."""

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

# ---- transfer (opsel-transfer: the data path of `opsel send` / `opsel recv`) ----

class Stop:
    """A stop flag for send_file: set() (any thread) ends a running transfer
    early; the receiver keeps the bytes sent as a verified prefix."""
    def __init__(self) -> None: ...
    def set(self) -> None: ...
    def is_set(self) -> bool: ...

def send_file(
    sock: Any,  # connected TCP socket (or its int descriptor) to an opsel receiver; left open
    path: str | os.PathLike[str],
    spec: Optional[dict[str, Any] | str] = None,  # SendSpec: cca, hash ("xxh3"|"blake3"), offset,
    # resume, name, streams, time_s, interval_s, key, ops (OpsSpec: model, pattern, steady_s,
    # initial_cca, gate, gate_threshold, rtt, lead_in, adaptive, early_exit, early_confidence,
    # cycles, extend_below, jitter, seed, policy, dps)
    stop: Optional[Stop] = None,
    on_event: Optional[Callable[[dict[str, Any]], Any]] = None,
) -> dict[str, Any]: ...  # SendReport: driver, offset, file_identical, complete, file_size,
# hash, digest, file_digest, streams, ops (decisions, ccas, failed_decisions, auto_model; None
# without ops)

def recv_file(
    sock: Any,  # listening TCP socket (or its int descriptor); left open, blocking
    path: str | os.PathLike[str],
    spec: Optional[dict[str, Any] | str] = None,  # RecvSpec: force, append, max_size,
    # handshake_s, idle_s, accept_timeout_s, key
) -> dict[str, Any]: ...  # RecvReport: peer, path, offset, received, hash, digest, verified,
# complete, file_size, file_digest, elapsed_s
