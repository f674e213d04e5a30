//! `opsel.AlphaIdentifier`, `opsel.QosPlan` and `opsel.DecisionCache` (core:
//! `opsel::flows`): document 003's α-flow identification from sampled flow
//! records, the two-class tc advice, and the per-destination-prefix cache
//! of OPS decisions. Specs are dicts (or JSON text) converted into the
//! core's serde types; results are dicts and lists in the core's serialized
//! form (`pandas.json_normalize(day["prefix_flows"])` gives a table).

use crate::convert::{from_any, invalid, spec_or_default, to_dict};
use crate::errors::IntoPy;
use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache as CoreCache};
use opsel::flows::qos::{self, QosSpec, TcPlan};
use opsel::flows::{AlphaAggregator, AlphaSpec, FlowRecord};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::net::IpAddr;

fn addr(s: &str, what: &str) -> PyResult<IpAddr> {
    s.parse()
        .map_err(|_| invalid(format!("{what} {s:?} is not an IPv4 or IPv6 address")))
}

/// Streaming α-flow identifier (003 §3.5.1): feed flow records, take the
/// per-interval (daily) reports: α flows, α prefix flows with α-bytes
/// (eq 3.2) and α-time (eq 3.3).
///
/// `spec`: `opsel::flows::AlphaSpec` as a dict (`h_bytes`, `prefix_len_v4`,
/// `agg_interval_ns`, `sampling_interval_override`, ...), each optional.
#[pyclass(module = "opsel._opsel", name = "AlphaIdentifier")]
pub struct AlphaIdentifier {
    inner: Option<AlphaAggregator>,
}

impl AlphaIdentifier {
    fn agg(&mut self) -> PyResult<&mut AlphaAggregator> {
        self.inner
            .as_mut()
            .ok_or_else(|| invalid("finish() was called; make a new AlphaIdentifier"))
    }
}

#[pymethods]
impl AlphaIdentifier {
    #[new]
    #[pyo3(signature = (spec = None))]
    fn new(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let spec: AlphaSpec = spec_or_default(spec, "alpha spec")?;
        Ok(Self {
            inner: Some(AlphaAggregator::new(spec).py_err()?),
        })
    }

    /// The spec in force, as a dict.
    #[getter]
    fn spec<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, self.agg()?.spec())
    }

    /// One record as a dict (`src_addr`, `dst_addr`, `src_port`, `dst_port`,
    /// `proto`, `bytes`, `packets`, `first_ns`, `last_ns`,
    /// `sampling_interval`). Returns whether it is an α report (eq 3.1).
    fn push(&mut self, record: &Bound<'_, PyAny>) -> PyResult<bool> {
        let rec: FlowRecord = from_any(record, "record")?;
        self.agg()?.push(&rec).py_err()
    }

    /// Many records as columns (lists or numpy arrays of equal length, e.g.
    /// a pandas DataFrame's columns). Returns how many were α reports.
    #[allow(clippy::too_many_arguments)]
    fn push_columns(
        &mut self,
        src_addr: Vec<String>,
        dst_addr: Vec<String>,
        src_port: Vec<u16>,
        dst_port: Vec<u16>,
        proto: Vec<u8>,
        bytes: Vec<u64>,
        packets: Vec<u64>,
        first_ns: Vec<u64>,
        last_ns: Vec<u64>,
        sampling_interval: Vec<u32>,
    ) -> PyResult<usize> {
        let n = src_addr.len();
        let lens = [
            dst_addr.len(),
            src_port.len(),
            dst_port.len(),
            proto.len(),
            bytes.len(),
            packets.len(),
            first_ns.len(),
            last_ns.len(),
            sampling_interval.len(),
        ];
        if lens.iter().any(|&l| l != n) {
            return Err(invalid(format!(
                "columns have different lengths: src_addr {n}, the others {lens:?}"
            )));
        }
        let agg = self.agg()?;
        let mut alpha = 0;
        for i in 0..n {
            let rec = FlowRecord {
                src_addr: addr(&src_addr[i], &format!("src_addr[{i}]"))?,
                dst_addr: addr(&dst_addr[i], &format!("dst_addr[{i}]"))?,
                src_port: src_port[i],
                dst_port: dst_port[i],
                proto: proto[i],
                bytes: bytes[i],
                packets: packets[i],
                first_ns: first_ns[i],
                last_ns: last_ns[i],
                sampling_interval: sampling_interval[i],
            };
            let a = agg
                .push(&rec)
                .map_err(|e| invalid(format!("record {i}: {e}")))?;
            alpha += usize::from(a);
        }
        Ok(alpha)
    }

    /// Close and return every interval that starts before `day` (as dicts).
    fn take_days_before<'py>(&mut self, py: Python<'py>, day: u64) -> PyResult<Bound<'py, PyAny>> {
        let days = self.agg()?.take_days_before(day);
        Ok(pythonize::pythonize(py, &days)?)
    }

    /// Close and return every interval; the identifier is then used up.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let agg = self
            .inner
            .take()
            .ok_or_else(|| invalid("finish() was already called"))?;
        Ok(pythonize::pythonize(py, &agg.finish())?)
    }
}

/// The two-class advice of 003 Ch. 4 as a tc plan (htb α/β classes, bfifo
/// leaves, u32 prefix filters). `prefix_ids`: strings such as
/// `"10.1.2.0/24 -> 10.3.4.0/24"`; `spec`: a preset name (`"default"`,
/// `"exp2"`, `"testbed"`) or a `QosSpec` dict; `link_rate_bps` overrides the
/// spec's rate.
#[pyclass(module = "opsel._opsel", name = "QosPlan", frozen)]
pub struct QosPlan {
    inner: TcPlan,
}

#[pymethods]
impl QosPlan {
    #[new]
    #[pyo3(signature = (prefix_ids, spec = None, link_rate_bps = None))]
    fn new(
        prefix_ids: Vec<String>,
        spec: Option<&Bound<'_, PyAny>>,
        link_rate_bps: Option<u64>,
    ) -> PyResult<Self> {
        let mut spec: QosSpec = match spec {
            Some(s)
                if s.cast::<PyString>().is_ok() && !s.to_string().trim_start().starts_with('{') =>
            {
                qos::preset(&s.to_string()).py_err()?
            }
            other => spec_or_default(other, "QoS spec")?,
        };
        if let Some(r) = link_rate_bps {
            spec.link_rate_bps = r;
        }
        let ids = qos::parse_prefix_ids(prefix_ids.iter().map(String::as_str)).py_err()?;
        Ok(Self {
            inner: qos::plan(&ids, &spec).py_err()?,
        })
    }

    /// The plan as data (spec, default class, classes, filters, notes).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, &self.inner)
    }

    /// Advice that is not an error (e.g. a β share below 003 Exp 6's 30 %).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes.clone()
    }

    /// The `tc` argument lists (without the program name) that install the
    /// plan on `dev`, inside network namespace `netns` if given.
    #[pyo3(signature = (dev, netns = None))]
    fn commands<'py>(
        &self,
        py: Python<'py>,
        dev: &str,
        netns: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let cmds = self.inner.commands(dev, netns).py_err()?;
        PyList::new(py, cmds)
    }

    /// The same as a shell script.
    #[pyo3(signature = (dev, netns = None))]
    fn script(&self, dev: &str, netns: Option<&str>) -> PyResult<String> {
        self.inner.script(dev, netns).py_err()
    }
}

/// The last OPS decision per destination prefix (/24, /64), with aging
/// (003 H2: α flows repeat between the same /24 pairs). `spec`:
/// `{"prefix_len_v4": 24, "prefix_len_v6": 64, "max_age_s": 2592000, "capacity": 4096}`.
#[pyclass(module = "opsel._opsel", name = "DecisionCache")]
pub struct DecisionCache {
    inner: CoreCache,
}

#[pymethods]
impl DecisionCache {
    #[new]
    #[pyo3(signature = (spec = None))]
    fn new(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let spec: CacheSpec = spec_or_default(spec, "cache spec")?;
        Ok(Self {
            inner: CoreCache::new(spec).py_err()?,
        })
    }

    /// Read a cache file (a missing file is an empty cache with `spec`; a
    /// damaged one is an error and is left as it is).
    #[staticmethod]
    #[pyo3(signature = (path, spec = None))]
    fn load(path: std::path::PathBuf, spec: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let spec: CacheSpec = spec_or_default(spec, "cache spec")?;
        Ok(Self {
            inner: CoreCache::load_or_new(&path, spec).py_err()?,
        })
    }

    /// Write the file atomically, dropping entries aged out at `now_s`.
    fn save(&mut self, path: std::path::PathBuf, now_s: f64) -> PyResult<()> {
        self.inner.save(&path, now_s).py_err()
    }

    /// Record what OPS decided toward `dst` at `at_s` (Unix seconds).
    #[pyo3(signature = (dst, label, cca, confidence, at_s))]
    fn record(
        &mut self,
        dst: &str,
        label: String,
        cca: String,
        confidence: f64,
        at_s: f64,
    ) -> PyResult<()> {
        let d = Decision {
            label,
            cca,
            confidence,
            at_s,
        };
        self.inner.record(addr(dst, "dst")?, d).py_err()
    }

    /// The decision toward `dst`'s prefix if younger than the maximum age:
    /// a dict with `prefix`, `label`, `cca`, `confidence`, `at_s`, `age_s`.
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        dst: &str,
        now_s: f64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(p) = self.inner.lookup(addr(dst, "dst")?, now_s) else {
            return Ok(None);
        };
        let d = to_dict(py, p.decision)?;
        d.set_item("prefix", p.prefix.to_string())?;
        d.set_item("age_s", p.age_s)?;
        Ok(Some(d))
    }

    /// Forget `dst`'s prefix (a prior that turned out wrong).
    fn forget(&mut self, dst: &str) -> PyResult<bool> {
        Ok(self.inner.forget(addr(dst, "dst")?))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// Every flow record of an nfdump capture file (what `nfcapd` writes; layout
/// 2, uncompressed or LZ4), in file order, as dicts in the form
/// `AlphaIdentifier.push` takes (003 Table 3.4).
#[pyfunction]
fn read_nfcapd<'py>(py: Python<'py>, path: std::path::PathBuf) -> PyResult<Bound<'py, PyList>> {
    let recs = py
        .detach(|| opsel::flows::nffile::read_path(&path))
        .py_err()?;
    let items = recs
        .iter()
        .map(|r| to_dict(py, r))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_nfcapd, m)?)?;
    m.add_class::<AlphaIdentifier>()?;
    m.add_class::<QosPlan>()?;
    m.add_class::<DecisionCache>()?;
    Ok(())
}
