//! JavaScript values ↔ core serde types, for every module (not Linux-gated):
//! objects come in through napi's `serde-json` with camelCase keys turned
//! snake_case, outputs go out as the core's serde form with camelCase keys
//! and `kind` tags (`docs/architecture.md`, "One event schema").

use crate::error::{invalid, Code};

/// `until_ns` → `untilNs`.
pub(crate) fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut up = false;
    for c in key.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A core value in its Node form: its serde JSON (the one schema) with every
/// key, and the `kind` tag, in camelCase. The core's values serialize
/// without error (string keys only), so a failure would be a bug: it shows
/// as `null`, never as a panic.
pub(crate) fn js_form<T: serde::Serialize>(v: &T) -> serde_json::Value {
    use serde_json::Value;
    fn walk(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::String(s) if k == "kind" => Value::String(camel(&s)),
                            v => walk(v),
                        };
                        (camel(&k), v)
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(walk).collect()),
            v => v,
        }
    }
    walk(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// `fooBarS` → `foo_bar_s`.
pub(crate) fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value with every object key in snake_case. Whole numbers come
/// back as integers: napi hands JS numbers beyond i32 over as floats, which a
/// core integer field (`first_ns`, `bytes`) would refuse; an f64 field
/// takes an integer as well. Beyond 2^53 every double is a whole number and
/// is taken as the integer it is (an epoch time in ns, ~1.8e18, is already
/// rounded to 256 ns by JS; a NetFlow record's times are ms at best).
pub(crate) fn snake_keys(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (snake(&k), snake_keys(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(snake_keys).collect()),
        Value::Number(n) => match n.as_f64() {
            Some(x)
                if n.is_f64()
                    && x.fract() == 0.0
                    && (-9.223_372_036_854_776e18..1.844_674_407_370_955_2e19).contains(&x) =>
            {
                if x >= 0.0 {
                    Value::from(x as u64)
                } else {
                    Value::from(x as i64)
                }
            }
            _ => Value::Number(n),
        },
        v => v,
    }
}

/// A core value as a binding struct that declares its fields (or some of
/// them) under the core's serde names, for napi's typed objects.
pub(crate) fn via_serde<T: serde::Serialize, U: serde::de::DeserializeOwned>(
    v: &T,
) -> napi::Result<U, Code> {
    serde_json::to_value(v)
        .and_then(serde_json::from_value)
        .map_err(|e| invalid(format!("a core value did not convert (a bug): {e}")))
}

/// A JS object (camelCase keys) or JSON text as a core serde value.
pub(crate) fn core_value<T: serde::de::DeserializeOwned>(
    v: serde_json::Value,
    what: &str,
) -> napi::Result<T, Code> {
    let v = match v {
        serde_json::Value::String(text) => {
            serde_json::from_str(&text).map_err(|e| invalid(format!("{what} is not JSON: {e}")))?
        }
        v => snake_keys(v),
    };
    serde_json::from_value(v).map_err(|e| invalid(format!("bad {what}: {e}")))
}

/// [`core_value`], with `undefined` or `null` giving the default.
pub(crate) fn core_value_or_default<T: serde::de::DeserializeOwned + Default>(
    v: Option<serde_json::Value>,
    what: &str,
) -> napi::Result<T, Code> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(v) => core_value(v, what),
    }
}

/// A non-negative integer number of ns from a JS number.
pub(crate) fn ns(v: f64, what: &str) -> napi::Result<u64, Code> {
    whole(v, what, "nanoseconds")
}

/// A non-negative integer (exact in a JS number) of `unit`.
pub(crate) fn whole(v: f64, what: &str, unit: &str) -> napi::Result<u64, Code> {
    if !(v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_992.0) {
        return Err(invalid(format!(
            "{what} = {v} must be a whole number of {unit} in [0, 2^53]"
        )));
    }
    Ok(v as u64)
}
