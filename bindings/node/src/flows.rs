//! `AlphaIdentifier`, `QosPlan` and `DecisionCache` (core: `opsel::flows`):
//! document 003's α-flow identification from sampled flow records, the
//! two-class tc advice, and the per-destination-prefix cache of OPS
//! decisions. Specs and records are plain objects (camelCase or snake_case
//! keys) converted into the core's serde types; results are the core's
//! serialized form with camelCase keys.

use crate::convert::{core_value_or_default, js_form, snake_keys, whole};
use crate::error::{guard, invalid, to_js, Code};
use napi_derive::napi;
use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache as CoreCache};
use opsel::flows::qos::{self, QosSpec, TcPlan};
use opsel::flows::{AlphaAggregator, AlphaSpec, FlowRecord};
use std::net::IpAddr;

fn addr(s: &str) -> napi::Result<IpAddr, Code> {
    s.parse()
        .map_err(|_| invalid(format!("{s:?} is not an IPv4 or IPv6 address")))
}

/// Streaming α-flow identifier (003 §3.5.1): `push` flow records, then
/// `finish()` for the per-interval (daily) reports.
#[napi]
pub struct AlphaIdentifier {
    inner: Option<AlphaAggregator>,
}

impl AlphaIdentifier {
    fn agg(&mut self) -> napi::Result<&mut AlphaAggregator, Code> {
        self.inner
            .as_mut()
            .ok_or_else(|| invalid("finish() was called; make a new AlphaIdentifier"))
    }
}

#[napi]
impl AlphaIdentifier {
    /// `spec`: `{hBytes, prefixLenV4, prefixLenV6, aggIntervalNs, ...}`, each optional.
    #[napi(constructor, ts_args_type = "spec?: Record<string, unknown>")]
    pub fn new(spec: Option<serde_json::Value>) -> napi::Result<Self, Code> {
        let spec: AlphaSpec = core_value_or_default(spec, "alpha spec")?;
        guard(|| {
            Ok(Self {
                inner: Some(AlphaAggregator::new(spec).map_err(to_js)?),
            })
        })
    }

    /// One record `{srcAddr, dstAddr, srcPort, dstPort, proto, bytes,
    /// packets, firstNs, lastNs, samplingInterval}`; true for an α report (eq 3.1).
    #[napi(ts_args_type = "record: FlowRecordObject")]
    pub fn push(&mut self, record: serde_json::Value) -> napi::Result<bool, Code> {
        let rec: FlowRecord = serde_json::from_value(snake_keys(record))
            .map_err(|e| invalid(format!("bad record: {e}")))?;
        let agg = self.agg()?;
        guard(|| agg.push(&rec).map_err(to_js))
    }

    /// Close and return every interval that starts before `day`.
    #[napi(ts_return_type = "Array<Record<string, unknown>>")]
    pub fn take_days_before(&mut self, day: f64) -> napi::Result<serde_json::Value, Code> {
        let d = whole(day, "day", "intervals")?;
        Ok(js_form(&self.agg()?.take_days_before(d)))
    }

    /// Close and return every interval; the identifier is then used up.
    #[napi(ts_return_type = "Array<Record<string, unknown>>")]
    pub fn finish(&mut self) -> napi::Result<serde_json::Value, Code> {
        let agg = self
            .inner
            .take()
            .ok_or_else(|| invalid("finish() was already called"))?;
        Ok(js_form(&agg.finish()))
    }
}

/// Every flow record of an nfdump capture file (what `nfcapd` writes; layout
/// 2, uncompressed or LZ4), in file order, as objects in the form
/// `AlphaIdentifier.push` takes (camelCase keys; counts and times as numbers).
#[napi(ts_return_type = "FlowRecordObject[]")]
pub fn read_nfcapd(path: String) -> napi::Result<serde_json::Value, Code> {
    guard(|| {
        let recs = opsel::flows::nffile::read_path(std::path::Path::new(&path)).map_err(to_js)?;
        Ok(js_form(&recs))
    })
}

/// A flow record (003 Table 3.4); times in ns since the epoch.
#[allow(dead_code)]
#[napi(object)]
pub struct FlowRecordObject {
    pub src_addr: String,
    pub dst_addr: String,
    pub src_port: u32,
    pub dst_port: u32,
    pub proto: u32,
    pub bytes: f64,
    pub packets: f64,
    pub first_ns: f64,
    pub last_ns: f64,
    pub sampling_interval: u32,
}

/// The two-class advice of 003 Ch. 4 as a tc plan.
#[napi]
pub struct QosPlan {
    inner: TcPlan,
}

#[napi]
impl QosPlan {
    /// `prefixIds`: strings such as `"10.1.2.0/24 -> 10.3.4.0/24"`; `spec`: a
    /// preset name ("default", "exp2", "testbed") or a QoS spec object;
    /// `linkRateBps` overrides the spec's rate.
    #[napi(
        constructor,
        ts_args_type = "prefixIds: string[], spec?: string | Record<string, unknown>, linkRateBps?: number"
    )]
    pub fn new(
        prefix_ids: Vec<String>,
        spec: Option<serde_json::Value>,
        link_rate_bps: Option<f64>,
    ) -> napi::Result<Self, Code> {
        let mut spec: QosSpec = match spec {
            Some(serde_json::Value::String(name)) => qos::preset(&name).map_err(to_js)?,
            other => core_value_or_default(other, "QoS spec")?,
        };
        if let Some(r) = link_rate_bps {
            spec.link_rate_bps = whole(r, "linkRateBps", "bit/s")?;
        }
        guard(|| {
            let ids =
                qos::parse_prefix_ids(prefix_ids.iter().map(String::as_str)).map_err(to_js)?;
            Ok(Self {
                inner: qos::plan(&ids, &spec).map_err(to_js)?,
            })
        })
    }

    /// The plan as data (spec, defaultClass, classes, filters, notes).
    #[napi(ts_return_type = "Record<string, unknown>")]
    pub fn to_object(&self) -> serde_json::Value {
        js_form(&self.inner)
    }

    /// Advice that is not an error (e.g. a β share below 003 Exp 6's 30 %).
    #[napi(getter)]
    pub fn notes(&self) -> Vec<String> {
        self.inner.notes.clone()
    }

    /// The tc argument lists (without the program name) for `dev`, in `netns` if given.
    #[napi]
    pub fn commands(
        &self,
        dev: String,
        netns: Option<String>,
    ) -> napi::Result<Vec<Vec<String>>, Code> {
        self.inner.commands(&dev, netns.as_deref()).map_err(to_js)
    }

    /// The same as a shell script.
    #[napi]
    pub fn script(&self, dev: String, netns: Option<String>) -> napi::Result<String, Code> {
        self.inner.script(&dev, netns.as_deref()).map_err(to_js)
    }
}

/// The last OPS decision per destination prefix (/24, /64), with aging.
#[napi]
pub struct DecisionCache {
    inner: CoreCache,
}

#[napi]
impl DecisionCache {
    /// `spec`: `{prefixLenV4, prefixLenV6, maxAgeS, capacity}`, each optional.
    #[napi(constructor, ts_args_type = "spec?: Record<string, unknown>")]
    pub fn new(spec: Option<serde_json::Value>) -> napi::Result<Self, Code> {
        let spec: CacheSpec = core_value_or_default(spec, "cache spec")?;
        Ok(Self {
            inner: CoreCache::new(spec).map_err(to_js)?,
        })
    }

    /// Read a cache file (missing: empty; damaged: an error, the file left as it is).
    #[napi(factory, ts_args_type = "path: string, spec?: Record<string, unknown>")]
    pub fn load(
        path: String,
        spec: Option<serde_json::Value>,
    ) -> napi::Result<DecisionCache, Code> {
        let spec: CacheSpec = core_value_or_default(spec, "cache spec")?;
        guard(|| {
            Ok(Self {
                inner: CoreCache::load_or_new(&path, spec).map_err(to_js)?,
            })
        })
    }

    /// Write the file atomically, dropping entries aged out at `nowS`.
    #[napi]
    pub fn save(&mut self, path: String, now_s: f64) -> napi::Result<(), Code> {
        self.inner.save(&path, now_s).map_err(to_js)
    }

    /// Record what OPS decided toward `dst` at `atS` (Unix seconds).
    #[napi]
    pub fn record(
        &mut self,
        dst: String,
        label: String,
        cca: String,
        confidence: f64,
        at_s: f64,
    ) -> napi::Result<(), Code> {
        let d = Decision {
            label,
            cca,
            confidence,
            at_s,
        };
        self.inner.record(addr(&dst)?, d).map_err(to_js)
    }

    /// The decision toward `dst`'s prefix if young enough:
    /// `{prefix, label, cca, confidence, atS, ageS}`, or null.
    #[napi(ts_return_type = "Record<string, unknown> | null")]
    pub fn lookup(&self, dst: String, now_s: f64) -> napi::Result<Option<serde_json::Value>, Code> {
        Ok(self.inner.lookup(addr(&dst)?, now_s).map(|p| {
            let mut v = js_form(p.decision);
            if let Some(o) = v.as_object_mut() {
                o.insert("prefix".into(), p.prefix.to_string().into());
                o.insert("ageS".into(), p.age_s.into());
            }
            v
        }))
    }

    /// Forget `dst`'s prefix (a prior that turned out wrong).
    #[napi]
    pub fn forget(&mut self, dst: String) -> napi::Result<bool, Code> {
        Ok(self.inner.forget(addr(&dst)?))
    }

    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.inner.len() as u32
    }
}
