//! The JSON of `POST /json`: `RateLimitRequest` and `RateLimitResponse` in the
//! protobuf JSON mapping (Go's `protojson`), as the Go service reads and writes them.
//!
//! Reading: field names in lowerCamelCase or as in the `.proto` (`hitsAddend` or
//! `hits_addend`); integers as JSON numbers or strings; enums by name (`"MINUTE"`) or
//! number; `null` for the default; an unknown field is an error. Writing: lowerCamelCase
//! names, fields holding their zero value left out, enums by name, 64-bit integers as
//! strings, durations as `"60s"`, timestamps in RFC 3339, bytes in base64.
//!
//! # Examples
//!
//! ```
//! use tollgate_rls::json::request_from_json;
//!
//! let request = request_from_json(
//!     br#"{"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "alice"}]}]}"#,
//! )?;
//! assert_eq!(request.domain, "api");
//! assert_eq!(request.descriptors[0].entries[0].value, "alice");
//! # Ok::<(), tollgate_rls::json::JsonError>(())
//! ```

use std::fmt;
use std::fmt::Write as _;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, Quota, RateLimit, rate_limit::Unit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::google::protobuf::{self as pbuf, value::Kind};
use serde_json::{Map, Value};

/// A body that is not a `RateLimitRequest` in the protobuf JSON mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    message: String,
}

impl JsonError {
    fn new(message: impl Into<String>) -> JsonError {
        JsonError {
            message: message.into(),
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonError {}

/// Reads a `RateLimitRequest`.
///
/// # Errors
///
/// A [`JsonError`] saying what is wrong: not JSON, not an object, an unknown field, a
/// value of the wrong type or out of range, an unknown enum name.
///
/// # Examples
///
/// ```
/// use tollgate_rls::json::request_from_json;
///
/// let request = request_from_json(br#"{"domain": "api", "hits_addend": "3",
///     "descriptors": [{"entries": [{"key": "k"}], "limit": {"requestsPerUnit": 5, "unit": "MINUTE"}}]}"#)?;
/// assert_eq!(request.hits_addend, 3);
/// assert_eq!(request.descriptors[0].limit.unwrap().requests_per_unit, 5);
/// assert!(request_from_json(br#"{"domian": "api"}"#).is_err());
/// # Ok::<(), tollgate_rls::json::JsonError>(())
/// ```
pub fn request_from_json(body: &[u8]) -> Result<RateLimitRequest, JsonError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| JsonError::new(format!("not JSON: {e}")))?;
    let mut request = RateLimitRequest::default();
    for (name, value) in fields(
        &value,
        "RateLimitRequest",
        &["domain", "descriptors", "hitsAddend"],
    )? {
        match name {
            "domain" => request.domain = string(value, name)?,
            "descriptors" => {
                request.descriptors = list(value, name)?
                    .iter()
                    .map(descriptor)
                    .collect::<Result<_, _>>()?
            }
            _ => request.hits_addend = uint32(value, name)?,
        }
    }
    Ok(request)
}

fn descriptor(value: &Value) -> Result<RateLimitDescriptor, JsonError> {
    let mut descriptor = RateLimitDescriptor::default();
    for (name, value) in fields(
        value,
        "RateLimitDescriptor",
        &["entries", "limit", "hitsAddend"],
    )? {
        match name {
            "entries" => {
                descriptor.entries = list(value, name)?
                    .iter()
                    .map(entry)
                    .collect::<Result<_, _>>()?
            }
            "limit" => descriptor.limit = nullable(value, limit_override)?,
            _ => {
                descriptor.hits_addend = nullable(value, |v| {
                    Ok(pbuf::UInt64Value {
                        value: uint64(v, "hitsAddend")?,
                    })
                })?
            }
        }
    }
    Ok(descriptor)
}

fn entry(value: &Value) -> Result<Entry, JsonError> {
    let mut entry = Entry::default();
    for (name, value) in fields(value, "Entry", &["key", "value"])? {
        match name {
            "key" => entry.key = string(value, name)?,
            _ => entry.value = string(value, name)?,
        }
    }
    Ok(entry)
}

fn limit_override(value: &Value) -> Result<RateLimitOverride, JsonError> {
    let mut limit = RateLimitOverride::default();
    for (name, value) in fields(value, "RateLimitOverride", &["requestsPerUnit", "unit"])? {
        match name {
            "requestsPerUnit" => limit.requests_per_unit = uint32(value, name)?,
            _ => {
                limit.unit = enumeration(value, name, |s| {
                    RateLimitUnit::from_str_name(s).map(|u| u as i32)
                })?
            }
        }
    }
    Ok(limit)
}

/// The fields of an object, each by its JSON name; `null` ones left out.
fn fields<'v>(
    value: &'v Value,
    message: &str,
    known: &[&'static str],
) -> Result<Vec<(&'static str, &'v Value)>, JsonError> {
    let Value::Object(map) = value else {
        return Err(JsonError::new(format!("{message}: expected an object")));
    };
    let mut out: Vec<(&'static str, &'v Value)> = Vec::with_capacity(map.len());
    for (name, value) in map {
        let Some(known) = known.iter().find(|k| **k == name || snake_case(k) == *name) else {
            return Err(JsonError::new(format!("{message}: unknown field {name:?}")));
        };
        if out.iter().any(|(n, _)| n == known) {
            return Err(JsonError::new(format!(
                "{message}: duplicate field {known:?}"
            )));
        }
        if !value.is_null() {
            out.push((known, value));
        }
    }
    Ok(out)
}

fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn nullable<T>(
    value: &Value,
    read: impl FnOnce(&Value) -> Result<T, JsonError>,
) -> Result<Option<T>, JsonError> {
    if value.is_null() {
        Ok(None)
    } else {
        read(value).map(Some)
    }
}

fn string(value: &Value, name: &str) -> Result<String, JsonError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| JsonError::new(format!("{name}: expected a string")))
}

fn list<'v>(value: &'v Value, name: &str) -> Result<&'v Vec<Value>, JsonError> {
    value
        .as_array()
        .ok_or_else(|| JsonError::new(format!("{name}: expected a list")))
}

fn uint64(value: &Value, name: &str) -> Result<u64, JsonError> {
    let bad = || JsonError::new(format!("{name}: expected a non-negative integer"));
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(n) => Ok(n),
            None => integral(n.as_f64().ok_or_else(bad)?).ok_or_else(bad),
        },
        Value::String(s) => match s.parse::<u64>() {
            Ok(n) => Ok(n),
            Err(_) => integral(s.parse::<f64>().map_err(|_| bad())?).ok_or_else(bad),
        },
        _ => Err(bad()),
    }
}

/// A float written for an integer (`1e2`, `3.0`), as protojson accepts it.
fn integral(f: f64) -> Option<u64> {
    // 2^64 as f64; above it the cast would saturate.
    (f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 18_446_744_073_709_551_616.0)
        .then_some(f as u64)
}

fn uint32(value: &Value, name: &str) -> Result<u32, JsonError> {
    u32::try_from(uint64(value, name)?)
        .map_err(|_| JsonError::new(format!("{name}: out of range for uint32")))
}

fn enumeration(
    value: &Value,
    name: &str,
    by_name: impl Fn(&str) -> Option<i32>,
) -> Result<i32, JsonError> {
    match value {
        Value::String(s) => {
            by_name(s).ok_or_else(|| JsonError::new(format!("{name}: unknown enum value {s:?}")))
        }
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| JsonError::new(format!("{name}: enum number out of range"))),
        _ => Err(JsonError::new(format!("{name}: expected an enum name"))),
    }
}

/// A JSON object written in field order (serde_json's map sorts its keys).
#[derive(Default)]
struct Obj(Vec<(&'static str, String)>);

impl Obj {
    fn raw(&mut self, name: &'static str, json: String) {
        self.0.push((name, json));
    }

    fn str(&mut self, name: &'static str, value: &str) {
        if !value.is_empty() {
            self.raw(name, quote(value));
        }
    }

    fn u32(&mut self, name: &'static str, value: u32) {
        if value != 0 {
            self.raw(name, value.to_string());
        }
    }

    /// An enum by name, or by number when the number has no name (as protojson).
    fn enumeration(
        &mut self,
        name: &'static str,
        value: i32,
        name_of: impl Fn(i32) -> Option<&'static str>,
    ) {
        if value != 0 {
            self.raw(
                name,
                name_of(value).map_or_else(|| value.to_string(), quote),
            );
        }
    }

    fn list<T>(&mut self, name: &'static str, items: &[T], write: impl Fn(&T) -> String) {
        if !items.is_empty() {
            let items: Vec<String> = items.iter().map(write).collect();
            self.raw(name, format!("[{}]", items.join(",")));
        }
    }

    fn finish(self) -> String {
        let mut out = String::from("{");
        for (i, (name, json)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:{json}", quote(name));
        }
        out.push('}');
        out
    }
}

fn quote(s: &str) -> String {
    Value::from(s).to_string()
}

/// Writes a `RateLimitRequest`, as a client of `POST /json` sends it.
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
/// use tollgate_rls::json::{request_from_json, request_to_json};
///
/// let request = RateLimitRequest { domain: "api".into(), ..Default::default() };
/// assert_eq!(request_to_json(&request), r#"{"domain":"api"}"#);
/// assert_eq!(request_from_json(request_to_json(&request).as_bytes()).unwrap(), request);
/// ```
pub fn request_to_json(request: &RateLimitRequest) -> String {
    let mut out = Obj::default();
    out.str("domain", &request.domain);
    out.list("descriptors", &request.descriptors, |d| {
        let mut o = Obj::default();
        o.list("entries", &d.entries, |e| {
            let mut o = Obj::default();
            o.str("key", &e.key);
            o.str("value", &e.value);
            o.finish()
        });
        if let Some(limit) = &d.limit {
            let mut l = Obj::default();
            l.u32("requestsPerUnit", limit.requests_per_unit);
            l.enumeration("unit", limit.unit, |n| {
                RateLimitUnit::try_from(n).ok().map(|u| u.as_str_name())
            });
            o.raw("limit", l.finish());
        }
        if let Some(hits) = &d.hits_addend {
            o.raw("hitsAddend", quote(&hits.value.to_string()));
        }
        o.finish()
    });
    out.u32("hitsAddend", request.hits_addend);
    out.finish()
}

/// Writes a `RateLimitResponse` as the Go service's `protojson.Marshal` does (without
/// its randomised spacing).
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
///     Code, DescriptorStatus, RateLimit, rate_limit::Unit,
/// };
/// use envoy_types::pb::google::protobuf::Duration;
/// use tollgate_rls::json::response_to_json;
///
/// let response = RateLimitResponse {
///     overall_code: Code::OverLimit as i32,
///     statuses: vec![DescriptorStatus {
///         code: Code::OverLimit as i32,
///         current_limit: Some(RateLimit {
///             name: String::new(),
///             requests_per_unit: 20,
///             unit: Unit::Minute as i32,
///         }),
///         limit_remaining: 0,
///         duration_until_reset: Some(Duration { seconds: 42, nanos: 0 }),
///         quota: None,
///     }],
///     ..Default::default()
/// };
/// assert_eq!(
///     response_to_json(&response),
///     r#"{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":20,"unit":"MINUTE"},"durationUntilReset":"42s"}]}"#
/// );
/// ```
pub fn response_to_json(response: &RateLimitResponse) -> String {
    let mut out = Obj::default();
    out.enumeration("overallCode", response.overall_code, code_name);
    out.list("statuses", &response.statuses, status_json);
    out.list(
        "responseHeadersToAdd",
        &response.response_headers_to_add,
        header_json,
    );
    out.list(
        "requestHeadersToAdd",
        &response.request_headers_to_add,
        header_json,
    );
    if !response.raw_body.is_empty() {
        out.raw("rawBody", quote(&base64(&response.raw_body)));
    }
    if let Some(metadata) = &response.dynamic_metadata {
        out.raw("dynamicMetadata", struct_json(metadata));
    }
    if let Some(quota) = &response.quota {
        out.raw("quota", quota_json(quota));
    }
    out.finish()
}

fn status_json(status: &DescriptorStatus) -> String {
    let mut o = Obj::default();
    o.enumeration("code", status.code, code_name);
    if let Some(limit) = &status.current_limit {
        o.raw("currentLimit", rate_limit_json(limit));
    }
    o.u32("limitRemaining", status.limit_remaining);
    if let Some(d) = &status.duration_until_reset {
        o.raw("durationUntilReset", quote(&duration(d)));
    }
    if let Some(quota) = &status.quota {
        o.raw("quota", quota_json(quota));
    }
    o.finish()
}

fn rate_limit_json(limit: &RateLimit) -> String {
    let mut o = Obj::default();
    o.str("name", &limit.name);
    o.u32("requestsPerUnit", limit.requests_per_unit);
    o.enumeration("unit", limit.unit, |n| {
        Unit::try_from(n).ok().map(|u| u.as_str_name())
    });
    o.finish()
}

fn quota_json(quota: &Quota) -> String {
    let mut o = Obj::default();
    o.u32("requests", quota.requests);
    if let Some(ExpirationSpecifier::ValidUntil(t)) = &quota.expiration_specifier {
        o.raw("validUntil", quote(&timestamp(t)));
    }
    o.str("id", &quota.id);
    o.finish()
}

fn header_json(h: &HeaderValue) -> String {
    let mut o = Obj::default();
    o.str("key", &h.key);
    o.str("value", &h.value);
    if !h.raw_value.is_empty() {
        o.raw("rawValue", quote(&base64(&h.raw_value)));
    }
    o.finish()
}

fn code_name(n: i32) -> Option<&'static str> {
    Code::try_from(n).ok().map(|c| c.as_str_name())
}

fn struct_json(s: &pbuf::Struct) -> String {
    // Sorted, so that the output does not depend on the map's order.
    let mut keys: Vec<&String> = s.fields.keys().collect();
    keys.sort();
    let mut o = Map::new();
    for key in keys {
        o.insert(key.clone(), value_json(&s.fields[key]));
    }
    Value::Object(o).to_string()
}

fn value_json(v: &pbuf::Value) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n).map_or_else(
            || {
                Value::from(if n.is_nan() {
                    "NaN"
                } else if *n > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                })
            },
            Value::Number,
        ),
        Some(Kind::StringValue(s)) => Value::from(s.as_str()),
        Some(Kind::BoolValue(b)) => Value::from(*b),
        Some(Kind::StructValue(s)) => Value::Object(
            s.fields
                .iter()
                .map(|(k, v)| (k.clone(), value_json(v)))
                .collect(),
        ),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value_json).collect()),
    }
}

/// `"1.5s"`: seconds with 0, 3, 6 or 9 decimals, as protojson writes a Duration.
fn duration(d: &pbuf::Duration) -> String {
    let negative = d.seconds < 0 || d.nanos < 0;
    let seconds = d.seconds.unsigned_abs();
    let nanos = d.nanos.unsigned_abs();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let _ = write!(out, "{seconds}");
    push_fraction(&mut out, nanos);
    out.push('s');
    out
}

fn push_fraction(out: &mut String, nanos: u32) {
    if nanos == 0 {
        return;
    }
    let _ = if nanos.is_multiple_of(1_000_000) {
        write!(out, ".{:03}", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        write!(out, ".{:06}", nanos / 1_000)
    } else {
        write!(out, ".{nanos:09}")
    };
}

/// RFC 3339 in UTC, as protojson writes a Timestamp.
fn timestamp(t: &pbuf::Timestamp) -> String {
    let days = t.seconds.div_euclid(86_400);
    let secs = t.seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let mut out = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    push_fraction(&mut out, u32::try_from(t.nanos).unwrap_or(0));
    out.push('Z');
    out
}

/// The proleptic Gregorian date of a day counted from 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_both_spellings_and_integers_in_both_forms() {
        let a = request_from_json(
            br#"{"domain":"d","hitsAddend":2,"descriptors":[{"entries":[{"key":"k","value":"v"}],
                "limit":{"requests_per_unit":"7","unit":2},"hits_addend":1e1}]}"#,
        )
        .unwrap();
        assert_eq!(a.hits_addend, 2);
        let d = &a.descriptors[0];
        assert_eq!(d.limit.unwrap().requests_per_unit, 7);
        assert_eq!(d.limit.unwrap().unit, RateLimitUnit::Minute as i32);
        assert_eq!(d.hits_addend.unwrap().value, 10);
        assert_eq!(
            request_from_json(request_to_json(&a).as_bytes()).unwrap(),
            a
        );
    }

    #[test]
    fn nulls_are_defaults() {
        let a =
            request_from_json(br#"{"domain":null,"descriptors":null,"hitsAddend":null}"#).unwrap();
        assert_eq!(a, RateLimitRequest::default());
    }

    #[test]
    fn bad_requests() {
        for body in [
            &b""[..],
            b"[]",
            b"{",
            br#"{"domain": 7}"#,
            br#"{"domain": "d", "extra": 1}"#,
            br#"{"domain": "d", "hitsAddend": -1}"#,
            br#"{"domain": "d", "hitsAddend": 4294967296}"#,
            br#"{"domain": "d", "hitsAddend": 1.5}"#,
            br#"{"domain": "d", "hitsAddend": 1, "hits_addend": 1}"#,
            br#"{"descriptors": [null]}"#,
            br#"{"descriptors": [{"limit": {"unit": "FORTNIGHT"}}]}"#,
            br#"{"descriptors": [{"entries": [{"key": "k", "value": 1}]}]}"#,
        ] {
            assert!(
                request_from_json(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn durations_timestamps_and_bytes() {
        let d = |seconds, nanos| duration(&pbuf::Duration { seconds, nanos });
        assert_eq!(d(60, 0), "60s");
        assert_eq!(d(0, 0), "0s");
        assert_eq!(d(1, 500_000_000), "1.500s");
        assert_eq!(d(0, 1_000), "0.000001s");
        assert_eq!(d(0, 1), "0.000000001s");
        assert_eq!(d(-1, -500_000_000), "-1.500s");
        let t = |seconds, nanos| timestamp(&pbuf::Timestamp { seconds, nanos });
        assert_eq!(t(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(t(951_782_400, 0), "2000-02-29T00:00:00Z");
        assert_eq!(t(1_700_000_000, 120_000_000), "2023-11-14T22:13:20.120Z");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn responses_leave_zero_values_out() {
        assert_eq!(response_to_json(&RateLimitResponse::default()), "{}");
        let response = RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: vec![DescriptorStatus {
                code: Code::Ok as i32,
                limit_remaining: 19,
                ..Default::default()
            }],
            response_headers_to_add: vec![HeaderValue {
                key: "RateLimit-Limit".into(),
                value: "20".into(),
                raw_value: Vec::new(),
            }],
            dynamic_metadata: Some(pbuf::Struct {
                fields: [(
                    "n".to_owned(),
                    pbuf::Value {
                        kind: Some(Kind::NumberValue(1.5)),
                    },
                )]
                .into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            response_to_json(&response),
            r#"{"overallCode":"OK","statuses":[{"code":"OK","limitRemaining":19}],"responseHeadersToAdd":[{"key":"RateLimit-Limit","value":"20"}],"dynamicMetadata":{"n":1.5}}"#
        );
    }
}
