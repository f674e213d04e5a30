//! C API of document 003's α-flow identification (`opsel::flows`): feed flow
//! records (a `repr(C)` struct, addresses as text), take the daily reports as
//! JSON; build the two-class tc advice; keep the per-destination-prefix
//! decision cache. JSON out is the core's serialized form, as in Python and
//! Node.

use crate::error::{guard, opsel_status, out_ptr, utf8, Fail};
use crate::handle::Handle;
use crate::json;
use crate::model::clear_out;
use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache};
use opsel::flows::qos::{self, QosSpec};
use opsel::flows::{AlphaAggregator, AlphaSpec, FlowRecord};
use std::ffi::{c_char, CString};
use std::net::IpAddr;

/// One NetFlow / IPFIX flow report (003 Table 3.4). Addresses are
/// NUL-terminated IPv4 or IPv6 text; times are ns since the Unix epoch;
/// bytes and packets are as exported (sampled), `sampling_interval` is N.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_flow_record {
    pub src_addr: *const c_char,
    pub dst_addr: *const c_char,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub bytes: u64,
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub sampling_interval: u32,
}

/// A streaming α-flow identifier. Opaque: `opsel_alpha_identifier_new()` /
/// `opsel_alpha_identifier_free()`. One thread at a time.
pub struct opsel_alpha_identifier {
    inner: AlphaAggregator,
}

/// The per-destination-prefix decision cache. Opaque:
/// `opsel_decision_cache_load()` / `opsel_decision_cache_free()`.
pub struct opsel_decision_cache {
    inner: DecisionCache,
}

fn ip(p: *const c_char, what: &str) -> Result<IpAddr, Fail> {
    let s = unsafe { utf8(p, what) }?;
    s.parse()
        .map_err(|_| Fail::invalid(format!("{what} {s:?} is not an IPv4 or IPv6 address")))
}

/// Create an identifier. `spec_json` is NULL for the defaults (H = 1 GB,
/// /24, daily intervals, 30-day aging) or an `opsel::flows::AlphaSpec`
/// object such as `{"h_bytes": 1000000000, "prefix_len_v4": 32}`.
/// Ownership: release with `opsel_alpha_identifier_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_alpha_identifier_new(
    spec_json: *const c_char,
    out_identifier: *mut *mut opsel_alpha_identifier,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_identifier)?;
        let spec: AlphaSpec = json::arg_or_default(spec_json, "spec_json")?;
        opsel_alpha_identifier {
            inner: AlphaAggregator::new(spec)?,
        }
        .into_out(out);
        Ok(())
    })
}

/// Release an identifier. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_alpha_identifier_free(identifier: *mut opsel_alpha_identifier) {
    unsafe { Handle::free(identifier) }
}

/// Take `len` records; `*out_alpha` (may be NULL) counts the α reports
/// among them (eq 3.1). A bad record (unparsable address, last before first
/// packet) stops the call with `OPSEL_INVALID_INPUT` naming its index; the
/// records before it are kept.
#[no_mangle]
pub unsafe extern "C" fn opsel_alpha_identifier_push(
    identifier: *mut opsel_alpha_identifier,
    records: *const opsel_flow_record,
    len: usize,
    out_alpha: *mut usize,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow_mut(identifier) }?;
        if records.is_null() && len > 0 {
            return Err(Fail::null("records"));
        }
        let recs = if len == 0 {
            &[][..]
        } else {
            // SAFETY: non-null; the caller promises `len` readable records.
            unsafe { std::slice::from_raw_parts(records, len) }
        };
        let mut alpha = 0;
        for (i, r) in recs.iter().enumerate() {
            let rec = FlowRecord {
                src_addr: ip(r.src_addr, &format!("records[{i}].src_addr"))?,
                dst_addr: ip(r.dst_addr, &format!("records[{i}].dst_addr"))?,
                src_port: r.src_port,
                dst_port: r.dst_port,
                proto: r.proto,
                bytes: r.bytes,
                packets: r.packets,
                first_ns: r.first_ns,
                last_ns: r.last_ns,
                sampling_interval: r.sampling_interval,
            };
            let is_alpha = a
                .inner
                .push(&rec)
                .map_err(|e| Fail::invalid(format!("records[{i}]: {e}")))?;
            alpha += usize::from(is_alpha);
        }
        if !out_alpha.is_null() {
            // SAFETY: non-null; the caller promises a writable size_t.
            unsafe { *out_alpha = alpha };
        }
        Ok(())
    })
}

/// Close every aggregation interval that starts before `day` and write
/// their reports as a JSON array into `*out_json` (day, reports,
/// alpha_reports, alpha_flows, prefix_flows with alpha_bytes and
/// alpha_time_ns). Ownership: release with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_alpha_identifier_take_days_json(
    identifier: *mut opsel_alpha_identifier,
    day: u64,
    out_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        let a = unsafe { Handle::borrow_mut(identifier) }?;
        json::out(&a.inner.take_days_before(day), out)
    })
}

/// The two-class advice of 003 Ch. 4 as a tc plan, in JSON
/// (`*out_plan_json`) and as a shell script for `dev` (`*out_script`, may be
/// NULL). `prefix_ids` holds one α prefix ID per line (`SRC/len -> DST/len`);
/// `spec` is a preset name (`default`, `exp2`, `testbed`) or a QoS spec
/// object in JSON; `link_rate_bps` (0: the spec's) sets the rate. `netns` may
/// be NULL. Ownership: release both strings with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_qos_plan(
    prefix_ids: *const c_char,
    spec: *const c_char,
    link_rate_bps: u64,
    dev: *const c_char,
    netns: *const c_char,
    out_plan_json: *mut *mut c_char,
    out_script: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_plan_json)?;
        let ids = unsafe { utf8(prefix_ids, "prefix_ids") }?;
        let spec_text = unsafe { utf8(spec, "spec") }?;
        let mut s: QosSpec = if spec_text.trim_start().starts_with('{') {
            serde_json::from_str(spec_text)
                .map_err(|e| Fail::invalid(format!("bad QoS spec: {e}")))?
        } else {
            qos::preset(spec_text)?
        };
        if link_rate_bps > 0 {
            s.link_rate_bps = link_rate_bps;
        }
        let plan = qos::plan(&qos::parse_prefix_ids(ids.lines())?, &s)?;
        if !out_script.is_null() {
            let script_out = clear_out(out_script)?;
            let dev = unsafe { utf8(dev, "dev") }?;
            let ns = if netns.is_null() {
                None
            } else {
                Some(unsafe { utf8(netns, "netns") }?)
            };
            *script_out = CString::new(plan.script(dev, ns)?)
                .map_err(|_| Fail::invalid("script contains NUL"))?
                .into_raw();
        }
        json::out(&plan, out)
    })
}

/// Read a decision-cache file (`path`), or start an empty cache when it does
/// not exist. `spec_json` is NULL for the defaults (/24, /64, 30 days, 4096
/// prefixes). A damaged file is `OPSEL_INVALID_INPUT` and is left as it is.
/// Ownership: release with `opsel_decision_cache_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_decision_cache_load(
    path: *const c_char,
    spec_json: *const c_char,
    out_cache: *mut *mut opsel_decision_cache,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_cache)?;
        let p = unsafe { utf8(path, "path") }?;
        let spec: CacheSpec = json::arg_or_default(spec_json, "spec_json")?;
        opsel_decision_cache {
            inner: DecisionCache::load_or_new(p, spec)?,
        }
        .into_out(out);
        Ok(())
    })
}

/// Release a cache. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_decision_cache_free(cache: *mut opsel_decision_cache) {
    unsafe { Handle::free(cache) }
}

/// Record what OPS decided toward `dst` (class `label`, `cca`, `confidence`
/// in [0, 1]) at `at_s` (Unix seconds).
#[no_mangle]
pub unsafe extern "C" fn opsel_decision_cache_record(
    cache: *mut opsel_decision_cache,
    dst: *const c_char,
    label: *const c_char,
    cca: *const c_char,
    confidence: f64,
    at_s: f64,
) -> opsel_status {
    guard(|| {
        let c = unsafe { Handle::borrow_mut(cache) }?;
        let d = Decision {
            label: unsafe { utf8(label, "label") }?.to_owned(),
            cca: unsafe { utf8(cca, "cca") }?.to_owned(),
            confidence,
            at_s,
        };
        Ok(c.inner.record(ip(dst, "dst")?, d)?)
    })
}

/// The decision toward `dst`'s prefix if younger than the maximum age at
/// `now_s`, as JSON (`label`, `cca`, `confidence`, `at_s`) in `*out_json`;
/// NULL when there is none. Ownership: release with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_decision_cache_lookup(
    cache: *const opsel_decision_cache,
    dst: *const c_char,
    now_s: f64,
    out_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        let c = unsafe { Handle::borrow(cache) }?;
        match c.inner.lookup(ip(dst, "dst")?, now_s) {
            Some(p) => json::out(p.decision, out),
            None => Ok(()),
        }
    })
}

/// Every flow record of the nfdump capture file at `path` (what `nfcapd`
/// writes; layout 2, uncompressed or LZ4), in file order, as a JSON array of
/// the objects `opsel_alpha_identifier_push` describes (003 Table 3.4) in
/// `*out_json`. Ownership: release with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_flows_read_nfcapd(
    path: *const c_char,
    out_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        let p = unsafe { utf8(path, "path") }?;
        json::out(&opsel::flows::nffile::read_path(p.as_ref())?, out)
    })
}

/// Write the cache to `path` atomically, dropping entries aged out at `now_s`.
#[no_mangle]
pub unsafe extern "C" fn opsel_decision_cache_save(
    cache: *mut opsel_decision_cache,
    path: *const c_char,
    now_s: f64,
) -> opsel_status {
    guard(|| {
        let c = unsafe { Handle::borrow_mut(cache) }?;
        let p = unsafe { utf8(path, "path") }?;
        Ok(c.inner.save(p, now_s)?)
    })
}

/// Entries held (`*out_len`).
#[no_mangle]
pub unsafe extern "C" fn opsel_decision_cache_len(
    cache: *const opsel_decision_cache,
    out_len: *mut usize,
) -> opsel_status {
    guard(|| {
        *out_ptr(out_len, "out_len")? = unsafe { Handle::borrow(cache) }?.inner.len();
        Ok(())
    })
}
