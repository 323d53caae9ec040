//! The fields of a verdict, as the server layer writes them on every response it
//! answers or passes, in the grammar [`wire`](crate::http::wire) defines.

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderValue};

use crate::decision::Denied;
use crate::http::limits::Verdict;
use crate::http::wire::{
    RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
    ratelimit_value, retry_after_seconds, seconds_up,
};

/// Adds the fields `verdict` calls for to `headers`: nothing for a verdict without a
/// decision; `RateLimit-Policy` listing its policies, and for an admission or a "not
/// now" denial `RateLimit` of the decisive policy; `Retry-After` on every "not now"
/// denial, even one without policies; and with `legacy`, `X-RateLimit-*` beside
/// `RateLimit`. Every sf-integer is clamped to 15 digits, the most RFC 9651 allows.
///
/// `RateLimit`'s `t` is the time until more than `r` permits are free, on an
/// admission and a denial alike (see [`wire`](crate::http::wire#the-reset-parameter-t));
/// `Retry-After` is never earlier than `t`, and `X-RateLimit-Reset` (until the policy
/// is full again) never earlier either.
///
/// Fields are appended, not replaced: an inner layer's `RateLimit` items and this
/// one's make one list, as structured-field lists combine across field lines. A
/// request denied for good (more costly than the quota, or a closed limiter) gets no
/// `RateLimit`, which would need a remaining count, and no `Retry-After`, as waiting
/// does not help.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::HeaderMap;
/// use tollgate::http::server;
/// use tollgate::http::{Policy, Verdict};
/// use tollgate::Admitted;
///
/// let policies = vec![Policy::new("default", 10, Duration::from_secs(1))];
/// let admitted = Admitted::new(10, 7, Duration::from_millis(300));
/// let mut fields = HeaderMap::new();
/// server::insert(&mut fields, &Verdict::new(Ok(admitted), policies, 0), false);
/// assert_eq!(fields["ratelimit-policy"], r#""default";q=10;w=1"#);
/// assert_eq!(fields["ratelimit"], r#""default";r=7;t=1"#);
/// assert_eq!(fields.len(), 2);
/// ```
pub fn insert(headers: &mut HeaderMap, verdict: &Verdict, legacy: bool) {
    let Some(decision) = &verdict.decision else {
        return;
    };
    // Formatted once, when the policies were built: a clone is a reference count.
    if let Some(field) = verdict.policies.field() {
        headers.append(RATELIMIT_POLICY, field.clone());
    }
    // `Retry-After` needs no policy: a 429 always says when to come back.
    if let Err(Denied::Limited(limited)) = decision {
        if let Some(seconds) = retry_after_seconds(limited) {
            headers.append(RETRY_AFTER, HeaderValue::from(seconds));
        }
    }
    let Some(policy) = verdict.decisive_policy() else {
        return;
    };
    let (limit, remaining, t, reset_after) = match decision {
        // `t` has one meaning, the draft's, on both: the time until more than `r`.
        Ok(admitted) => (
            admitted.limit(),
            admitted.remaining(),
            Some(seconds_up(admitted.next_permit_after())),
            admitted.reset_after(),
        ),
        Err(Denied::Limited(limited)) => (
            limited.limit(),
            limited.remaining(),
            limited.next_permit_after().map(seconds_up),
            limited.reset_after(),
        ),
        Err(_) => return,
    };
    headers.append(RATELIMIT, ratelimit_value(policy, remaining, t));
    if legacy {
        headers.append(X_RATELIMIT_LIMIT, HeaderValue::from(limit));
        headers.append(X_RATELIMIT_REMAINING, HeaderValue::from(remaining));
        headers.append(
            X_RATELIMIT_RESET,
            HeaderValue::from(seconds_up(reset_after)),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::decision::{Admitted, InsufficientCapacity, Limited};
    use crate::http::Policy;

    fn policy(name: &str, q: u64, w: Duration) -> Policy {
        Policy::new(name, q, w)
    }

    fn fields(map: &HeaderMap) -> Vec<(String, String)> {
        map.iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn admitted_fields() {
        let verdict = Verdict::new(
            Ok(Admitted::new(100, 99, Duration::from_millis(600))),
            vec![
                policy("burst", 100, Duration::from_secs(60)),
                policy("daily", 1000, Duration::from_secs(86_400)),
            ],
            0,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(
            fields(&map),
            pairs(&[
                (
                    "ratelimit-policy",
                    r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
                ),
                ("ratelimit", r#""burst";r=99;t=1"#),
                ("x-ratelimit-limit", "100"),
                ("x-ratelimit-remaining", "99"),
                ("x-ratelimit-reset", "1"),
            ])
        );
    }

    #[test]
    fn limited_fields_report_the_decisive_policy() {
        let limited = Limited::new(
            Duration::from_millis(3_400),
            1000,
            2,
            Duration::from_secs(86_000),
        );
        let verdict = Verdict::new(
            Err(Denied::Limited(limited)),
            vec![
                policy("burst", 100, Duration::from_secs(60)),
                policy("daily", 1000, Duration::from_secs(86_400)),
            ],
            1,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(
            fields(&map),
            pairs(&[
                (
                    "ratelimit-policy",
                    r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
                ),
                ("retry-after", "4"),
                ("ratelimit", r#""daily";r=2;t=4"#),
                ("x-ratelimit-limit", "1000"),
                ("x-ratelimit-remaining", "2"),
                ("x-ratelimit-reset", "86000"),
            ])
        );
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        let limited = Limited::new(Duration::ZERO, 10, 0, Duration::ZERO);
        let verdict = Verdict::new(
            Err(Denied::Limited(limited)),
            vec![policy("p", 10, Duration::from_secs(1))],
            0,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, false);
        assert_eq!(map["retry-after"], "1");
        assert_eq!(map["ratelimit"], r#""p";r=0;t=0"#);
    }

    /// The bug: a quota, window or count above 15 digits was sent as is, which makes
    /// the whole field invalid (RFC 9651 integers have at most 15 digits), and
    /// `seconds_up(Duration::MAX)` overflowed; `Retry-After`, not an sf-integer, is
    /// sent whole and never earlier than `t`.
    #[test]
    fn huge_numbers_are_clamped_to_the_largest_sf_integer() {
        assert_eq!(seconds_up(Duration::MAX), u64::MAX);
        let huge = policy("h", u64::MAX, Duration::MAX);
        let limited = Limited::new(Duration::MAX, u64::MAX, u64::MAX, Duration::MAX);
        let verdict = Verdict::new(Err(Denied::Limited(limited)), vec![huge], 0);
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        let t = map["ratelimit"]
            .to_str()
            .unwrap()
            .rsplit("t=")
            .next()
            .unwrap();
        let retry_after: u64 = map["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry_after >= t.parse::<u64>().unwrap());
        assert_eq!(map["x-ratelimit-limit"], u64::MAX.to_string().as_str());
    }

    /// The bug: a denial whose verdict had no policies (or a `decisive` index out of
    /// range) was a 429 without `Retry-After`.
    #[test]
    fn retry_after_is_sent_without_policies() {
        let limited = Limited::new(Duration::from_millis(2_500), 10, 0, Duration::ZERO);
        let verdict = Verdict::new(Err(Denied::Limited(limited)), Vec::<Policy>::new(), 0);
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(fields(&map), pairs(&[("retry-after", "3")]));

        let verdict = Verdict::new(
            Err(Denied::Limited(limited)),
            vec![policy("p", 10, Duration::from_secs(1))],
            7,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, false);
        assert_eq!(
            fields(&map),
            pairs(&[
                ("ratelimit-policy", r#""p";q=10;w=1"#),
                ("retry-after", "3")
            ])
        );
    }

    #[test]
    fn never_admitted_gets_only_the_policies() {
        let verdict = Verdict::new(
            Err(Denied::Insufficient(InsufficientCapacity::new(12, 10))),
            vec![policy("p", 10, Duration::from_secs(1))],
            0,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(
            fields(&map),
            pairs(&[("ratelimit-policy", r#""p";q=10;w=1"#)])
        );
    }

    #[test]
    fn no_decision_or_no_policy_adds_nothing() {
        let mut map = HeaderMap::new();
        insert(&mut map, &Verdict::unlimited(), true);
        let admitted = Admitted::new(1, 0, Duration::ZERO);
        insert(
            &mut map,
            &Verdict::new(Ok(admitted), Vec::<Policy>::new(), 0),
            true,
        );
        assert!(map.is_empty());
    }

    #[test]
    fn fields_are_appended_to_an_inner_layers() {
        let mut map = HeaderMap::new();
        map.append(RATELIMIT, HeaderValue::from_static(r#""inner";r=1;t=1"#));
        let verdict = Verdict::new(
            Ok(Admitted::new(5, 4, Duration::from_secs(1))),
            vec![policy("outer", 5, Duration::from_secs(1))],
            0,
        );
        insert(&mut map, &verdict, false);
        let values: Vec<_> = map.get_all(RATELIMIT).iter().collect();
        assert_eq!(values, [r#""inner";r=1;t=1"#, r#""outer";r=4;t=1"#]);
    }

    /// What the server layer sends, the client layer reads: every field, names with
    /// escapes and encoded bytes, and the largest numbers.
    #[test]
    fn what_the_server_layer_sends_the_client_layer_reads() {
        use crate::http::wire::{backoff, rate_limit, rate_limit_policy};

        let name = "a \"b\" \\ k\u{e4}se";
        let policies = vec![
            Policy::new(name, 100, Duration::from_secs(60)),
            Policy::new("huge", u64::MAX, Duration::MAX),
        ];
        let limited = Limited::new(
            Duration::from_millis(11_200),
            100,
            0,
            Duration::from_secs(60),
        );
        let verdict = Verdict::new(Err(Denied::Limited(limited)), policies.clone(), 0);
        let mut h = HeaderMap::new();
        insert(&mut h, &verdict, true);
        assert_eq!(backoff(&h, Duration::ZERO), Some(Duration::from_secs(12)));
        let items = rate_limit(&h);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].policy(), "a \"b\" \\ k%c3%a4se");
        assert_eq!(items[0].remaining(), 0);
        assert_eq!(items[0].reset(), Some(Duration::from_secs(12)));
        let read = rate_limit_policy(&h);
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].name(), "a \"b\" \\ k%c3%a4se");
        assert_eq!(read[0].quota(), 100);
        assert_eq!(read[1].quota(), 999_999_999_999_999);
        assert_eq!(
            read[1].window(),
            Some(Duration::from_secs(999_999_999_999_999))
        );

        let admitted = Admitted::new(u64::MAX, u64::MAX, Duration::MAX);
        let verdict = Verdict::new(Ok(admitted), policies, 1);
        let mut h = HeaderMap::new();
        insert(&mut h, &verdict, true);
        assert_eq!(rate_limit(&h)[0].remaining(), 999_999_999_999_999);
        assert_eq!(backoff(&h, Duration::ZERO), None);
    }
}
