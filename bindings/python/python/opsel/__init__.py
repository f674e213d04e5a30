"""opsel: choose the TCP congestion control that fits the traffic you share the path with.

Recognise the background traffic mix (CUBIC vs BBR) from RTT time series with
DTW K-NN (document 000), and decide which congestion control a bulk transfer
should use. The algorithms run in the Rust core; this package is a thin layer.

Quick start::

    import opsel
    model = opsel.load_model(opsel.models.path("passive"))   # a shipped model
    pred = model.classify(rtt_window_ms)      # 1-D float64 array of w samples
    pred.label, pred.bbr_present, pred.distance
"""

from ._errors import (
    InvalidInputError,
    InvalidModelError,
    OpselError,
    OpselIOError,
    OpselPermissionError,
    UnsupportedError,
    UnsupportedVersionError,
)
from ._opsel import (
    Abest,
    BweMl,
    RateAdapter,
    bwe_baseline,
    bwe_decide_single_rate,
    bwe_estimate,
    bwe_trend,
    pstream_rates,
    pstream_send_gaps,
    DEFAULT_RADIUS,
    SIX_CLASSES,
    FastProbe,
    FastProbModel,
    Model,
    Prediction,
    __version__,
    aggregate,
    cross_validate,
    dtw_distance,
    load_model,
    normalize,
    parse_mix,
    synthetic_dataset,
    synthetic_series,
    windows,
)
from . import models
from .estimator import KnnDtw

__all__ = [
    "Abest",
    "BweMl",
    "RateAdapter",
    "bwe_baseline",
    "bwe_decide_single_rate",
    "bwe_estimate",
    "bwe_trend",
    "pstream_rates",
    "pstream_send_gaps",
    "DEFAULT_RADIUS",
    "SIX_CLASSES",
    "FastProbe",
    "FastProbModel",
    "InvalidInputError",
    "InvalidModelError",
    "KnnDtw",
    "Model",
    "OpselError",
    "OpselIOError",
    "OpselPermissionError",
    "Prediction",
    "UnsupportedError",
    "UnsupportedVersionError",
    "__version__",
    "aggregate",
    "cross_validate",
    "dtw_distance",
    "load_model",
    "models",
    "normalize",
    "parse_mix",
    "synthetic_dataset",
    "synthetic_series",
    "windows",
]

# Socket adapter and OPS controller (Linux only; see opsel.sys / opsel.ops docs).
try:
    from ._opsel import (  # noqa: F401
        AlphaIdentifier,
        Controller,
        DecisionCache,
        DpsAgent,
        FairManager,
        IcmpProber,
        OpsDriver,
        PacedSender,
        ProbeReceiver,
        QosPlan,
        TcpInfoSampler,
        UdpEchoProber,
        UdpEchoResponder,
        allowed_ccas,
        available_ccas,
        detect_txtime,
        fair_share,
        get_cca,
        get_max_pacing_rate,
        jain,
        read_nfcapd,
        Stop,
        recv_file,
        send_file,
        send_fixed,
        set_cca,
        set_max_pacing_rate,
        tcp_info,
        tcp_rtt_ns,
    )

    __all__ += [
        "Controller", "IcmpProber", "PacedSender", "ProbeReceiver", "TcpInfoSampler",
        "UdpEchoProber", "UdpEchoResponder", "allowed_ccas", "available_ccas", "detect_txtime",
        "fair_share", "get_cca", "get_max_pacing_rate", "jain", "set_cca", "set_max_pacing_rate",
        "tcp_info", "tcp_rtt_ns", "OpsDriver", "send_fixed", "DpsAgent", "FairManager",
        "AlphaIdentifier", "QosPlan", "DecisionCache", "send_file", "recv_file", "Stop", "read_nfcapd",
    ]
except ImportError:  # not Linux
    pass

