//! The outbound learners under the client layer: a tower service that answers 429
//! when called faster than N a second (a GCRA on the same `ManualClock`), called
//! back to back by one greedy client, each answer taking a millisecond.
#![cfg(all(feature = "http", feature = "outbound"))]

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::{Layer, Service, service_fn};

use tollgate::algorithm::Gcra;
use tollgate::http::client::{ThrottleError, ThrottleLayer};
use tollgate::http::wire;
use tollgate::observe::{DenyReason, Event, EventKind, Events};
use tollgate::outbound::{Answer, LearnedRate, LearningConfig, SreConfig, SreThrottle};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{Limiter, Quota};

/// The partner's limit, in calls a second.
const N: u32 = 20;

/// What the partner saw: calls that reached it, and those it accepted.
#[derive(Default)]
struct Seen {
    calls: AtomicU64,
    accepted: AtomicU64,
}

/// A partner refusing calls beyond `N` a second (a burst of `N`), with a bare 429,
/// or with the IETF fields when `announce` is set.
fn partner(
    clock: &ManualClock,
    seen: &Arc<Seen>,
    announce: bool,
) -> impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future = impl Send + use<>>
+ Clone
+ use<> {
    let limiter = Limiter::with_clock(
        Gcra::new(Quota::per_second(N.into()).unwrap()),
        clock.clone(),
    );
    let seen = Arc::clone(seen);
    service_fn(move |_: Request<()>| {
        seen.calls.fetch_add(1, Ordering::Relaxed);
        let decision = limiter.try_acquire(1);
        let mut response = Response::new(());
        match decision {
            Ok(admitted) => {
                seen.accepted.fetch_add(1, Ordering::Relaxed);
                if announce {
                    let headers = response.headers_mut();
                    headers.insert(
                        wire::RATELIMIT_POLICY,
                        format!(r#""p";q={N};w=1"#).parse().unwrap(),
                    );
                    let t = wire::seconds_up(admitted.reset_after());
                    let value = format!(r#""p";r={};t={t}"#, admitted.remaining());
                    headers.insert(wire::RATELIMIT, value.parse().unwrap());
                }
            }
            Err(_) => *response.status_mut() = StatusCode::TOO_MANY_REQUESTS,
        }
        std::future::ready(Ok::<_, Infallible>(response))
    })
}

/// Runs one call to completion, moving the clock a millisecond whenever it waits.
fn run<F: Future>(clock: &ManualClock, call: F) -> F::Output {
    let mut call = Box::pin(call);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    loop {
        if let Poll::Ready(out) = call.as_mut().poll(&mut cx) {
            return out;
        }
        clock.advance(Duration::from_millis(1));
    }
}

/// Calls back to back for `seconds` of the clock; each answer takes a millisecond.
/// Returns how many calls failed locally (never sent).
fn greedy<S>(
    clock: &ManualClock,
    client: &mut S,
    seconds: u64,
    mut each_second: impl FnMut(u64),
) -> u64
where
    S: Service<Request<()>, Response = Response<()>, Error = ThrottleError<Infallible>>,
{
    let mut local = 0;
    let mut next_second = 1;
    while clock.now().as_duration() < Duration::from_secs(seconds) {
        match run(clock, client.call(Request::new(()))) {
            Ok(_) => {}
            Err(ThrottleError::TimedOut) => local += 1,
            Err(e) => panic!("{e}"),
        }
        clock.advance(Duration::from_millis(1));
        while clock.now().as_duration() >= Duration::from_secs(next_second) {
            each_second(next_second);
            next_second += 1;
        }
    }
    local
}

#[test]
fn cubic_learns_the_partners_rate() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    // Bare 429s: no pause, only the learned rate.
    let layer = ThrottleLayer::with_clock(rate.clone(), clock.clone())
        .default_backoff(Duration::ZERO)
        .feedback(rate.clone());
    let mut client = layer.layer(partner(&clock, &seen, false));
    let mut rates = Vec::new();
    greedy(&clock, &mut client, 300, |s| {
        if s > 100 {
            rates.push(rate.rate().expect("throttled, so limiting"));
        }
    });
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let (low, high) = rates
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    let n = f64::from(N);
    println!("learned rate over the last 200 s: mean {mean:.2}, min {low:.2}, max {high:.2}");
    // Stated range: CUBIC saws around N, between about beta·N and a little above;
    // measured here: mean 20.4, from 17.7 to 21.9.
    assert!(mean > 0.8 * n && mean < 1.2 * n, "mean {mean}");
    assert!(low > 0.6 * n && high < 1.5 * n, "{low}..{high}");
    // Most calls go through: the client learned not to exceed the limit.
    let (calls, accepted) = (
        seen.calls.load(Ordering::Relaxed),
        seen.accepted.load(Ordering::Relaxed),
    );
    println!("partner saw {calls} calls, accepted {accepted}");
    assert!(
        accepted as f64 > 0.95 * calls as f64,
        "{accepted} of {calls}"
    );
}

#[test]
fn announced_limits_pace_the_client_before_it_is_refused() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    let layer = ThrottleLayer::with_clock(rate.clone(), clock.clone()).feedback(rate.clone());
    let mut client = layer.layer(partner(&clock, &seen, true));
    greedy(&clock, &mut client, 60, |_| {});
    let (calls, accepted) = (
        seen.calls.load(Ordering::Relaxed),
        seen.accepted.load(Ordering::Relaxed),
    );
    println!(
        "partner saw {calls} calls, accepted {accepted}; rate {:?}",
        rate.rate()
    );
    // The first call announces the policy: from then on the client paces at N a
    // second, and is refused at most a handful of times.
    assert!(calls - accepted <= 5, "{accepted} of {calls}");
    assert!(accepted >= u64::from(N) * 55, "{accepted}");
    assert!(rate.rate().unwrap() <= f64::from(N));
}

#[test]
fn sre_throttle_refuses_locally_once_the_partner_refuses_most_calls() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let sre = SreThrottle::with_clock(
        SreConfig::new()
            .window(Duration::from_secs(10), 10)
            .unwrap()
            .seed(7),
        clock.clone(),
    );
    let layer = ThrottleLayer::with_clock(sre.clone(), clock.clone())
        .default_backoff(Duration::ZERO)
        .feedback(sre.clone());
    let mut client = layer.layer(partner(&clock, &seen, false));
    // About 500 attempts a second against a partner taking 20.
    let local = greedy(&clock, &mut client, 60, |_| {});
    let (calls, accepted) = (
        seen.calls.load(Ordering::Relaxed),
        seen.accepted.load(Ordering::Relaxed),
    );
    let attempts = calls + local;
    println!("{attempts} attempts: {local} refused locally, {calls} sent, {accepted} accepted");
    assert!(local > 0);
    // Most attempts never leave the client; what does is near K · accepts.
    assert!(
        local as f64 > 0.8 * attempts as f64,
        "{local} of {attempts}"
    );
    assert!(
        (calls as f64) < 2.5 * accepted as f64 + 100.0,
        "{calls} sent, {accepted} accepted"
    );
    assert!(sre.rejection_probability() > 0.5);
}

#[test]
fn the_learners_work_as_plain_limiters_too() {
    let clock = ManualClock::new();
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    let sre = SreThrottle::with_clock(SreConfig::new().seed(3), clock.clone());
    let partner = Limiter::with_clock(
        Gcra::new(Quota::per_second(N.into()).unwrap()),
        clock.clone(),
    );
    let (mut sent, mut refused) = (0u64, 0u64);
    for _ in 0..120_000 {
        clock.advance(Duration::from_millis(1));
        if rate.try_acquire(1).is_err() || sre.try_acquire().is_err() {
            continue;
        }
        sent += 1;
        let answer = match partner.try_acquire(1) {
            Ok(_) => Answer::accepted(),
            Err(_) => {
                refused += 1;
                Answer::throttled()
            }
        };
        rate.record(&answer);
        sre.record(&answer);
    }
    println!("sent {sent}, refused {refused}, rate {:?}", rate.rate());
    assert!(refused * 5 < sent, "{refused} of {sent}");
    let learned = rate.rate().unwrap();
    assert!(
        learned > 0.4 * f64::from(N) && learned < 2.0 * f64::from(N),
        "{learned}"
    );
}

#[test]
fn learners_and_their_futures_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
    let sre = SreThrottle::new(SreConfig::new());
    send_sync(&rate);
    send_sync(&sre);
    send(&rate.acquire(1, None));
    send_sync(&tollgate::outbound::FeedbackHandle::new((
        rate.clone(),
        sre,
    )));
}

/// What a learner reported through its events.
#[derive(Default)]
struct Tally {
    admitted: AtomicU64,
    waited: AtomicU64,
    refused: AtomicU64,
    rate_changes: AtomicU64,
    /// The last `RateChanged`, and whether each one's `previous` was the one before's
    /// `interval`.
    last_rate: std::sync::Mutex<Option<Option<Duration>>>,
    chained: std::sync::atomic::AtomicBool,
}

impl Tally {
    fn subscribe(events: &Events) -> (Arc<Tally>, tollgate::observe::Subscription) {
        let tally = Arc::new(Tally {
            chained: true.into(),
            ..Tally::default()
        });
        let subscription = events.subscribe({
            let tally = Arc::clone(&tally);
            move |event: &Event<'_>| tally.record(event)
        });
        (tally, subscription)
    }

    fn record(&self, event: &Event<'_>) {
        assert_eq!(event.source, "partner");
        let count = match event.kind {
            EventKind::Admitted => &self.admitted,
            EventKind::Waited { .. } => &self.waited,
            EventKind::Denied { reason, .. } => {
                assert!(
                    matches!(reason, DenyReason::Limited | DenyReason::TimedOut),
                    "{event}"
                );
                &self.refused
            }
            EventKind::RateChanged { previous, interval } => {
                assert_eq!(event.permits, 0);
                assert_ne!(previous, interval, "{event}");
                assert!(event.to_string().starts_with("partner: rate "), "{event}");
                let mut last = self.last_rate.lock().unwrap();
                if last.is_some_and(|l| l != previous) {
                    self.chained.store(false, Ordering::Relaxed);
                }
                *last = Some(interval);
                &self.rate_changes
            }
            other => panic!("unexpected {other:?}"),
        };
        count.fetch_add(1, Ordering::Relaxed);
    }

    fn get(count: &AtomicU64) -> u64 {
        count.load(Ordering::Relaxed)
    }
}

/// The rate as `RateChanged` reports it: the time between calls, to the nanosecond.
fn interval(rate: Option<f64>) -> Option<Duration> {
    rate.map(|r| Duration::from_nanos((1e9 / r).round() as u64))
}

#[test]
fn learned_rate_under_the_layer_reports_its_rate_and_its_decisions() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let events = Events::new("partner");
    let (tally, _subscription) = Tally::subscribe(&events);
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone()).with_events(events);
    // A timeout shorter than the wait at the floor rate: some calls are refused
    // locally once the rate is learned.
    let layer = ThrottleLayer::with_clock(rate.clone(), clock.clone())
        .default_backoff(Duration::ZERO)
        .timeout(Duration::from_millis(20))
        .feedback(rate.clone());
    let mut client = layer.layer(partner(&clock, &seen, false));
    let local = greedy(&clock, &mut client, 30, |_| {});
    let calls = seen.calls.load(Ordering::Relaxed);
    let (admitted, waited, refused, changes) = (
        Tally::get(&tally.admitted),
        Tally::get(&tally.waited),
        Tally::get(&tally.refused),
        Tally::get(&tally.rate_changes),
    );
    println!(
        "{calls} sent, {local} refused locally; events: {admitted} admitted, {waited} \
         waited, {refused} refused, {changes} rate changes"
    );
    // Every call sent was admitted (at once or after a wait), every local refusal
    // reported, and no other decision.
    assert_eq!(admitted + waited, calls);
    assert!(local > 0);
    assert_eq!(refused, local);
    // The rate moves with nearly every answer once throttled: reported each time,
    // each change starting where the last ended, the last one the rate now.
    assert!(changes > 100, "{changes}");
    assert!(tally.chained.load(Ordering::Relaxed));
    assert_eq!(
        *tally.last_rate.lock().unwrap(),
        Some(interval(rate.rate()))
    );
}

#[test]
fn sre_throttle_under_the_layer_reports_each_local_refusal() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let events = Events::new("partner");
    let (tally, _subscription) = Tally::subscribe(&events);
    let sre = SreThrottle::with_clock(
        SreConfig::new()
            .window(Duration::from_secs(10), 10)
            .unwrap()
            .seed(7),
        clock.clone(),
    )
    .with_events(events);
    let layer = ThrottleLayer::with_clock(sre.clone(), clock.clone())
        .default_backoff(Duration::ZERO)
        .feedback(sre.clone());
    let mut client = layer.layer(partner(&clock, &seen, false));
    let local = greedy(&clock, &mut client, 20, |_| {});
    let calls = seen.calls.load(Ordering::Relaxed);
    assert!(local > calls, "{local} refused locally, {calls} sent");
    assert_eq!(Tally::get(&tally.refused), local);
    assert_eq!(Tally::get(&tally.admitted), calls);
    assert_eq!(Tally::get(&tally.waited), 0);
    assert_eq!(Tally::get(&tally.rate_changes), 0);
}

#[cfg(feature = "metrics")]
#[test]
fn the_learners_events_become_metrics() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use tollgate::observe::{DENIED_TOTAL, OUTBOUND_RATE};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let events = Events::new("partner");
    let _metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());
    let clock = ManualClock::new();
    let rate =
        LearnedRate::with_clock(LearningConfig::new(), clock.clone()).with_events(events.clone());
    let sre = SreThrottle::with_clock(SreConfig::new().seed(5), clock.clone()).with_events(events);
    let mut refused = 0;
    for _ in 0..200 {
        clock.advance(Duration::from_millis(100));
        if rate.try_acquire(1).is_err() {
            refused += 1;
        }
        if sre.try_acquire().is_err() {
            refused += 1;
        }
        rate.record(&Answer::throttled());
        sre.record(&Answer::throttled());
    }
    let learned = rate.rate().unwrap();
    let (mut gauge, mut denied) = (None, 0);
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let name = key.key().name();
        match value {
            DebugValue::Gauge(v) if name == OUTBOUND_RATE => gauge = Some(v.into_inner()),
            DebugValue::Counter(n) if name == DENIED_TOTAL => denied += n,
            _ => {}
        }
    }
    println!("rate {learned}, gauge {gauge:?}, {refused} refused, {denied} counted");
    let gauge = gauge.expect("the rate gauge is set");
    assert!(
        (gauge - learned).abs() < 1e-6 * learned,
        "{gauge} vs {learned}"
    );
    assert!(refused > 0);
    assert_eq!(denied, refused);
}

// ---- Bounds on what a partner says and what a caller asks ----

/// A 200 answer carrying `RateLimit-Policy: value`, read as the client layer reads it.
fn policy(value: &'static str) -> Answer {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        wire::RATELIMIT_POLICY,
        http::HeaderValue::from_static(value),
    );
    Answer::from_headers(StatusCode::OK, &headers, Duration::ZERO)
}

/// Polls `call` once.
fn poll_once<F: Future>(call: F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    std::pin::pin!(call).poll(&mut cx)
}

// The bug: `RateLimit-Policy: "d";q=0;w=60` set a fill rate of 0 that never lapsed:
// every call was refused for 584 years and `acquire(1, None)` never ended.
#[test]
fn a_zero_quota_from_a_partner_expires_and_the_floor_holds() {
    let clock = ManualClock::new();
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    let zero = policy(r#""d";q=0;w=60"#);
    assert_eq!(zero.quota(), Some((0, Duration::from_secs(60))));
    rate.record(&zero);
    assert_eq!(rate.rate(), Some(0.5)); // the floor
    let denied = rate.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(2)));
    // A waiter goes at the floor's pace.
    run(&clock, rate.acquire(1, None)).unwrap();
    assert_eq!(clock.now().as_duration(), Duration::from_secs(2));
    // The quota lapses a window after it was announced: the next answer lifts it.
    clock.advance(Duration::from_secs(58));
    rate.record(&Answer::accepted());
    assert_eq!(rate.rate(), None);
    assert!(rate.try_acquire(1000).is_ok());
}

// The bug: a quota of 1 per `Duration::MAX` paced calls at one per 584 years, for
// good.
#[test]
fn a_quota_over_an_endless_window_holds_the_floor_and_lapses_within_an_hour() {
    let clock = ManualClock::new();
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    rate.record(&Answer::accepted().with_quota(1, Duration::MAX));
    assert_eq!(rate.rate(), Some(0.5));
    let denied = rate.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(2)));
    clock.advance(Duration::from_secs(3599));
    rate.record(&Answer::accepted());
    assert_eq!(rate.rate(), Some(0.5));
    clock.advance(Duration::from_secs(1));
    rate.record(&Answer::accepted());
    assert_eq!(rate.rate(), None);
}

// The same kind: `RateLimit: r=1;t=<forever>` paced calls at one per 584 years.
#[test]
fn remaining_calls_over_an_endless_reset_hold_the_floor_and_lapse_with_max_pause() {
    let clock = ManualClock::new();
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    rate.record(&Answer::accepted().with_remaining(1, Duration::MAX));
    assert_eq!(rate.rate(), Some(0.5));
    // The default `max_pause`: an hour.
    clock.advance(Duration::from_secs(3600));
    rate.record(&Answer::accepted());
    assert_eq!(rate.rate(), None);
}

// The bug: once limiting was on, `try_acquire(u64::MAX)` was admitted and left the
// bucket that many tokens in debt: every later call waited 584 years.
#[test]
fn a_huge_request_is_refused_as_never_and_takes_nothing() {
    let clock = ManualClock::new();
    let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    rate.record(&Answer::accepted().with_quota(10, Duration::from_secs(1)));
    clock.advance(Duration::from_secs(1)); // a full bucket of 10
    let never = rate.try_acquire(u64::MAX).unwrap_err();
    match never {
        tollgate::Denied::Insufficient(never) => {
            // A full bucket and an hour of refill at 10 a second.
            assert_eq!((never.requested(), never.capacity()), (u64::MAX, 36_010));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        poll_once(rate.acquire(u64::MAX, None)),
        Poll::Ready(Err(tollgate::AcquireError::Insufficient(_)))
    ));
    // Nothing was taken: the bucket is still full.
    for _ in 0..10 {
        assert!(rate.try_acquire(1).is_ok());
    }
    assert!(rate.try_acquire(1).is_err());
}

// The bug: `window(5 s, u32::MAX)` passed validation, and `SreThrottle::with_clock`
// then aborted the process allocating 103 GB.
#[test]
fn a_window_of_u32_max_buckets_is_a_typed_error_not_an_abort() {
    let error = SreConfig::new()
        .window(Duration::from_secs(5), u32::MAX)
        .unwrap_err();
    assert_eq!(
        error,
        tollgate::ConfigError::OutOfRange {
            parameter: "buckets",
            expected: "at most 1000",
        }
    );
}

// The bug: `measure_every(Duration::MAX)` was accepted: the sending rate was never
// measured, and the learned rate stayed at the floor.
#[test]
fn measuring_every_duration_max_is_a_typed_error() {
    let error = LearningConfig::new()
        .measure_every(Duration::MAX)
        .unwrap_err();
    assert!(
        matches!(
            error,
            tollgate::ConfigError::TooLong {
                parameter: "measure_every",
                ..
            }
        ),
        "{error:?}"
    );
}

// The bugs above, swept: no answer a partner can send, at any point of the clock,
// holds a call for more than an hour for its token plus an hour behind the debt of
// a call larger than the bucket (a pause is at most `max_pause`, an hour).
#[test]
fn no_answer_holds_a_call_beyond_the_bounds_even_at_the_clocks_end() {
    let durations = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_secs(1),
        Duration::MAX,
    ];
    let counts = [0, 1, 10, u64::MAX];
    let starts = [
        Nanos::ZERO,
        Nanos::new(u64::MAX - 3_600_000_000_000),
        Nanos::MAX,
    ];
    let slowest = LearningConfig::new().min_rate(1.0 / 3600.0).unwrap();
    for config in [LearningConfig::new(), slowest] {
        for start in starts {
            for (q, w, r, t) in every_limit(&counts, &durations) {
                for throttled in [false, true] {
                    let clock = ManualClock::starting_at(start);
                    let rate = LearnedRate::with_clock(config, clock.clone());
                    let answer = if throttled {
                        Answer::throttled()
                    } else {
                        Answer::accepted()
                    };
                    let _ = rate.try_acquire(1);
                    clock.advance(Duration::from_millis(300));
                    rate.record(&answer.with_quota(q, w).with_remaining(r, t));
                    clock.advance(Duration::from_millis(300));
                    rate.record(&answer.with_retry_after(Duration::MAX));
                    let case = format!("{start:?} q={q} w={w:?} r={r} t={t:?} {throttled}");
                    if let Some(rate) = rate.rate() {
                        assert!(rate >= 1.0 / 3600.0, "{case}: {rate}");
                    }
                    for n in counts {
                        match rate.try_acquire(n) {
                            Ok(_) => {}
                            Err(tollgate::Denied::Limited(limited)) => {
                                let wait = limited.retry_after().unwrap();
                                assert!(wait <= Duration::from_secs(7200), "{case}: {wait:?}");
                            }
                            Err(tollgate::Denied::Insufficient(_)) => {
                                assert!(n > 1, "{case}: {n} is never")
                            }
                            Err(other) => panic!("{case}: {other:?}"),
                        }
                    }
                }
            }
        }
    }
}

/// Every `(q, w, r, t)` of `counts` and `durations`.
fn every_limit(counts: &[u64], durations: &[Duration]) -> Vec<(u64, Duration, u64, Duration)> {
    let mut all = Vec::new();
    for &q in counts {
        for &w in durations {
            for &r in counts {
                for &t in durations {
                    all.push((q, w, r, t));
                }
            }
        }
    }
    all
}
