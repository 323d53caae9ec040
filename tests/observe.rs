//! Observability: events in order for every decision and wait (exact waits on a manual
//! clock), subscriptions that end on drop, metrics through a local debugging
//! recorder, and the tracing spans and events seen by a small hand-written subscriber.

mod common;

use common::events::{Log, denied, limited, waited};

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

#[cfg(feature = "store")]
use async_trait::async_trait;
use tollgate::AcquireError;
#[cfg(feature = "store")]
use tollgate::KeyedConfig;
use tollgate::algorithm::{Gcra, RefreshPeriod};
use tollgate::observe::{DenyReason, Event, EventKind, Events, Listener};
#[cfg(feature = "store")]
use tollgate::store::{
    FailurePolicy, MemoryStore, Reply, Request, Resilient, SharedLimiter, Store, StoreError,
};
use tollgate::time::ManualClock;
use tollgate::{LeakyQueue, Limiter, Quota, Semaphore};

/// A GCRA of 10 per second with a burst of `burst`, on `clock`, reporting to a new
/// hub "api" that `log` listens to.
fn observed(clock: &ManualClock, burst: u64, log: &Log) -> Limiter<Gcra, ManualClock> {
    let events = Events::new("api");
    events.subscribe(log.clone()).detach();
    let quota = Quota::per_second(10).unwrap().burst(burst).unwrap();
    Limiter::with_clock(Gcra::new(quota), clock.clone()).with_events(events)
}

fn poll<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(&futures::task::noop_waker()))
}

fn block<F: Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

#[test]
fn try_acquire_reports_admitted_and_denied_in_order() {
    let clock = ManualClock::new();
    let log = Log::default();
    let limiter = observed(&clock, 2, &log);
    limiter.try_acquire(2).unwrap();
    limiter.try_acquire(1).unwrap_err();
    limiter.try_acquire(3).unwrap_err();
    clock.advance(Duration::from_millis(100));
    limiter.try_acquire(1).unwrap();
    limiter.close();
    limiter.try_acquire(1).unwrap_err();

    assert_eq!(
        log.kinds(),
        [
            EventKind::Admitted,
            limited(Duration::from_millis(100)),
            denied(DenyReason::Insufficient),
            EventKind::Admitted,
            denied(DenyReason::Closed),
        ]
    );
    let all = log.all();
    assert!(all.iter().all(|s| s.source == "api" && s.key.is_none()));
    assert_eq!(
        all.iter().map(|s| s.permits).collect::<Vec<_>>(),
        [2, 1, 3, 1, 1]
    );
}

#[test]
fn acquire_reports_the_exact_wait_on_virtual_time() {
    let clock = ManualClock::new();
    let log = Log::default();
    let limiter = observed(&clock, 1, &log);
    assert_eq!(block(limiter.acquire(1)), Ok(Duration::ZERO));
    let mut first = Box::pin(limiter.acquire(1));
    let mut second = Box::pin(limiter.acquire(1));
    assert!(poll(first.as_mut()).is_pending());
    assert!(poll(second.as_mut()).is_pending());
    // Nothing is reported while they wait.
    assert_eq!(log.kinds(), [EventKind::Admitted]);

    clock.advance(Duration::from_millis(100));
    assert_eq!(
        poll(first.as_mut()),
        Poll::Ready(Ok(Duration::from_millis(100)))
    );
    clock.advance(Duration::from_millis(100));
    assert_eq!(
        poll(second.as_mut()),
        Poll::Ready(Ok(Duration::from_millis(200)))
    );
    assert_eq!(log.kinds(), [EventKind::Admitted, waited(100), waited(200)]);
}

#[test]
fn blocking_waits_report_too() {
    let clock = ManualClock::new();
    let log = Log::default();
    let limiter = observed(&clock, 1, &log);
    assert_eq!(limiter.acquire_blocking(1), Ok(Duration::ZERO));
    assert_eq!(
        limiter.acquire_blocking_timeout(1, Duration::from_millis(10)),
        Err(AcquireError::TimedOut)
    );
    assert_eq!(
        log.kinds(),
        [EventKind::Admitted, denied(DenyReason::TimedOut)]
    );
}

#[test]
fn failed_waits_report_their_reason_and_cancelled_ones_nothing() {
    let clock = ManualClock::new();
    let log = Log::default();
    let limiter = observed(&clock, 1, &log);
    limiter.try_acquire(1).unwrap();
    // Known at once to exceed the timeout.
    assert_eq!(
        block(limiter.acquire_timeout(1, Duration::from_millis(50))),
        Err(AcquireError::TimedOut)
    );
    assert!(matches!(
        block(limiter.acquire(5)),
        Err(AcquireError::Insufficient(_))
    ));
    let mut cancelled = Box::pin(limiter.acquire(1));
    assert!(poll(cancelled.as_mut()).is_pending());
    drop(cancelled);
    let mut closed = Box::pin(limiter.acquire(1));
    assert!(poll(closed.as_mut()).is_pending());
    limiter.close();
    assert_eq!(
        poll(closed.as_mut()),
        Poll::Ready(Err(AcquireError::Closed))
    );

    assert_eq!(
        log.kinds(),
        [
            EventKind::Admitted,
            denied(DenyReason::TimedOut),
            denied(DenyReason::Insufficient),
            denied(DenyReason::Closed),
        ]
    );
}

#[test]
fn a_queued_wait_that_times_out_later_reports_it_once() {
    let clock = ManualClock::new();
    let log = Log::default();
    let limiter = observed(&clock, 1, &log);
    limiter.try_acquire(1).unwrap();
    let mut first = Box::pin(limiter.acquire(1));
    let mut second = Box::pin(limiter.acquire_timeout(1, Duration::from_millis(150)));
    assert!(poll(first.as_mut()).is_pending());
    assert!(poll(second.as_mut()).is_pending()); // behind a waiter due in time
    clock.advance(Duration::from_millis(100));
    assert!(poll(first.as_mut()).is_ready());
    // Its own permit would come at 200 ms, past its deadline.
    assert_eq!(
        poll(second.as_mut()),
        Poll::Ready(Err(AcquireError::TimedOut))
    );
    assert!(poll(second.as_mut()).is_ready()); // polled again: nothing more
    assert_eq!(
        log.kinds(),
        [
            EventKind::Admitted,
            waited(100),
            denied(DenyReason::TimedOut)
        ]
    );
}

#[test]
fn reservations_report_the_booked_wait() {
    let clock = ManualClock::new();
    let log = Log::default();
    let limiter = observed(&clock, 1, &log);
    limiter.reserve(1, Duration::ZERO).unwrap();
    limiter.reserve(1, Duration::from_secs(1)).unwrap();
    limiter.reserve(1, Duration::from_millis(100)).unwrap_err();
    let kinds = log.kinds();
    assert_eq!(kinds[..2], [EventKind::Admitted, waited(100)]);
    assert!(matches!(
        kinds[2],
        EventKind::Denied {
            reason: DenyReason::Limited,
            ..
        }
    ));
}

#[test]
fn drain_takes_what_is_left_and_reports_it() {
    let clock = ManualClock::new();
    let log = Log::default();
    let events = Events::new("r4j");
    events.subscribe(log.clone()).detach();
    let r4j = RefreshPeriod::new(10, Duration::from_secs(1), Duration::ZERO).unwrap();
    let limiter = Limiter::with_clock(r4j, clock.clone()).with_events(events);
    limiter.try_acquire(4).unwrap();
    assert_eq!(limiter.drain(), 6);
    assert!(limiter.try_acquire(1).is_err());
    assert_eq!(limiter.drain(), 0);
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire(1).is_ok());

    let all = log.all();
    assert_eq!(
        all.iter().map(|s| (s.permits, s.kind)).collect::<Vec<_>>(),
        [
            (4, EventKind::Admitted),
            (6, EventKind::Drained),
            (1, limited(Duration::from_secs(1))),
            (0, EventKind::Drained),
            (1, EventKind::Admitted),
        ]
    );
}

#[test]
fn dropping_the_subscription_unsubscribes_and_detach_keeps_it() {
    let clock = ManualClock::new();
    let events = Events::new("api");
    let dropped = Log::default();
    let kept = Log::default();
    let subscription = events.subscribe(dropped.clone());
    events.subscribe(kept.clone()).detach();
    let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10).unwrap()), clock)
        .with_events(events.clone());
    limiter.try_acquire(1).unwrap();
    drop(subscription);
    assert_eq!(events.listeners(), 1);
    limiter.try_acquire(1).unwrap();
    assert_eq!(dropped.kinds().len(), 1);
    assert_eq!(kept.kinds().len(), 2);
}

#[test]
fn a_subscription_outliving_its_hub_is_harmless() {
    let events = Events::new("gone");
    let subscription = events.subscribe(|_: &Event<'_>| {});
    drop(events);
    drop(subscription);
}

#[test]
fn listeners_may_reenter_the_limiter_and_the_hub() {
    let clock = ManualClock::new();
    let events = Events::new("api");
    let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10).unwrap()), clock)
        .with_events(events.clone());
    let seen = Arc::new(Mutex::new(0));
    let subscription: Arc<Mutex<Option<tollgate::observe::Subscription>>> = Arc::default();
    let inner = {
        let (limiter, seen, subscription) = (limiter.clone(), seen.clone(), subscription.clone());
        move |_: &Event<'_>| {
            *seen.lock().unwrap() += 1;
            // Peeking reports nothing, so this does not recurse.
            let _ = limiter.peek(1);
            // Unsubscribes itself from inside the call.
            drop(subscription.lock().unwrap().take());
        }
    };
    *subscription.lock().unwrap() = Some(events.subscribe(inner));
    limiter.try_acquire(1).unwrap();
    limiter.try_acquire(1).unwrap();
    assert_eq!(*seen.lock().unwrap(), 1);
    assert!(!events.is_observed());
}

#[test]
fn a_listener_dropped_by_an_earlier_one_still_hears_the_event_in_flight_and_no_more() {
    let events = Events::new("api");
    let later = Log::default();
    let dropped: Arc<Mutex<Option<tollgate::observe::Subscription>>> = Arc::default();
    events
        .subscribe({
            let dropped = Arc::clone(&dropped);
            move |_: &Event<'_>| drop(dropped.lock().unwrap().take())
        })
        .detach();
    *dropped.lock().unwrap() = Some(events.subscribe(later.clone()));
    events.emit(1, EventKind::Admitted);
    events.emit(2, EventKind::Admitted);
    assert_eq!(later.all().len(), 1);
    assert_eq!(events.listeners(), 1);
}

#[test]
fn subscriptions_dropped_while_other_threads_emit_free_their_listeners() {
    let events = Events::new("api");
    let listener: Arc<dyn Listener> = Arc::new(Log::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let emitters: Vec<_> = (0..2)
        .map(|_| {
            let (events, stop) = (events.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    events.emit(1, EventKind::Admitted);
                }
            })
        })
        .collect();
    for _ in 0..2_000 {
        let subscription = events.subscribe_arc(Arc::clone(&listener));
        drop(subscription);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for emitter in emitters {
        emitter.join().unwrap();
    }
    assert_eq!(events.listeners(), 0);
    assert!(!events.is_observed());
    // Nothing in the hub holds on to the listener: no growth from churn.
    assert_eq!(Arc::strong_count(&listener), 1);
}

#[test]
fn one_listener_on_two_hubs_tells_them_apart() {
    let clock = ManualClock::new();
    let log = Log::default();
    let shared: Arc<dyn Listener> = Arc::new(log.clone());
    let (a, b) = (Events::new("a"), Events::new("b"));
    a.subscribe_arc(shared.clone()).detach();
    b.subscribe_arc(shared).detach();
    let quota = Quota::per_second(10).unwrap();
    Limiter::with_clock(Gcra::new(quota), clock.clone())
        .with_events(a)
        .try_acquire(1)
        .unwrap();
    Limiter::with_clock(Gcra::new(quota), clock)
        .with_events(b)
        .try_acquire(1)
        .unwrap();
    let sources: Vec<String> = log.all().into_iter().map(|s| s.source).collect();
    assert_eq!(sources, ["a", "b"]);
}

#[test]
fn a_limiter_keeps_the_first_hub_it_is_given() {
    let first = Events::new("first");
    let limiter = Limiter::new(Gcra::new(Quota::per_second(10).unwrap())).with_events(first);
    let limiter = limiter.with_events(Events::new("second"));
    assert_eq!(limiter.events().map(Events::name), Some("first"));
}

#[test]
fn other_components_emit_into_the_same_hub() {
    let log = Log::default();
    let events = Events::new("gateway");
    events.subscribe(log.clone()).detach();
    events.emit(1, EventKind::Admitted);
    events.emit_keyed("10.0.0.1", 2, limited(Duration::from_secs(3)));
    events.emit_event(&Event::new("elsewhere", 3, EventKind::Drained));
    let all = log.all();
    assert_eq!(all[0].source, "gateway");
    assert_eq!(all[1].key.as_deref(), Some("10.0.0.1"));
    assert_eq!((all[2].source.as_str(), all[2].permits), ("elsewhere", 3));
}

#[cfg(feature = "store")]
#[test]
fn shared_limiter_reports_keys_decisions_and_exact_waits() {
    let clock = ManualClock::new();
    let log = Log::default();
    let events = Events::new("shared");
    events.subscribe(log.clone()).detach();
    let store = MemoryStore::with_clock(KeyedConfig::new(100), "t", clock.clone()).unwrap();
    let quota = Quota::per_second(10).unwrap().burst(1).unwrap();
    let limiter = SharedLimiter::with_clock(store, Gcra::new(quota), clock.clone())
        .unwrap()
        .with_events(events);

    assert!(block(limiter.check("k", 1)).unwrap().is_ok());
    assert!(block(limiter.check("k", 1)).unwrap().is_err());
    let mut wait = Box::pin(limiter.acquire("k", 1));
    assert!(poll(wait.as_mut()).is_pending());
    clock.advance(Duration::from_millis(100));
    assert!(matches!(poll(wait.as_mut()), Poll::Ready(Ok(_))));
    assert!(matches!(
        block(limiter.acquire_timeout("k", 1, Duration::from_millis(10))),
        Err(tollgate::AcquireError::TimedOut)
    ));
    clock.advance(Duration::from_millis(100));
    block(limiter.acquire("other", 1)).unwrap();

    let all = log.all();
    assert_eq!(
        all.iter()
            .map(|s| (s.key.as_deref().unwrap(), s.kind))
            .collect::<Vec<_>>(),
        [
            ("k", EventKind::Admitted),
            ("k", limited(Duration::from_millis(100))),
            ("k", waited(100)),
            ("k", denied(DenyReason::TimedOut)),
            ("other", EventKind::Admitted),
        ]
    );
    assert!(all.iter().all(|s| s.source == "shared"));
}

#[test]
fn leaky_queue_reports_departures_and_a_full_queue() {
    let clock = ManualClock::new();
    let log = Log::default();
    let events = Events::new("queue");
    events.subscribe(log.clone()).detach();
    let queue = LeakyQueue::with_clock(2, Quota::per_second(10).unwrap(), clock.clone())
        .unwrap()
        .with_events(events);
    assert_eq!(block(queue.enqueue(1)), Ok(Duration::ZERO));
    let mut second = Box::pin(queue.enqueue(1));
    assert!(poll(second.as_mut()).is_pending());
    assert_eq!(
        block(queue.enqueue(1)),
        Err(AcquireError::QueueFull { capacity: 2 })
    );
    clock.advance(Duration::from_millis(100));
    assert!(poll(second.as_mut()).is_ready());
    assert_eq!(
        log.kinds(),
        [
            EventKind::Admitted,
            denied(DenyReason::QueueFull),
            waited(100)
        ]
    );
}

#[test]
fn semaphore_reports_acquisitions() {
    let log = Log::default();
    let events = Events::new("db");
    events.subscribe(log.clone()).detach();
    let clock = ManualClock::new();
    let semaphore = Semaphore::with_clock(1, clock.clone())
        .unwrap()
        .with_events(events);
    let permit = semaphore.try_acquire(1).unwrap();
    semaphore.try_acquire(1).unwrap_err();
    let mut waiting = Box::pin(semaphore.acquire(1));
    assert!(poll(waiting.as_mut()).is_pending());
    clock.advance(Duration::from_millis(30));
    drop(permit);
    assert!(poll(waiting.as_mut()).is_ready());
    assert_eq!(
        log.kinds(),
        [
            EventKind::Admitted,
            // A permit comes back by release, at no known time.
            EventKind::Denied {
                reason: DenyReason::Limited,
                retry_after: None
            },
            // Timed on the semaphore's clock.
            EventKind::Waited {
                wait: Duration::from_millis(30)
            },
        ]
    );
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Events>();
    check::<tollgate::observe::Subscription>();
    check::<Event<'static>>();
}

#[cfg(feature = "metrics")]
mod metrics_recorder {
    use super::*;
    use metrics_util::MetricKind;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// Every series recorded: (kind, name, sorted labels, value).
    type Series = Vec<(MetricKind, String, Vec<(String, String)>, DebugValue)>;

    fn series(snapshot: metrics_util::debugging::Snapshot) -> Series {
        let mut out: Series = snapshot
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let (kind, key) = key.into_parts();
                let mut labels: Vec<(String, String)> = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                labels.sort();
                (kind, key.name().to_owned(), labels, value)
            })
            .collect();
        out.sort_by(|a, b| (&a.1, &a.2).cmp(&(&b.1, &b.2)));
        out
    }

    fn counter<'a>(
        series: &'a Series,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<&'a DebugValue> {
        series
            .iter()
            .find(|(kind, n, l, _)| {
                *kind == MetricKind::Counter
                    && n == name
                    && l.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, _, v)| v)
    }

    #[test]
    fn counters_and_the_wait_histogram_are_labelled_with_the_hub_name() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let events = Events::new("api");
        let _metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());

        let clock = ManualClock::new();
        let quota = Quota::per_second(10).unwrap().burst(1).unwrap();
        let limiter = Limiter::with_clock(Gcra::new(quota), clock.clone()).with_events(events);
        limiter.try_acquire(1).unwrap();
        limiter.try_acquire(1).unwrap_err();
        limiter.try_acquire(2).unwrap_err();
        let mut wait = Box::pin(limiter.acquire(1));
        assert!(poll(wait.as_mut()).is_pending());
        clock.advance(Duration::from_millis(250));
        assert!(poll(wait.as_mut()).is_ready());

        let series = series(snapshotter.snapshot());
        let api = [("limiter", "api")];
        assert_eq!(
            counter(&series, "tollgate_admitted_total", &api),
            Some(&DebugValue::Counter(2))
        );
        assert_eq!(
            counter(&series, "tollgate_waited_total", &api),
            Some(&DebugValue::Counter(1))
        );
        assert_eq!(
            counter(
                &series,
                "tollgate_denied_total",
                &[("limiter", "api"), ("reason", "limited")]
            ),
            Some(&DebugValue::Counter(1))
        );
        assert_eq!(
            counter(
                &series,
                "tollgate_denied_total",
                &[("limiter", "api"), ("reason", "insufficient")]
            ),
            Some(&DebugValue::Counter(1))
        );
        let histogram = series
            .iter()
            .find(|(kind, name, _, _)| {
                *kind == MetricKind::Histogram && name == "tollgate_wait_seconds"
            })
            .expect("the wait histogram");
        assert_eq!(histogram.2, [("limiter".to_owned(), "api".to_owned())]);
        match &histogram.3 {
            DebugValue::Histogram(values) => {
                assert_eq!(
                    values.iter().map(|v| v.into_inner()).collect::<Vec<_>>(),
                    [0.25]
                )
            }
            other => panic!("not a histogram: {other:?}"),
        }
        // Bounded labels: the limiter's name, the reason or outcome, never a key.
        assert!(series.iter().all(|(_, _, labels, _)| {
            labels
                .iter()
                .all(|(k, _)| k == "limiter" || k == "reason" || k == "outcome")
        }));
    }

    #[test]
    fn keyed_events_add_no_key_label() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let events = Events::new("keyed");
        let _metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());
        for key in ["a", "b", "c"] {
            events.emit_keyed(key, 1, EventKind::Admitted);
        }
        let series = series(snapshotter.snapshot());
        assert_eq!(
            counter(&series, "tollgate_admitted_total", &[("limiter", "keyed")]),
            Some(&DebugValue::Counter(3))
        );
    }

    #[test]
    fn named_keys_get_a_key_label_and_other_keys_none() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let events = Events::new("shed");
        let metrics = metrics::with_local_recorder(&recorder, || {
            tollgate::observe::MetricsRecorder::with_keys(
                "shed",
                ["critical", "sheddable", "critical"],
            )
        });
        events.subscribe(metrics).detach();
        events.emit_keyed("critical", 1, EventKind::Admitted);
        events.emit_keyed("sheddable", 1, EventKind::WouldShed);
        events.emit_keyed("client-42", 1, EventKind::Admitted);
        events.emit(1, EventKind::Admitted);
        let series = series(snapshotter.snapshot());
        let admitted =
            |labels: &[(&str, &str)]| counter(&series, "tollgate_admitted_total", labels);
        assert_eq!(
            admitted(&[("limiter", "shed"), ("key", "critical")]),
            Some(&DebugValue::Counter(1))
        );
        assert_eq!(
            admitted(&[("limiter", "shed"), ("key", "sheddable")]),
            Some(&DebugValue::Counter(1))
        );
        assert_eq!(
            admitted(&[("limiter", "shed")]),
            Some(&DebugValue::Counter(2))
        );
        assert_eq!(
            counter(
                &series,
                "tollgate_would_shed_total",
                &[("limiter", "shed"), ("key", "sheddable")]
            ),
            Some(&DebugValue::Counter(1))
        );
        assert!(
            series.iter().all(|(_, _, labels, _)| labels
                .iter()
                .all(|(k, v)| k != "key" || v != "client-42"))
        );
    }

    #[test]
    fn dropping_the_metrics_subscription_stops_recording() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let events = Events::new("api");
        let metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());
        events.emit(1, EventKind::Drained);
        drop(metrics);
        events.emit(1, EventKind::Drained);
        let series = series(snapshotter.snapshot());
        assert_eq!(
            counter(&series, "tollgate_drained_total", &[("limiter", "api")]),
            Some(&DebugValue::Counter(1))
        );
    }
}

mod tracing_spans {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Metadata, Subscriber};

    /// What the subscriber saw: spans by name with their fields, events by target
    /// and message.
    /// A span's name and its fields as text.
    type Span = (String, Vec<(String, String)>);

    #[derive(Clone, Default)]
    struct Recorded {
        spans: Arc<Mutex<Vec<Span>>>,
        events: Arc<Mutex<Vec<(String, tracing::Level, String)>>>,
        next: Arc<AtomicU64>,
    }

    impl Recorded {
        fn span_names(&self) -> Vec<String> {
            self.spans
                .lock()
                .unwrap()
                .iter()
                .map(|s| s.0.clone())
                .collect()
        }

        fn field(&self, span: &str, field: &str) -> Option<String> {
            self.spans
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.0 == span)
                .flat_map(|s| s.1.iter())
                .find(|(k, _)| k == field)
                .map(|(_, v)| v.clone())
        }
    }

    struct Fields<'a>(&'a mut Vec<(String, String)>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push((field.name().to_owned(), format!("{value:?}")));
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push((field.name().to_owned(), value.to_owned()));
        }
    }

    impl Subscriber for Recorded {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }

        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut fields = Vec::new();
            span.record(&mut Fields(&mut fields));
            let mut spans = self.spans.lock().unwrap();
            spans.push((span.metadata().name().to_owned(), fields));
            self.next.fetch_add(1, Ordering::Relaxed);
            Id::from_u64(spans.len() as u64)
        }

        fn record(&self, span: &Id, values: &Record<'_>) {
            let mut spans = self.spans.lock().unwrap();
            let index = span.into_u64() as usize - 1;
            values.record(&mut Fields(&mut spans[index].1));
        }

        fn record_follows_from(&self, _: &Id, _: &Id) {}

        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = Vec::new();
            event.record(&mut Fields(&mut fields));
            let message = fields
                .into_iter()
                .find(|(k, _)| k == "message")
                .map(|(_, v)| v)
                .unwrap_or_default();
            self.events.lock().unwrap().push((
                event.metadata().target().to_owned(),
                *event.metadata().level(),
                message,
            ));
        }

        fn enter(&self, _: &Id) {}

        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn a_queued_wait_runs_in_a_span_and_an_immediate_grant_makes_none() {
        let recorded = Recorded::default();
        tracing::subscriber::with_default(recorded.clone(), || {
            let clock = ManualClock::new();
            let quota = Quota::per_second(10).unwrap().burst(1).unwrap();
            let limiter = Limiter::with_clock(Gcra::new(quota), clock.clone())
                .with_events(Events::new("api"));
            block(limiter.acquire(1)).unwrap();
            limiter.try_acquire(1).unwrap_err();
            assert!(recorded.span_names().is_empty());

            let mut wait = Box::pin(limiter.acquire(1));
            assert!(poll(wait.as_mut()).is_pending());
            clock.advance(Duration::from_millis(100));
            assert!(poll(wait.as_mut()).is_ready());
        });
        assert_eq!(recorded.span_names(), ["tollgate.wait"]);
        assert_eq!(
            recorded.field("tollgate.wait", "source").as_deref(),
            Some("api")
        );
        assert_eq!(
            recorded.field("tollgate.wait", "permits").as_deref(),
            Some("1")
        );
        assert_eq!(
            recorded.field("tollgate.wait", "outcome").as_deref(),
            Some("granted")
        );
        assert_eq!(
            recorded.field("tollgate.wait", "waited").as_deref(),
            Some("100ms")
        );
    }

    #[test]
    fn a_cancelled_wait_says_so_on_its_span() {
        let recorded = Recorded::default();
        tracing::subscriber::with_default(recorded.clone(), || {
            let limiter =
                Limiter::with_clock(Gcra::new(Quota::per_second(1).unwrap()), ManualClock::new());
            limiter.try_acquire(1).unwrap();
            let mut wait = Box::pin(limiter.acquire(1));
            assert!(poll(wait.as_mut()).is_pending());
        });
        assert_eq!(
            recorded.field("tollgate.wait", "outcome").as_deref(),
            Some("cancelled")
        );
    }

    #[cfg(feature = "store")]
    #[test]
    fn store_calls_run_in_a_span_with_the_op_and_the_rule_count() {
        let recorded = Recorded::default();
        tracing::subscriber::with_default(recorded.clone(), || {
            let clock = ManualClock::new();
            let store = MemoryStore::with_clock(KeyedConfig::new(10), "t", clock.clone()).unwrap();
            let limiter = SharedLimiter::all_of_with_clock(
                store,
                [
                    ("a", Gcra::new(Quota::per_second(1).unwrap()).into()),
                    ("b", Gcra::new(Quota::per_second(2).unwrap()).into()),
                ],
                clock,
            )
            .unwrap();
            block(limiter.check("user-1", 1)).unwrap().unwrap();
            block(limiter.refund("user-1", 1)).unwrap();
        });
        let spans = recorded.spans.lock().unwrap().clone();
        assert_eq!(spans.len(), 2);
        assert!(spans.iter().all(|(name, _)| name == "tollgate.store"));
        let field = |i: usize, k: &str| {
            spans[i]
                .1
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(field(0, "op").as_deref(), Some("acquire"));
        assert_eq!(field(0, "rules").as_deref(), Some("2"));
        assert_eq!(field(0, "key").as_deref(), Some("user-1"));
        assert_eq!(field(0, "outcome").as_deref(), Some("admitted"));
        assert_eq!(field(1, "op").as_deref(), Some("refund"));
        assert_eq!(field(1, "outcome").as_deref(), Some("refunded"));
    }

    /// A store that always fails, as an unreachable Redis does.
    #[cfg(feature = "store")]
    struct Down;

    #[cfg(feature = "store")]
    #[async_trait]
    impl Store for Down {
        async fn execute(&self, _: &Request<'_>) -> Result<Reply, StoreError> {
            Err(StoreError::Connection("connection refused".into()))
        }
    }

    #[cfg(feature = "store")]
    #[test]
    fn resilient_outcomes_are_tracing_events() {
        let recorded = Recorded::default();
        tracing::subscriber::with_default(recorded.clone(), || {
            let clock = ManualClock::new();
            let store = Resilient::builder(Down, FailurePolicy::Open)
                .clock(clock.clone())
                .failure_threshold(2)
                .build()
                .unwrap();
            let limiter =
                SharedLimiter::with_clock(store, Gcra::new(Quota::per_second(1).unwrap()), clock)
                    .unwrap();
            for _ in 0..3 {
                block(limiter.check("k", 1)).unwrap().unwrap();
            }
        });
        let events = recorded.events.lock().unwrap().clone();
        let messages: Vec<(tracing::Level, &str)> = events
            .iter()
            .filter(|(target, _, _)| target == "tollgate::store::resilient")
            .map(|(_, level, message)| (*level, message.as_str()))
            .collect();
        assert_eq!(
            messages,
            [
                (tracing::Level::WARN, "the store failed: the policy decides"),
                (tracing::Level::WARN, "the store failed: the policy decides"),
                (tracing::Level::WARN, "breaker opened"),
                (
                    tracing::Level::DEBUG,
                    "breaker open: the policy decides without the store"
                ),
            ]
        );
    }

    /// A store that fails its first call and never answers the later ones.
    #[cfg(feature = "store")]
    struct FailsThenHangs(std::sync::atomic::AtomicU64);

    #[cfg(feature = "store")]
    #[async_trait]
    impl Store for FailsThenHangs {
        async fn execute(&self, _: &Request<'_>) -> Result<Reply, StoreError> {
            if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                return Err(StoreError::Connection("connection refused".into()));
            }
            futures::future::pending().await
        }
    }

    #[cfg(feature = "store")]
    #[test]
    fn a_dropped_probe_is_not_logged_as_the_breaker_opening() {
        // The bug: a half-open breaker whose probe was dropped (its caller gave up)
        // goes back to open with no cool-down, so that the next call probes; that
        // was logged at WARN as "breaker opened", as if the store had failed again.
        let recorded = Recorded::default();
        tracing::subscriber::with_default(recorded.clone(), || {
            let clock = ManualClock::new();
            let store = Resilient::builder(
                FailsThenHangs(std::sync::atomic::AtomicU64::new(0)),
                FailurePolicy::Open,
            )
            .clock(clock.clone())
            .failure_threshold(1)
            .cool_down(Duration::from_secs(1))
            .build()
            .unwrap();
            let limiter = SharedLimiter::with_clock(
                store,
                Gcra::new(Quota::per_second(1).unwrap()),
                clock.clone(),
            )
            .unwrap();
            block(limiter.check("k", 1)).unwrap().unwrap();
            clock.advance(Duration::from_secs(1));
            let mut probe = Box::pin(limiter.check("k", 1));
            assert!(poll(probe.as_mut()).is_pending());
            drop(probe);
        });
        let events = recorded.events.lock().unwrap().clone();
        let opened = events
            .iter()
            .filter(|(target, _, message)| {
                target == "tollgate::store::resilient" && message == "breaker opened"
            })
            .count();
        assert_eq!(opened, 1, "{events:?}");
    }
}

/// A store whose every answer takes a round trip that is pending once, as a remote
/// store's does.
#[cfg(feature = "store")]
struct RoundTrip(MemoryStore<ManualClock>);

#[cfg(feature = "store")]
#[async_trait]
impl Store for RoundTrip {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        let mut answered = false;
        std::future::poll_fn(|cx| {
            if answered {
                return Poll::Ready(());
            }
            answered = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await;
        self.0.execute(request).await
    }
}

/// Regression: a first waiter whose round trip was still in flight when polled was
/// reported as having waited (0 ns on a manual clock), though the round trip
/// granted it and it never queued behind anything.
#[cfg(feature = "store")]
#[test]
fn a_first_waiter_granted_by_its_round_trip_is_admitted_not_waited() {
    let clock = ManualClock::new();
    let store = MemoryStore::with_clock(KeyedConfig::new(10), "t", clock.clone()).unwrap();
    let log = Log::default();
    let events = Events::new("api");
    events.subscribe(log.clone()).detach();
    let limiter = SharedLimiter::with_clock(
        RoundTrip(store),
        Gcra::new(Quota::per_second(10).unwrap()),
        clock.clone(),
    )
    .unwrap()
    .with_events(events);
    assert_eq!(block(limiter.acquire("k", 1)).unwrap(), Duration::ZERO);
    assert_eq!(log.kinds(), [EventKind::Admitted]);
}
