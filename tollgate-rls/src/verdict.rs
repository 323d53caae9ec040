//! The Go service's decision arithmetic, pure: no store, no clock, no I/O.
//!
//! envoyproxy/ratelimit decides a `ShouldRateLimit` call in three steps, each a
//! function here:
//!
//! 1. Per descriptor, the hits to add ([`hits_addend`], and
//!    [`hits_when_stopping_at_limit`] under `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`)
//!    and which matched limits are [`replaced`] by others (`src/utils/utilities.go`,
//!    `src/service/ratelimit.go`).
//! 2. Per descriptor with a limit, from what the store counted ([`StoreAnswer`]), the
//!    [`DescriptorStatus`] and the stats increments ([`decide_descriptor`],
//!    `src/limiter/base_limiter.go`): near-limit and over-limit hits split when one
//!    request's hits cross a threshold, the rule's shadow mode, the local over-limit
//!    cache.
//! 3. The response ([`build_response`], `src/service/ratelimit.go`): the overall code
//!    (quota mode per rule and global), the global shadow mode, unlimited
//!    descriptors, the `RateLimit-*` headers of the descriptor closest to its limit,
//!    and the response's dynamic metadata.
//!
//! Time is Unix seconds, passed in: windows are aligned on the epoch as Go aligns them,
//! and `duration_until_reset` is `unit − now % unit` whole seconds.
//!
//! # Examples
//!
//! ```
//! use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{rate_limit::Unit, Code};
//! use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
//! use tollgate_rls::verdict::{
//!     AppliedLimit, DescriptorResult, ResponseOptions, StoreAnswer, build_response, decide_descriptor,
//! };
//!
//! let request = RateLimitRequest {
//!     domain: "api".into(),
//!     descriptors: vec![Default::default()],
//!     hits_addend: 1,
//! };
//! let limit = AppliedLimit::new(10, Unit::Minute);
//! // The store counted this window from 9 to 10: the last one within the limit.
//! let verdict = decide_descriptor(&limit, 1, StoreAnswer::Counted { before: 9, after: 10 }, 0.8, 1_000_000)?;
//! assert_eq!(verdict.status.limit_remaining, 0);
//! assert_eq!(verdict.counts.near_limit, 1);
//! let results = vec![DescriptorResult::limited(&limit, verdict)];
//! let response = build_response(&request, results, &ResponseOptions::default(), 1_000_000)?;
//! assert_eq!(response.response.overall_code, Code::Ok as i32);
//! # Ok::<(), tollgate_rls::verdict::VerdictError>(())
//! ```

use std::fmt;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit, rate_limit::Unit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::google::protobuf::{
    Duration as PbDuration, ListValue, Struct, Value, value::Kind,
};

use crate::stats::LimitCounts;

/// Go's default `NEAR_LIMIT_RATIO`.
pub const DEFAULT_NEAR_LIMIT_RATIO: f32 = 0.8;

/// Why a decision could not be made: input the Go service would have crashed on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerdictError {
    /// A limit's unit is `UNKNOWN` (or not a unit at all): it has no window. Go
    /// panics here; a request-supplied limit override can carry one.
    UnknownUnit(i32),
    /// There are not as many results as the request has descriptors.
    LengthMismatch {
        /// Descriptors in the request.
        descriptors: usize,
        /// Results given.
        results: usize,
    },
}

impl fmt::Display for VerdictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerdictError::UnknownUnit(unit) => write!(f, "rate limit unit {unit} has no window"),
            VerdictError::LengthMismatch {
                descriptors,
                results,
            } => write!(
                f,
                "{results} descriptor results for {descriptors} descriptors"
            ),
        }
    }
}

impl std::error::Error for VerdictError {}

/// The length of `unit`'s window in seconds, as Go's `UnitToDivider` (a month is 30
/// days, a year 365); `None` for `UNKNOWN`.
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
/// use tollgate_rls::verdict::unit_seconds;
///
/// assert_eq!(unit_seconds(Unit::Hour), Some(3_600));
/// assert_eq!(unit_seconds(Unit::Unknown), None);
/// ```
pub fn unit_seconds(unit: Unit) -> Option<i64> {
    match unit {
        Unit::Second => Some(1),
        Unit::Minute => Some(60),
        Unit::Hour => Some(3_600),
        Unit::Day => Some(86_400),
        Unit::Week => Some(604_800),
        Unit::Month => Some(2_592_000),
        Unit::Year => Some(31_536_000),
        Unit::Unknown => None,
    }
}

fn divider(unit: Unit) -> Result<i64, VerdictError> {
    unit_seconds(unit).ok_or(VerdictError::UnknownUnit(unit as i32))
}

fn unit_of(raw: i32) -> Result<Unit, VerdictError> {
    Unit::try_from(raw).map_err(|_| VerdictError::UnknownUnit(raw))
}

/// The start of the window of `unit` holding `now_unix`, in Unix seconds: the number
/// Go's cache keys end with (`domain_key_value_1234`).
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
/// use tollgate_rls::verdict::window_start;
///
/// assert_eq!(window_start(Unit::Hour, 1_000_000), Ok(997_200));
/// ```
///
/// # Errors
///
/// [`VerdictError::UnknownUnit`] for `UNKNOWN`.
pub fn window_start(unit: Unit, now_unix: i64) -> Result<i64, VerdictError> {
    let d = divider(unit)?;
    Ok((now_unix / d) * d)
}

/// Whole seconds until the window of `unit` holding `now_unix` ends: `unit − now %
/// unit`, as Go's `CalculateReset` (a full unit on the boundary itself).
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
/// use tollgate_rls::verdict::seconds_until_reset;
///
/// assert_eq!(seconds_until_reset(Unit::Minute, 2_222), Ok(58));
/// assert_eq!(seconds_until_reset(Unit::Minute, 2_220), Ok(60));
/// ```
///
/// # Errors
///
/// [`VerdictError::UnknownUnit`] for `UNKNOWN`.
pub fn seconds_until_reset(unit: Unit, now_unix: i64) -> Result<i64, VerdictError> {
    let d = divider(unit)?;
    Ok(d - now_unix % d)
}

/// The near-limit threshold of a limit: `floor(requests_per_unit × ratio)`, the
/// product taken in `f32` as Go does.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate_rls::verdict::near_limit_threshold(15, 0.8), 12);
/// ```
pub fn near_limit_threshold(requests_per_unit: u32, ratio: f32) -> u64 {
    // u32 → f32 rounds as Go's float32() conversion; f32 → f64 is exact.
    #[allow(clippy::cast_precision_loss)]
    let product = requests_per_unit as f32 * ratio;
    // Saturating, NaN to 0: Go's result for a negative or NaN ratio is unspecified.
    f64::from(product).floor() as u64
}

/// The hits a descriptor adds, as Go's `GetHitsAddends`: the descriptor's own
/// `hits_addend` when set (`0` then checks without counting), otherwise the request's,
/// where `0` (unset) means 1.
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
/// use envoy_types::pb::google::protobuf::UInt64Value;
/// use tollgate_rls::verdict::hits_addend;
///
/// let request = RateLimitRequest { hits_addend: 0, ..Default::default() };
/// assert_eq!(hits_addend(&request, &RateLimitDescriptor::default()), 1);
/// let check_only = RateLimitDescriptor { hits_addend: Some(UInt64Value { value: 0 }), ..Default::default() };
/// assert_eq!(hits_addend(&request, &check_only), 0);
/// ```
pub fn hits_addend(request: &RateLimitRequest, descriptor: &RateLimitDescriptor) -> u64 {
    match &descriptor.hits_addend {
        Some(own) => own.value,
        None => u64::from(request.hits_addend.max(1)),
    }
}

/// [`hits_addend`] for every descriptor of `request`, in order.
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
///
/// let request = RateLimitRequest { hits_addend: 3, descriptors: vec![Default::default(); 2], ..Default::default() };
/// assert_eq!(tollgate_rls::verdict::hits_addends(&request), vec![3, 3]);
/// ```
pub fn hits_addends(request: &RateLimitRequest) -> Vec<u64> {
    request
        .descriptors
        .iter()
        .map(|d| hits_addend(request, d))
        .collect()
}

/// The hits to add to each descriptor's count under Go's
/// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`, from a first read of the counts
/// (`fixed_cache_impl.go`, `getHitsAddend`); `None` where a descriptor has no limit.
///
/// - Any descriptor answered by the local over-limit cache: nothing is added anywhere.
/// - Otherwise, if some descriptor would go over (`current + hits > limit`), only
///   those that would go over are counted; the others add nothing.
/// - Otherwise every descriptor adds its hits.
///
/// Without the setting, every descriptor adds its hits (call this only with it).
///
/// # Examples
///
/// ```
/// use tollgate_rls::verdict::hits_when_stopping_at_limit;
///
/// // TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig: limits 15 and 14, both
/// // at 13, 2 hits each: only the second would go over, so only it counts.
/// let read = [Some((15, 13, 2)), Some((14, 13, 2))];
/// assert_eq!(hits_when_stopping_at_limit(&read, false), vec![0, 2]);
/// ```
pub fn hits_when_stopping_at_limit(
    descriptors: &[Option<(u32, u64, u64)>],
    any_over_locally: bool,
) -> Vec<u64> {
    if any_over_locally {
        return vec![0; descriptors.len()];
    }
    let would_go_over = |d: &Option<(u32, u64, u64)>| matches!(*d, Some((limit, current, hits)) if current.wrapping_add(hits) > u64::from(limit));
    let any_over = descriptors.iter().any(would_go_over);
    descriptors
        .iter()
        .map(|d| match *d {
            Some((_, _, hits)) if !any_over || would_go_over(d) => hits,
            _ => 0,
        })
        .collect()
}

/// Which matched limits are replaced, as Go's `constructLimitsToCheck`: a limit with a
/// name is dropped when any matched limit of the request (unlimited ones included)
/// lists that name in its `replaces`.
///
/// `limits[i]` is descriptor `i`'s matched limit as `(name, replaces)`, `None` when
/// nothing matched; the answer says, per descriptor, whether its limit is dropped (it
/// is then decided as [`DescriptorResult::NoLimit`]).
///
/// # Examples
///
/// ```
/// use tollgate_rls::verdict::replaced;
///
/// let limits = [Some(("per_user", &["global"][..])), Some(("global", &[][..])), None];
/// assert_eq!(replaced(&limits), vec![false, true, false]);
/// ```
pub fn replaced<R: AsRef<str>>(limits: &[Option<(&str, &[R])>]) -> Vec<bool> {
    let replacing: std::collections::HashSet<&str> = limits
        .iter()
        .flatten()
        .flat_map(|(_, replaces)| replaces.iter().map(AsRef::as_ref))
        .collect();
    limits
        .iter()
        .map(|l| matches!(l, Some((name, _)) if !name.is_empty() && replacing.contains(name)))
        .collect()
}

/// A limit as one descriptor applies it.
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
/// use tollgate_rls::verdict::AppliedLimit;
///
/// let limit = AppliedLimit { name: "per_user", shadow_mode: true, ..AppliedLimit::new(100, Unit::Second) };
/// assert_eq!(limit.rate_limit().requests_per_unit, 100);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppliedLimit<'a> {
    /// The rule's name (`name:` in the configuration), or empty.
    pub name: &'a str,
    /// Permits per window.
    pub requests_per_unit: u32,
    /// The window.
    pub unit: Unit,
    /// Over-limit answers become OK, counted in `shadow_mode`.
    pub shadow_mode: bool,
    /// Over-limit answers deny the request only when every quota-mode descriptor is
    /// over (see [`build_response`]).
    pub quota_mode: bool,
    /// The rule's metadata, returned in the response's dynamic metadata when the
    /// descriptor passes.
    pub metadata: Option<&'a Struct>,
}

impl<'a> AppliedLimit<'a> {
    /// `requests_per_unit` per `unit`, unnamed, without shadow or quota mode or
    /// metadata.
    pub fn new(requests_per_unit: u32, unit: Unit) -> AppliedLimit<'a> {
        AppliedLimit {
            name: "",
            requests_per_unit,
            unit,
            shadow_mode: false,
            quota_mode: false,
            metadata: None,
        }
    }

    /// The limit as the response carries it (`current_limit`).
    pub fn rate_limit(&self) -> RateLimit {
        RateLimit {
            name: self.name.to_owned(),
            requests_per_unit: self.requests_per_unit,
            unit: self.unit as i32,
        }
    }
}

/// What the store said about one descriptor's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreAnswer {
    /// The store counted the window: `before` this request's hits and `after` them.
    /// Go's counts include denied hits (its `INCRBY` runs whatever the answer), so
    /// `after` may exceed the limit.
    Counted {
        /// The window's count before this request's hits.
        before: u64,
        /// The window's count after them.
        after: u64,
    },
    /// The local over-limit cache answered: the store was not asked.
    OverLimitLocally,
}

impl StoreAnswer {
    /// The answer Go derives from its `INCRBY` reply: `after` as counted, `before =
    /// after − hits` (wrapping, as Go's `uint64`; with
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` Go adds 0 but still subtracts `hits`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::verdict::StoreAnswer;
    ///
    /// assert_eq!(StoreAnswer::after_adding(13, 2), StoreAnswer::Counted { before: 11, after: 13 });
    /// ```
    pub fn after_adding(after: u64, hits: u64) -> StoreAnswer {
        StoreAnswer::Counted {
            before: after.wrapping_sub(hits),
            after,
        }
    }
}

/// One descriptor's decision: its status and what it adds to its limit's stats.
#[derive(Clone, Debug, PartialEq)]
pub struct DescriptorVerdict {
    /// The status, after the rule's shadow mode.
    pub status: DescriptorStatus,
    /// The stats increments, `total_hits` included.
    pub counts: LimitCounts,
    /// The store found the window over its limit (shadow mode or not): the local
    /// over-limit cache, when there is one, should remember the key until the window
    /// ends.
    pub newly_over_limit: bool,
}

/// Decides one descriptor that has a limit, as Go's `GetResponseDescriptorStatus`,
/// from the `hits` it added and what the store said, at `now_unix`.
///
/// - Over the limit (`after > requests_per_unit`): `OVER_LIMIT`, remaining 0. If the
///   window was already over before (`before ≥ limit`), all hits count as over;
///   otherwise `after − limit` do, and `limit − max(near, before)` count as near.
/// - Within: `OK`, remaining `limit − after`, all hits within; of them, past the
///   near-limit threshold `near` ([`near_limit_threshold`]): all if `before ≥ near`,
///   else `after − near`, when `after > near`.
/// - From the local cache: `OVER_LIMIT`, all hits over and over with local cache.
/// - Shadow mode turns `OVER_LIMIT` into `OK`, counting the over-limit hits as above
///   (all hits for a local-cache answer).
///
/// Go's arithmetic is kept exactly, including its `uint64` wrapping where inputs are
/// inconsistent (a `near_limit_ratio` above 1, or `before > after`).
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{rate_limit::Unit, Code};
/// use tollgate_rls::verdict::{AppliedLimit, StoreAnswer, decide_descriptor};
///
/// // base_limiter_test.go, TestGetResponseStatusOverLimit.
/// let limit = AppliedLimit::new(5, Unit::Second);
/// let v = decide_descriptor(&limit, 1, StoreAnswer::Counted { before: 2, after: 7 }, 0.8, 1234)?;
/// assert_eq!(v.status.code, Code::OverLimit as i32);
/// assert_eq!((v.counts.over_limit, v.counts.near_limit), (2, 1));
/// # Ok::<(), tollgate_rls::verdict::VerdictError>(())
/// ```
///
/// # Errors
///
/// [`VerdictError::UnknownUnit`] when the limit's unit is `UNKNOWN`.
pub fn decide_descriptor(
    limit: &AppliedLimit<'_>,
    hits: u64,
    answer: StoreAnswer,
    near_limit_ratio: f32,
    now_unix: i64,
) -> Result<DescriptorVerdict, VerdictError> {
    let reset = seconds_until_reset(limit.unit, now_unix)?;
    let mut counts = LimitCounts {
        total_hits: hits,
        ..LimitCounts::default()
    };
    let threshold = u64::from(limit.requests_per_unit);
    let (over, remaining, newly_over_limit) = match answer {
        StoreAnswer::OverLimitLocally => {
            counts.over_limit = hits;
            counts.over_limit_with_local_cache = hits;
            if limit.shadow_mode {
                counts.shadow_mode = hits;
            }
            (true, 0, false)
        }
        StoreAnswer::Counted { before, after } => {
            let near = near_limit_threshold(limit.requests_per_unit, near_limit_ratio);
            if after > threshold {
                if before >= threshold {
                    counts.over_limit = hits;
                } else {
                    counts.over_limit = after - threshold;
                    counts.near_limit = threshold.wrapping_sub(near.max(before));
                }
                if limit.shadow_mode {
                    counts.shadow_mode = if before >= threshold {
                        hits
                    } else {
                        after - threshold
                    };
                }
                (true, 0, true)
            } else {
                if after > near {
                    counts.near_limit = if before >= near { hits } else { after - near };
                }
                counts.within_limit = hits;
                // after ≤ threshold ≤ u32::MAX.
                let remaining = u32::try_from(threshold - after).unwrap_or(u32::MAX);
                (false, remaining, false)
            }
        }
    };
    let code = if over && !limit.shadow_mode {
        Code::OverLimit
    } else {
        Code::Ok
    };
    Ok(DescriptorVerdict {
        status: DescriptorStatus {
            code: code as i32,
            current_limit: Some(limit.rate_limit()),
            limit_remaining: remaining,
            duration_until_reset: Some(PbDuration {
                seconds: reset,
                nanos: 0,
            }),
            ..DescriptorStatus::default()
        },
        counts,
        newly_over_limit,
    })
}

/// How one descriptor of a request was decided, for [`build_response`].
#[derive(Clone, Debug, PartialEq)]
pub enum DescriptorResult<'a> {
    /// No limit applies: nothing matched, or the match was [`replaced`]. `OK`, no
    /// current limit.
    NoLimit,
    /// The matched rule is `unlimited`: `OK`, remaining `u32::MAX`, never counted.
    Unlimited,
    /// A limit was checked.
    Limited {
        /// The status from [`decide_descriptor`].
        status: DescriptorStatus,
        /// The rule's own quota mode.
        quota_mode: bool,
        /// The rule's metadata.
        metadata: Option<&'a Struct>,
    },
}

impl<'a> DescriptorResult<'a> {
    /// The result of `limit` decided as `verdict`.
    pub fn limited(limit: &AppliedLimit<'a>, verdict: DescriptorVerdict) -> DescriptorResult<'a> {
        DescriptorResult::Limited {
            status: verdict.status,
            quota_mode: limit.quota_mode,
            metadata: limit.metadata,
        }
    }
}

/// The names of the `RateLimit-*` response headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderNames {
    /// The limit (Go's `LIMIT_LIMIT_HEADER`).
    pub limit: String,
    /// What remains (`LIMIT_REMAINING_HEADER`).
    pub remaining: String,
    /// Seconds until the window resets (`LIMIT_RESET_HEADER`).
    pub reset: String,
}

impl Default for HeaderNames {
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
    fn default() -> HeaderNames {
        HeaderNames {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

/// The service-wide settings the response depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseOptions {
    /// `SHADOW_MODE`: an `OVER_LIMIT` overall code becomes `OK` (descriptor statuses
    /// keep theirs).
    pub global_shadow_mode: bool,
    /// `QUOTA_MODE`: every descriptor is in quota mode.
    pub global_quota_mode: bool,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED`, with the header names: `None` adds no headers.
    pub headers: Option<HeaderNames>,
    /// `RESPONSE_DYNAMIC_METADATA`: describe the request and the passed rules'
    /// metadata in `dynamic_metadata`.
    pub dynamic_metadata: bool,
}

/// The response, and whether the global shadow mode turned it OK (count it with
/// [`Stats::global_shadow_mode`](crate::stats::Stats::global_shadow_mode)).
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseVerdict {
    /// The response.
    pub response: RateLimitResponse,
    /// The overall code was `OVER_LIMIT` and the global shadow mode made it `OK`.
    pub global_shadow_mode: bool,
}

/// Builds the response to `request` from its descriptors' results (one per
/// descriptor, in order), as Go's `shouldRateLimitWorker`, at `now_unix`.
///
/// - A descriptor counts as in quota mode if its rule is, or the global quota mode is
///   on (then also a descriptor without a limit; an unlimited one never does).
/// - The overall code is `OVER_LIMIT` iff some descriptor not in quota mode is
///   `OVER_LIMIT`, or there are quota-mode descriptors and all of them are.
/// - The headers, if enabled, describe the descriptor with a limit and the smallest
///   `limit_remaining`; an `OVER_LIMIT` descriptor not in quota mode takes precedence
///   (the last such one). The reset is [`seconds_until_reset`] of its unit.
/// - The dynamic metadata, if enabled, holds `domain`, `descriptors` (each with
///   `entries` as `"key=value"`, and `limit` and `hitsAddend` when the request gave
///   them), `hitsAddend` when the request's is not 0, and `metadata`: the metadata of
///   the rules of the descriptors that passed (not `OVER_LIMIT`), merged, the first
///   value of a key winning, nested structs merged.
///
/// # Examples
///
/// ```
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
/// use tollgate_rls::verdict::{DescriptorResult, ResponseOptions, build_response};
///
/// let request = RateLimitRequest { domain: "api".into(), descriptors: vec![Default::default()], hits_addend: 1 };
/// let verdict = build_response(&request, vec![DescriptorResult::Unlimited], &ResponseOptions::default(), 0)?;
/// assert_eq!(verdict.response.statuses[0].limit_remaining, u32::MAX);
/// assert_eq!(verdict.response.overall_code, Code::Ok as i32);
/// # Ok::<(), tollgate_rls::verdict::VerdictError>(())
/// ```
///
/// # Errors
///
/// - [`VerdictError::LengthMismatch`] when `results` does not have one entry per
///   descriptor;
/// - [`VerdictError::UnknownUnit`] when the headers' descriptor has no valid unit.
pub fn build_response(
    request: &RateLimitRequest,
    results: Vec<DescriptorResult<'_>>,
    options: &ResponseOptions,
    now_unix: i64,
) -> Result<ResponseVerdict, VerdictError> {
    if results.len() != request.descriptors.len() {
        return Err(VerdictError::LengthMismatch {
            descriptors: request.descriptors.len(),
            results: results.len(),
        });
    }
    let mut statuses = Vec::with_capacity(results.len());
    let mut closest: Option<usize> = None;
    let mut min_remaining = u32::MAX;
    let mut passed_metadata: Vec<&Struct> = Vec::new();
    let mut failed_rate_limit = 0usize;
    let mut failed_quota = 0usize;
    let mut total_quota = 0usize;
    for (i, result) in results.into_iter().enumerate() {
        let (status, quota, metadata) = match result {
            DescriptorResult::Unlimited => {
                statuses.push(DescriptorStatus {
                    code: Code::Ok as i32,
                    limit_remaining: u32::MAX,
                    ..DescriptorStatus::default()
                });
                continue;
            }
            DescriptorResult::NoLimit => (
                DescriptorStatus {
                    code: Code::Ok as i32,
                    ..DescriptorStatus::default()
                },
                options.global_quota_mode,
                None,
            ),
            DescriptorResult::Limited {
                status,
                quota_mode,
                metadata,
            } => (status, options.global_quota_mode || quota_mode, metadata),
        };
        if status.current_limit.is_some() && status.limit_remaining < min_remaining {
            closest = Some(i);
            min_remaining = status.limit_remaining;
        }
        if status.code == Code::OverLimit as i32 {
            if quota {
                failed_quota += 1;
            } else {
                failed_rate_limit += 1;
                closest = Some(i);
                min_remaining = 0;
            }
        } else if let Some(m) = metadata {
            passed_metadata.push(m);
        }
        if quota {
            total_quota += 1;
        }
        statuses.push(status);
    }

    let over = failed_rate_limit > 0 || (total_quota > 0 && total_quota == failed_quota);
    let mut response = RateLimitResponse {
        overall_code: Code::Ok as i32,
        ..RateLimitResponse::default()
    };
    if let (Some(names), Some(i)) = (&options.headers, closest) {
        // Only statuses with a limit are chosen, except an over-limit one without (Go
        // would crash on it): no headers then.
        if let Some(limit) = &statuses[i].current_limit {
            let reset = seconds_until_reset(unit_of(limit.unit)?, now_unix)?;
            response.response_headers_to_add = vec![
                header(&names.limit, limit.requests_per_unit.to_string()),
                header(&names.remaining, statuses[i].limit_remaining.to_string()),
                header(&names.reset, reset.to_string()),
            ];
        }
    }
    let global_shadow_mode = over && options.global_shadow_mode;
    if over && !options.global_shadow_mode {
        response.overall_code = Code::OverLimit as i32;
    }
    if options.dynamic_metadata {
        response.dynamic_metadata = Some(dynamic_metadata(request, &passed_metadata));
    }
    response.statuses = statuses;
    Ok(ResponseVerdict {
        response,
        global_shadow_mode,
    })
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_owned(),
        value,
        ..HeaderValue::default()
    }
}

fn string_value(s: String) -> Value {
    Value {
        kind: Some(Kind::StringValue(s)),
    }
}

fn number_value(n: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n)),
    }
}

fn list_value(values: Vec<Value>) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

fn struct_value(s: Struct) -> Value {
    Value {
        kind: Some(Kind::StructValue(s)),
    }
}

/// Go's `ratelimitToMetadata`.
fn dynamic_metadata(request: &RateLimitRequest, passed: &[&Struct]) -> Struct {
    let mut fields = std::collections::HashMap::new();
    fields.insert("domain".to_owned(), string_value(request.domain.clone()));
    let descriptors = request
        .descriptors
        .iter()
        .map(|d| struct_value(descriptor_struct(d)))
        .collect();
    fields.insert("descriptors".to_owned(), list_value(descriptors));
    if request.hits_addend != 0 {
        fields.insert(
            "hitsAddend".to_owned(),
            number_value(f64::from(request.hits_addend)),
        );
    }
    let mut merged = Struct::default();
    for m in passed {
        merge_metadata(&mut merged, m);
    }
    if !merged.fields.is_empty() {
        fields.insert("metadata".to_owned(), struct_value(merged));
    }
    Struct { fields }
}

/// Go's `descriptorToStruct`.
fn descriptor_struct(descriptor: &RateLimitDescriptor) -> Struct {
    let mut fields = std::collections::HashMap::new();
    let entries = descriptor
        .entries
        .iter()
        .map(|e| string_value(format!("{}={}", e.key, e.value)))
        .collect();
    fields.insert("entries".to_owned(), list_value(entries));
    if let Some(limit) = &descriptor.limit {
        // Go prints the message in protobuf text form: zero fields left out, the unit
        // by name. (Go's text form sometimes doubles a space, on purpose; this never does.)
        let mut text = Vec::new();
        if limit.requests_per_unit != 0 {
            text.push(format!("requests_per_unit:{}", limit.requests_per_unit));
        }
        if limit.unit != 0 {
            match RateLimitUnit::try_from(limit.unit) {
                Ok(unit) => text.push(format!("unit:{}", unit.as_str_name())),
                Err(_) => text.push(format!("unit:{}", limit.unit)),
            }
        }
        fields.insert("limit".to_owned(), string_value(text.join(" ")));
    }
    if let Some(hits) = &descriptor.hits_addend {
        #[allow(clippy::cast_precision_loss)]
        fields.insert("hitsAddend".to_owned(), number_value(hits.value as f64));
    }
    Struct { fields }
}

/// Go's `mergeMetadata`: keys of `src` missing from `dest` are added; where both hold
/// a struct, they merge; otherwise `dest` keeps its value.
fn merge_metadata(dest: &mut Struct, src: &Struct) {
    for (key, value) in &src.fields {
        match dest.fields.get_mut(key) {
            Some(Value {
                kind: Some(Kind::StructValue(d)),
            }) => {
                if let Some(Kind::StructValue(s)) = &value.kind {
                    merge_metadata(d, s);
                }
            }
            Some(_) => {}
            None => {
                dest.fields.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Ports of the decision parts of envoyproxy/ratelimit's tests: each test names the
    //! Go test (and file) it follows.

    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry, RateLimitOverride,
    };
    use envoy_types::pb::google::protobuf::UInt64Value;

    const NOW: i64 = 1234;

    fn request(domain: &str, descriptors: &[&[(&str, &str)]], hits: u32) -> RateLimitRequest {
        RateLimitRequest {
            domain: domain.into(),
            descriptors: descriptors
                .iter()
                .map(|entries| RateLimitDescriptor {
                    entries: entries
                        .iter()
                        .map(|(k, v)| Entry {
                            key: (*k).into(),
                            value: (*v).into(),
                        })
                        .collect(),
                    ..RateLimitDescriptor::default()
                })
                .collect(),
            hits_addend: hits,
        }
    }

    fn counted(limit: &AppliedLimit<'_>, hits: u64, after: u64, now: i64) -> DescriptorVerdict {
        decide_descriptor(
            limit,
            hits,
            StoreAnswer::after_adding(after, hits),
            0.8,
            now,
        )
        .unwrap()
    }

    fn counts(total: u64, over: u64, near: u64, within: u64) -> LimitCounts {
        LimitCounts {
            total_hits: total,
            over_limit: over,
            near_limit: near,
            within_limit: within,
            ..LimitCounts::default()
        }
    }

    /// A status as Go's service tests mock them: code, limit, remaining, no reset.
    fn status(code: Code, limit: Option<&AppliedLimit<'_>>, remaining: u32) -> DescriptorStatus {
        DescriptorStatus {
            code: code as i32,
            current_limit: limit.map(AppliedLimit::rate_limit),
            limit_remaining: remaining,
            ..DescriptorStatus::default()
        }
    }

    fn limited<'a>(code: Code, limit: &AppliedLimit<'a>, remaining: u32) -> DescriptorResult<'a> {
        DescriptorResult::Limited {
            status: status(code, Some(limit), remaining),
            quota_mode: limit.quota_mode,
            metadata: limit.metadata,
        }
    }

    fn codes(v: &ResponseVerdict) -> (i32, Vec<i32>) {
        (
            v.response.overall_code,
            v.response.statuses.iter().map(|s| s.code).collect(),
        )
    }

    const OK: i32 = Code::Ok as i32;
    const OVER: i32 = Code::OverLimit as i32;

    fn per_minute(n: u32) -> AppliedLimit<'static> {
        AppliedLimit::new(n, Unit::Minute)
    }

    fn quota(n: u32) -> AppliedLimit<'static> {
        AppliedLimit {
            quota_mode: true,
            ..per_minute(n)
        }
    }

    fn two_descriptors() -> RateLimitRequest {
        request(
            "different-domain",
            &[&[("foo", "bar")], &[("hello", "world")]],
            1,
        )
    }

    // ---- base_limiter_test.go ----

    #[test]
    fn generate_cache_keys() {
        // TestGenerateCacheKeys: the window of a per-second limit at 1234 is 1234, and
        // the descriptor's hits count in total_hits.
        assert_eq!(window_start(Unit::Second, 1234), Ok(1234));
        let v = counted(&AppliedLimit::new(10, Unit::Second), 1, 1, NOW);
        assert_eq!(v.counts.total_hits, 1);
    }

    #[test]
    fn get_response_status_empty_key() {
        // TestGetResponseStatusEmptyKey: no limit, OK with nothing remaining.
        let r = request("domain", &[&[("key", "value")]], 1);
        let v = build_response(
            &r,
            vec![DescriptorResult::NoLimit],
            &ResponseOptions::default(),
            NOW,
        )
        .unwrap();
        assert_eq!(v.response.statuses[0], status(Code::Ok, None, 0));
    }

    #[test]
    fn get_response_status_over_limit_with_local_cache() {
        // TestGetResponseStatusOverLimitWithLocalCache.
        let limit = AppliedLimit::new(5, Unit::Second);
        let v = decide_descriptor(&limit, 2, StoreAnswer::OverLimitLocally, 0.8, NOW).unwrap();
        assert_eq!(v.status.code, OVER);
        assert_eq!(v.status.limit_remaining, 0);
        assert_eq!(v.status.current_limit, Some(limit.rate_limit()));
        assert_eq!(v.counts.over_limit, 2);
        assert_eq!(v.counts.over_limit_with_local_cache, 2);
        assert_eq!(v.counts.shadow_mode, 0);
        assert!(!v.newly_over_limit);
    }

    #[test]
    fn get_response_status_over_limit_with_local_cache_shadow_mode() {
        // TestGetResponseStatusOverLimitWithLocalCacheShadowMode.
        let limit = AppliedLimit {
            shadow_mode: true,
            ..AppliedLimit::new(5, Unit::Second)
        };
        let v = decide_descriptor(&limit, 2, StoreAnswer::OverLimitLocally, 0.8, NOW).unwrap();
        assert_eq!(v.status.code, OK);
        assert_eq!(v.status.limit_remaining, 0);
        assert_eq!(v.counts.over_limit, 2);
        assert_eq!(v.counts.shadow_mode, 2);
        assert_eq!(v.counts.over_limit_with_local_cache, 2);
    }

    #[test]
    fn get_response_status_over_limit() {
        // TestGetResponseStatusOverLimit: before 2, after 7, limit 5, one hit.
        let limit = AppliedLimit::new(5, Unit::Second);
        let answer = StoreAnswer::Counted {
            before: 2,
            after: 7,
        };
        let v = decide_descriptor(&limit, 1, answer, 0.8, NOW).unwrap();
        assert_eq!(v.status.code, OVER);
        assert_eq!(v.status.limit_remaining, 0);
        assert_eq!(v.status.current_limit, Some(limit.rate_limit()));
        // The local cache is to remember the key.
        assert!(v.newly_over_limit);
        assert_eq!(v.counts.over_limit, 2);
        assert_eq!(v.counts.near_limit, 1);
        assert_eq!(v.counts.shadow_mode, 0);
    }

    #[test]
    fn get_response_status_over_limit_shadow_mode() {
        // TestGetResponseStatusOverLimitShadowMode.
        let limit = AppliedLimit {
            shadow_mode: true,
            ..AppliedLimit::new(5, Unit::Second)
        };
        let answer = StoreAnswer::Counted {
            before: 2,
            after: 7,
        };
        let v = decide_descriptor(&limit, 1, answer, 0.8, NOW).unwrap();
        assert_eq!(v.status.code, OK);
        assert_eq!(v.status.limit_remaining, 0);
        assert!(v.newly_over_limit);
        assert_eq!(v.counts.over_limit, 2);
        assert_eq!(v.counts.near_limit, 1);
        assert_eq!(v.counts.shadow_mode, 2);
    }

    #[test]
    fn get_response_status_below_limit() {
        // TestGetResponseStatusBelowLimit and TestGetResponseStatusBelowLimitShadowMode.
        for shadow_mode in [false, true] {
            let limit = AppliedLimit {
                shadow_mode,
                ..AppliedLimit::new(10, Unit::Second)
            };
            let answer = StoreAnswer::Counted {
                before: 2,
                after: 6,
            };
            let v = decide_descriptor(&limit, 1, answer, 0.8, NOW).unwrap();
            assert_eq!(v.status.code, OK);
            assert_eq!(v.status.limit_remaining, 4);
            assert_eq!(v.counts, counts(1, 0, 0, 1));
            assert!(!v.newly_over_limit);
        }
    }

    // ---- fixed_cache_impl_test.go ----

    #[test]
    fn redis() {
        // TestRedis: 10/s, INCRBY answers 5.
        let limit = AppliedLimit::new(10, Unit::Second);
        let v = counted(&limit, 1, 5, 1234);
        assert_eq!(v.status.code, OK);
        assert_eq!(v.status.limit_remaining, 5);
        assert_eq!(
            v.status.duration_until_reset,
            Some(PbDuration {
                seconds: 1,
                nanos: 0
            })
        );
        assert_eq!(v.counts, counts(1, 0, 0, 1));

        // Per-descriptor hits_addend 0 and 1; the first has no limit.
        let r = RateLimitRequest {
            descriptors: vec![
                RateLimitDescriptor {
                    hits_addend: Some(UInt64Value { value: 0 }),
                    ..RateLimitDescriptor::default()
                },
                RateLimitDescriptor {
                    hits_addend: Some(UInt64Value { value: 1 }),
                    ..RateLimitDescriptor::default()
                },
            ],
            ..request("domain", &[], 1)
        };
        assert_eq!(hits_addends(&r), vec![0, 1]);
        let limit = per_minute(10);
        assert_eq!(window_start(Unit::Minute, 1234), Ok(1200));
        let v = counted(&limit, 1, 11, 1234);
        assert_eq!(v.status.code, OVER);
        assert_eq!(v.status.duration_until_reset.unwrap().seconds, 26);
        assert_eq!(v.counts, counts(1, 1, 0, 0));
        let response = build_response(
            &r,
            vec![
                DescriptorResult::NoLimit,
                DescriptorResult::limited(&limit, v),
            ],
            &ResponseOptions::default(),
            1234,
        )
        .unwrap();
        assert_eq!(response.response.statuses[0], status(Code::Ok, None, 0));

        // At 1,000,000: an hourly limit checked with 0 hits (already at 11), a daily one
        // with 1 hit (at 13).
        assert_eq!(window_start(Unit::Hour, 1_000_000), Ok(997_200));
        assert_eq!(window_start(Unit::Day, 1_000_000), Ok(950_400));
        let hourly = AppliedLimit::new(10, Unit::Hour);
        let v = counted(&hourly, 0, 11, 1_000_000);
        assert_eq!(v.status.code, OVER);
        assert_eq!(v.counts, counts(0, 0, 0, 0));
        let daily = AppliedLimit::new(10, Unit::Day);
        let v = counted(&daily, 1, 13, 1_000_000);
        assert_eq!(v.status.code, OVER);
        assert_eq!(v.counts, counts(1, 1, 0, 0));
    }

    /// Adds up the verdicts' counts, as Go's counters do across calls.
    fn sum(all: &[&DescriptorVerdict]) -> LimitCounts {
        let mut total = LimitCounts::default();
        for v in all {
            total.total_hits += v.counts.total_hits;
            total.over_limit += v.counts.over_limit;
            total.near_limit += v.counts.near_limit;
            total.within_limit += v.counts.within_limit;
            total.shadow_mode += v.counts.shadow_mode;
            total.over_limit_with_local_cache += v.counts.over_limit_with_local_cache;
        }
        total
    }

    #[test]
    fn near_limit() {
        // TestNearLimit: 15/hour, near threshold 12.
        let limit = AppliedLimit::new(15, Unit::Hour);
        let a = counted(&limit, 1, 11, 1_000_000);
        assert_eq!((a.status.code, a.status.limit_remaining), (OK, 4));
        assert_eq!(sum(&[&a]), counts(1, 0, 0, 1));
        let b = counted(&limit, 1, 13, 1_000_000);
        assert_eq!((b.status.code, b.status.limit_remaining), (OK, 2));
        assert_eq!(sum(&[&a, &b]), counts(2, 0, 1, 2));
        // Over the limit: near_limit does not grow past the limit.
        let c = counted(&limit, 1, 16, 1_000_000);
        assert_eq!((c.status.code, c.status.limit_remaining), (OVER, 0));
        assert_eq!(sum(&[&a, &b, &c]), counts(3, 1, 1, 2));

        // hits_addend greater than 1, each case on a limit of its own.
        let cases: [(u32, u64, u64, i32, u32, LimitCounts); 6] = [
            // All under the limit, under near limit.
            (20, 3, 5, OK, 15, counts(3, 0, 0, 3)),
            // All under the limit, some over near limit.
            (8, 2, 7, OK, 1, counts(2, 0, 1, 2)),
            // All under the limit, all over near limit.
            (20, 3, 19, OK, 1, counts(3, 0, 3, 3)),
            // Some over the limit, all over near limit.
            (20, 3, 22, OVER, 0, counts(3, 2, 1, 0)),
            // Some in all three places.
            (20, 7, 22, OVER, 0, counts(7, 2, 4, 0)),
            // All over the limit.
            (10, 3, 30, OVER, 0, counts(3, 3, 0, 0)),
        ];
        for (rpu, hits, after, code, remaining, expected) in cases {
            let v = counted(&AppliedLimit::new(rpu, Unit::Second), hits, after, 1234);
            assert_eq!(
                (v.status.code, v.status.limit_remaining),
                (code, remaining),
                "{rpu} {hits} {after}"
            );
            assert_eq!(v.counts, expected, "{rpu} {hits} {after}");
        }
    }

    #[test]
    fn over_limit_with_local_cache() {
        // TestOverLimitWithLocalCache (redis): the three calls of TestNearLimit, then
        // the local cache answers.
        let limit = AppliedLimit::new(15, Unit::Hour);
        let a = counted(&limit, 1, 11, 1_000_000);
        let b = counted(&limit, 1, 13, 1_000_000);
        let c = counted(&limit, 1, 16, 1_000_000);
        assert!(!a.newly_over_limit && !b.newly_over_limit && c.newly_over_limit);
        let d =
            decide_descriptor(&limit, 1, StoreAnswer::OverLimitLocally, 0.8, 1_000_000).unwrap();
        assert_eq!((d.status.code, d.status.limit_remaining), (OVER, 0));
        assert_eq!(
            d.status.duration_until_reset.unwrap().seconds,
            3_600 - 1_000_000 % 3_600
        );
        let total = sum(&[&a, &b, &c, &d]);
        assert_eq!(total.total_hits, 4);
        assert_eq!(total.over_limit, 2);
        assert_eq!(total.over_limit_with_local_cache, 1);
        assert_eq!(total.near_limit, 1);
        assert_eq!(total.within_limit, 2);
    }

    #[test]
    fn over_limit_with_local_cache_shadow_rule() {
        // TestOverLimitWithLocalCacheShadowRule.
        let limit = AppliedLimit {
            shadow_mode: true,
            ..AppliedLimit::new(15, Unit::Hour)
        };
        let a = counted(&limit, 1, 11, 1_000_000);
        let b = counted(&limit, 1, 13, 1_000_000);
        let c = counted(&limit, 1, 16, 1_000_000);
        assert_eq!((c.status.code, c.status.limit_remaining), (OK, 0));
        assert_eq!(sum(&[&a, &b, &c]).shadow_mode, 1);
        let d =
            decide_descriptor(&limit, 1, StoreAnswer::OverLimitLocally, 0.8, 1_000_000).unwrap();
        assert_eq!((d.status.code, d.status.limit_remaining), (OK, 0));
        let total = sum(&[&a, &b, &c, &d]);
        assert_eq!(
            total,
            LimitCounts {
                total_hits: 4,
                over_limit: 2,
                near_limit: 1,
                within_limit: 2,
                shadow_mode: 2,
                over_limit_with_local_cache: 1,
            }
        );
    }

    #[test]
    fn over_limit_with_stop_cache_key_increment_when_overlimit_config() {
        // TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig: Go derives
        // before = after − hits even where it added 0.
        let key4 = AppliedLimit::new(15, Unit::Hour);
        let key5 = AppliedLimit::new(14, Unit::Hour);
        let a4 = counted(&key4, 1, 11, 1_000_000);
        let a5 = counted(&key5, 1, 11, 1_000_000);
        assert_eq!(
            (a4.status.limit_remaining, a5.status.limit_remaining),
            (4, 3)
        );
        let b4 = counted(&key4, 2, 13, 1_000_000);
        let b5 = counted(&key5, 2, 13, 1_000_000);
        assert_eq!(
            (b4.status.limit_remaining, b5.status.limit_remaining),
            (2, 1)
        );
        assert_eq!(sum(&[&a4, &b4]), counts(3, 0, 1, 3));
        assert_eq!(sum(&[&a5, &b5]), counts(3, 0, 2, 3));
        // key4 was added 0 (still 13), key5 went over.
        let c4 = counted(&key4, 2, 13, 1_000_000);
        let c5 = counted(&key5, 2, 15, 1_000_000);
        assert_eq!((c4.status.code, c4.status.limit_remaining), (OK, 2));
        assert_eq!((c5.status.code, c5.status.limit_remaining), (OVER, 0));
        assert_eq!(sum(&[&a4, &b4, &c4]), counts(5, 0, 2, 5));
        assert_eq!(sum(&[&a5, &b5, &c5]), counts(5, 1, 3, 3));
    }

    #[test]
    fn stop_cache_key_increment_when_overlimit() {
        // TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig's three reads:
        // nobody near the limit, everybody adds; one would go over, only it adds.
        let read = [Some((15, 10, 1)), Some((14, 10, 1))];
        assert_eq!(hits_when_stopping_at_limit(&read, false), vec![1, 1]);
        let read = [Some((15, 11, 2)), Some((14, 11, 2))];
        assert_eq!(hits_when_stopping_at_limit(&read, false), vec![2, 2]);
        let read = [Some((15, 13, 2)), Some((14, 13, 2)), None];
        assert_eq!(hits_when_stopping_at_limit(&read, false), vec![0, 2, 0]);
        // A local over-limit answer stops every increment.
        assert_eq!(hits_when_stopping_at_limit(&read, true), vec![0, 0, 0]);
    }

    // ---- ratelimit_test.go (service_test) ----

    #[test]
    fn service() {
        // TestService: no limit; then an over-limit descriptor and one without a limit,
        // in both orders.
        let r = request("test-domain", &[&[("hello", "world")]], 1);
        let v = build_response(
            &r,
            vec![DescriptorResult::NoLimit],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OK, vec![OK]));
        assert!(v.response.response_headers_to_add.is_empty());
        assert!(v.response.dynamic_metadata.is_none());

        let limit = AppliedLimit {
            name: "key_name",
            ..per_minute(10)
        };
        let r = two_descriptors();
        let v = build_response(
            &r,
            vec![
                limited(Code::OverLimit, &limit, 0),
                DescriptorResult::NoLimit,
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OVER, OK]));
        assert_eq!(
            v.response.statuses[0].current_limit.as_ref().unwrap().name,
            "key_name"
        );
        let v = build_response(
            &r,
            vec![
                DescriptorResult::NoLimit,
                limited(Code::OverLimit, &per_minute(10), 0),
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OK, OVER]));
        assert!(!v.global_shadow_mode);
    }

    #[test]
    fn service_global_shadow_mode() {
        // TestServiceGlobalShadowMode: OVER_LIMIT overall becomes OK, the statuses keep
        // theirs, and the stat counts it.
        let options = ResponseOptions {
            global_shadow_mode: true,
            ..ResponseOptions::default()
        };
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::OverLimit, &per_minute(10), 0),
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OK, vec![OVER, OK]));
        assert!(v.global_shadow_mode);
    }

    #[test]
    fn rule_shadow_mode() {
        // TestRuleShadowMode: both rules in shadow mode answered OK.
        let shadow = AppliedLimit {
            shadow_mode: true,
            ..per_minute(10)
        };
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::Ok, &shadow, 0),
                DescriptorResult::Limited {
                    status: status(Code::Ok, None, 0),
                    quota_mode: false,
                    metadata: None,
                },
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OK, vec![OK, OK]));
        assert!(!v.global_shadow_mode);
    }

    #[test]
    fn mixed_rule_shadow_mode() {
        // TestMixedRuleShadowMode: the shadow rule's OK does not hide the other's
        // OVER_LIMIT (mocked without a current limit).
        let shadow = AppliedLimit {
            shadow_mode: true,
            ..per_minute(10)
        };
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::Ok, &shadow, 0),
                DescriptorResult::Limited {
                    status: status(Code::OverLimit, None, 0),
                    quota_mode: false,
                    metadata: None,
                },
            ],
            &ResponseOptions {
                // Go would crash writing headers for a limitless status; no headers here.
                headers: Some(HeaderNames::default()),
                ..ResponseOptions::default()
            },
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OK, OVER]));
        assert!(v.response.response_headers_to_add.is_empty());
    }

    fn headers(v: &ResponseVerdict) -> Vec<(String, String)> {
        v.response
            .response_headers_to_add
            .iter()
            .map(|h| (h.key.clone(), h.value.clone()))
            .collect()
    }

    #[test]
    fn service_with_custom_ratelimit_headers() {
        // TestServiceWithCustomRatelimitHeaders: at 2222, a minute resets in 58 s.
        let options = ResponseOptions {
            headers: Some(HeaderNames {
                limit: "A-Ratelimit-Limit".into(),
                remaining: "A-Ratelimit-Remaining".into(),
                reset: "A-Ratelimit-Reset".into(),
            }),
            ..ResponseOptions::default()
        };
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::OverLimit, &per_minute(10), 0),
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OVER, OK]));
        let expected = [
            ("A-Ratelimit-Limit", "10"),
            ("A-Ratelimit-Remaining", "0"),
            ("A-Ratelimit-Reset", "58"),
        ];
        assert_eq!(
            headers(&v),
            expected.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec()
        );
    }

    #[test]
    fn service_with_default_ratelimit_headers() {
        // TestServiceWithDefaultRatelimitHeaders.
        let options = ResponseOptions {
            headers: Some(HeaderNames::default()),
            ..ResponseOptions::default()
        };
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::OverLimit, &per_minute(10), 0),
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        let expected = [
            ("RateLimit-Limit", "10"),
            ("RateLimit-Remaining", "0"),
            ("RateLimit-Reset", "58"),
        ];
        assert_eq!(
            headers(&v),
            expected.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec()
        );
    }

    #[test]
    fn headers_describe_the_descriptor_closest_to_its_limit() {
        // Not a Go test: the smallest remaining wins; an over-limit rate limit wins
        // over everything; a quota-mode one only by its remaining.
        let options = ResponseOptions {
            headers: Some(HeaderNames::default()),
            ..ResponseOptions::default()
        };
        let r = request("d", &[&[("a", "1")], &[("b", "2")], &[("c", "3")]], 1);
        let hourly = AppliedLimit::new(100, Unit::Hour);
        let v = build_response(
            &r,
            vec![
                limited(Code::Ok, &per_minute(10), 7),
                limited(Code::Ok, &hourly, 3),
                DescriptorResult::Unlimited,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(headers(&v)[0].1, "100");
        assert_eq!(headers(&v)[1].1, "3");
        assert_eq!(headers(&v)[2].1, (3_600 - 2222).to_string());

        let v = build_response(
            &r,
            vec![
                limited(Code::OverLimit, &per_minute(10), 0),
                limited(Code::Ok, &hourly, 0),
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(headers(&v)[0].1, "10");

        let q = AppliedLimit {
            quota_mode: true,
            ..hourly
        };
        let v = build_response(
            &r,
            vec![
                limited(Code::Ok, &per_minute(10), 4),
                limited(Code::OverLimit, &q, 0),
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(headers(&v)[0].1, "100");
        assert_eq!(v.response.overall_code, OVER);
        // No limit anywhere: no headers.
        let v = build_response(
            &r,
            vec![
                DescriptorResult::NoLimit,
                DescriptorResult::Unlimited,
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert!(v.response.response_headers_to_add.is_empty());
    }

    #[test]
    fn unlimited() {
        // TestUnlimited.
        let r = request(
            "some-domain",
            &[&[("foo", "bar")], &[("hello", "world")], &[("baz", "qux")]],
            1,
        );
        let limit = per_minute(10);
        let v = build_response(
            &r,
            vec![
                limited(Code::Ok, &limit, 9),
                DescriptorResult::NoLimit,
                DescriptorResult::Unlimited,
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(
            v.response.statuses,
            vec![
                status(Code::Ok, Some(&limit), 9),
                status(Code::Ok, None, 0),
                status(Code::Ok, None, u32::MAX),
            ]
        );
        assert_eq!(v.response.overall_code, OK);
    }

    #[test]
    fn service_global_quota_mode() {
        // TestServiceGlobalQuotaMode: every descriptor over: OVER_LIMIT.
        let options = ResponseOptions {
            global_quota_mode: true,
            ..ResponseOptions::default()
        };
        let v = build_response(
            &request(
                "quota-domain",
                &[&[("foo", "bar")], &[("hello", "world")]],
                1,
            ),
            vec![
                limited(Code::OverLimit, &per_minute(10), 0),
                limited(Code::OverLimit, &per_minute(5), 0),
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OVER, OVER]));
        // One of them within: OK.
        let v = build_response(
            &request(
                "quota-domain",
                &[&[("foo", "bar")], &[("hello", "world")]],
                1,
            ),
            vec![
                limited(Code::OverLimit, &per_minute(10), 0),
                DescriptorResult::NoLimit,
            ],
            &options,
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OK, vec![OVER, OK]));
    }

    fn metadata_struct(pairs: &[(&str, &str)]) -> Struct {
        Struct {
            fields: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), string_value((*v).to_owned())))
                .collect(),
        }
    }

    fn passed_metadata(v: &ResponseVerdict) -> Struct {
        match &v.response.dynamic_metadata.as_ref().unwrap().fields["metadata"].kind {
            Some(Kind::StructValue(s)) => s.clone(),
            other => panic!("metadata is {other:?}"),
        }
    }

    fn string_of(s: &Struct, key: &str) -> String {
        match &s.fields[key].kind {
            Some(Kind::StringValue(v)) => v.clone(),
            other => panic!("{key} is {other:?}"),
        }
    }

    fn quota_and_metadata() -> ResponseOptions {
        ResponseOptions {
            global_quota_mode: true,
            dynamic_metadata: true,
            ..ResponseOptions::default()
        }
    }

    #[test]
    fn metadata_returned_for_passed_descriptors() {
        // TestMetadataReturnedForPassedDescriptors.
        let m1 = metadata_struct(&[("name", "service_1")]);
        let m2 = metadata_struct(&[("name", "service_2")]);
        let regular = AppliedLimit {
            metadata: Some(&m1),
            ..per_minute(10)
        };
        let quota_limit = AppliedLimit {
            metadata: Some(&m2),
            ..quota(5)
        };
        let r = request(
            "quota-domain",
            &[&[("regular", "limit")], &[("quota", "limit")]],
            1,
        );
        let v = build_response(
            &r,
            vec![
                limited(Code::Ok, &regular, 5),
                limited(Code::OverLimit, &quota_limit, 0),
            ],
            &quota_and_metadata(),
            2222,
        )
        .unwrap();
        assert_eq!(v.response.overall_code, OK);
        let passed = passed_metadata(&v);
        assert_eq!(passed.fields.len(), 1);
        assert_eq!(string_of(&passed, "name"), "service_1");
    }

    #[test]
    fn metadata_returned_for_all_passed_descriptors() {
        // TestMetadataReturnedForAllPassedDescriptors.
        let m1 = metadata_struct(&[("name", "service_1")]);
        let m2 = metadata_struct(&[("some_other_name", "service_2")]);
        let a = AppliedLimit {
            metadata: Some(&m1),
            ..quota(10)
        };
        let b = AppliedLimit {
            metadata: Some(&m2),
            ..quota(5)
        };
        let r = request(
            "quota-domain",
            &[&[("regular", "limit")], &[("quota", "limit")]],
            1,
        );
        let v = build_response(
            &r,
            vec![limited(Code::Ok, &a, 5), limited(Code::Ok, &b, 6)],
            &quota_and_metadata(),
            2222,
        )
        .unwrap();
        assert_eq!(v.response.overall_code, OK);
        let passed = passed_metadata(&v);
        assert_eq!(string_of(&passed, "name"), "service_1");
        assert_eq!(string_of(&passed, "some_other_name"), "service_2");
    }

    #[test]
    fn overlapping_metadata_returns_the_first_value() {
        // TestOverlappingMetadataReturnsTheFirstValue; and nested structs merge.
        let nested = |k: &str, v: &str| {
            let mut s = metadata_struct(&[("name", v)]);
            s.fields
                .insert("nested".into(), struct_value(metadata_struct(&[(k, v)])));
            s
        };
        let m1 = nested("a", "service_1");
        let m2 = nested("b", "service_2");
        let a = AppliedLimit {
            metadata: Some(&m1),
            ..quota(10)
        };
        let b = AppliedLimit {
            metadata: Some(&m2),
            ..quota(5)
        };
        let r = request(
            "quota-domain",
            &[&[("regular", "limit")], &[("quota", "limit")]],
            1,
        );
        let v = build_response(
            &r,
            vec![limited(Code::Ok, &a, 5), limited(Code::Ok, &b, 6)],
            &quota_and_metadata(),
            2222,
        )
        .unwrap();
        let passed = passed_metadata(&v);
        assert_eq!(string_of(&passed, "name"), "service_1");
        let Some(Kind::StructValue(n)) = &passed.fields["nested"].kind else {
            panic!("nested is not a struct");
        };
        assert_eq!(string_of(n, "a"), "service_1");
        assert_eq!(string_of(n, "b"), "service_2");
    }

    #[test]
    fn dynamic_metadata_describes_the_request() {
        // ratelimitToMetadata / descriptorToStruct.
        let mut r = request("api", &[&[("k", "v"), ("k2", "v2")], &[("x", "y")]], 3);
        r.descriptors[1].limit = Some(RateLimitOverride {
            requests_per_unit: 42,
            unit: RateLimitUnit::Hour as i32,
        });
        r.descriptors[1].hits_addend = Some(UInt64Value { value: 7 });
        let options = ResponseOptions {
            dynamic_metadata: true,
            ..ResponseOptions::default()
        };
        let v = build_response(
            &r,
            vec![DescriptorResult::NoLimit, DescriptorResult::NoLimit],
            &options,
            0,
        )
        .unwrap();
        let m = v.response.dynamic_metadata.unwrap();
        assert_eq!(string_of(&m, "domain"), "api");
        assert_eq!(m.fields["hitsAddend"].kind, Some(Kind::NumberValue(3.0)));
        // No rule metadata: no "metadata" key.
        assert!(!m.fields.contains_key("metadata"));
        let Some(Kind::ListValue(list)) = &m.fields["descriptors"].kind else {
            panic!("descriptors is not a list");
        };
        let structs: Vec<&Struct> = list
            .values
            .iter()
            .map(|v| match &v.kind {
                Some(Kind::StructValue(s)) => s,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            structs[0].fields["entries"].kind,
            Some(Kind::ListValue(ListValue {
                values: vec![string_value("k=v".into()), string_value("k2=v2".into())]
            }))
        );
        assert!(!structs[0].fields.contains_key("limit"));
        assert!(!structs[0].fields.contains_key("hitsAddend"));
        assert_eq!(
            string_of(structs[1], "limit"),
            "requests_per_unit:42 unit:HOUR"
        );
        assert_eq!(
            structs[1].fields["hitsAddend"].kind,
            Some(Kind::NumberValue(7.0))
        );
        // The request's hits_addend 0 is left out.
        r.hits_addend = 0;
        let v = build_response(&r, vec![DescriptorResult::NoLimit; 2], &options, 0).unwrap();
        assert!(
            !v.response
                .dynamic_metadata
                .unwrap()
                .fields
                .contains_key("hitsAddend")
        );
    }

    #[test]
    fn service_per_descriptor_quota_mode() {
        // TestServicePerDescriptorQuotaMode: a regular limit over: OVER_LIMIT.
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::OverLimit, &per_minute(5), 0),
                limited(Code::Ok, &quota(3), 0),
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OVER, OK]));
    }

    #[test]
    fn service_mixed_per_descriptor_modes() {
        // TestServiceMixedPerDescriptorModes: the only quota descriptor is over.
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::Ok, &per_minute(5), 0),
                limited(Code::OverLimit, &quota(3), 0),
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OK, OVER]));
    }

    #[test]
    fn service_mixed_per_descriptor_modes_under_limit() {
        // TestServiceMixedPerDescriptorModesUnderLimit.
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::Ok, &per_minute(5), 0),
                limited(Code::Ok, &quota(3), 0),
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OK, vec![OK, OK]));
    }

    #[test]
    fn service_quota_mode_only() {
        // TestServiceQuotaModeOnlyAllOverTheLimit and ...SomeOverTheLimit.
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::OverLimit, &quota(5), 0),
                limited(Code::OverLimit, &quota(3), 0),
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OVER, vec![OVER, OVER]));
        let v = build_response(
            &two_descriptors(),
            vec![
                limited(Code::OverLimit, &quota(5), 0),
                limited(Code::Ok, &quota(3), 0),
            ],
            &ResponseOptions::default(),
            2222,
        )
        .unwrap();
        assert_eq!(codes(&v), (OK, vec![OVER, OK]));
    }

    #[test]
    fn service_quota_and_mixed_mode_with_shadow_mode() {
        // TestServiceQuotaModeWithShadowMode and TestServiceMixedModeWithShadowMode.
        let options = ResponseOptions {
            global_shadow_mode: true,
            ..ResponseOptions::default()
        };
        for first in [quota(5), per_minute(5)] {
            let v = build_response(
                &two_descriptors(),
                vec![
                    limited(Code::OverLimit, &first, 0),
                    limited(Code::OverLimit, &quota(3), 0),
                ],
                &options,
                2222,
            )
            .unwrap();
            assert_eq!(codes(&v), (OK, vec![OVER, OVER]));
            assert!(v.global_shadow_mode);
        }
    }

    // ---- utilities and constructLimitsToCheck ----

    #[test]
    fn hits_addends_follow_go() {
        // GetHitsAddends: the descriptor's own (0 allowed) or the request's (0 means 1).
        let mut r = request("d", &[&[("a", "1")], &[("b", "2")]], 0);
        r.descriptors[1].hits_addend = Some(UInt64Value { value: 0 });
        assert_eq!(hits_addends(&r), vec![1, 0]);
        r.hits_addend = 5;
        r.descriptors[1].hits_addend = Some(UInt64Value { value: 9 });
        assert_eq!(hits_addends(&r), vec![5, 9]);
    }

    #[test]
    fn replaces_drop_named_limits_only() {
        let none: &[&str] = &[];
        let limits = [
            Some(("a", &["b", "c"][..])),
            Some(("b", none)),
            Some(("", &["a"][..])),
            None,
            Some(("c", &["c"][..])),
        ];
        // "a" is listed by an unnamed limit; "c" replaces itself; unnamed never dropped.
        assert_eq!(replaced(&limits), vec![true, true, false, false, true]);
    }

    #[test]
    fn near_limit_threshold_rounds_in_f32() {
        assert_eq!(near_limit_threshold(15, 0.8), 12);
        assert_eq!(near_limit_threshold(5, 0.8), 4);
        assert_eq!(near_limit_threshold(8, 0.8), 6);
        assert_eq!(near_limit_threshold(10, 0.8), 8);
        // 0.8f32 × 1e9 rounds in f32, as Go.
        assert_eq!(
            near_limit_threshold(1_000_000_000, 0.8),
            (1e9f32 * 0.8f32) as u64
        );
        assert_eq!(near_limit_threshold(10, f32::NAN), 0);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let limit = AppliedLimit::new(10, Unit::Unknown);
        assert_eq!(
            decide_descriptor(
                &limit,
                1,
                StoreAnswer::Counted {
                    before: 0,
                    after: 1
                },
                0.8,
                0
            ),
            Err(VerdictError::UnknownUnit(0))
        );
        let r = two_descriptors();
        assert_eq!(
            build_response(
                &r,
                vec![DescriptorResult::NoLimit],
                &ResponseOptions::default(),
                0
            ),
            Err(VerdictError::LengthMismatch {
                descriptors: 2,
                results: 1
            })
        );
        assert!(window_start(Unit::Unknown, 5).is_err());
    }

    #[test]
    fn remaining_and_reset_at_the_edges() {
        // Exactly at the limit: OK with nothing left; a week resets on the epoch's week.
        let v = counted(&AppliedLimit::new(3, Unit::Week), 1, 3, 604_800 * 2 + 5);
        assert_eq!((v.status.code, v.status.limit_remaining), (OK, 0));
        assert_eq!(v.status.duration_until_reset.unwrap().seconds, 604_795);
        let v = counted(&AppliedLimit::new(u32::MAX, Unit::Second), 1, 1, 0);
        assert_eq!(v.status.limit_remaining, u32::MAX - 1);
    }
}
