//! The circuit breaker of a `Resilient` store: requests racing through it on several
//! threads. The inner store is a fake that answers each request by its tag: `ok`
//! answers, `fail` fails at once, `hang` never answers, and `late` fails at its
//! second poll, so that a model can hold a call sent before the breaker opened.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use loom::future::block_on;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_tests::poll_once;
use tollgate::algorithm::FixedWindow;
use tollgate::store::{
    BreakerState, Check, FailurePolicy, Op, Reply, Request, Resilient, Rule, Store, StoreError,
};
use tollgate::time::ManualClock;
use tollgate::Admitted;

const COOL_DOWN: Duration = Duration::from_secs(1);
const DEADLINE: Duration = Duration::from_millis(5);

/// Counts the calls that reach it, by what they were asked to do.
#[derive(Default)]
struct Fake {
    answered: AtomicUsize,
    failed: AtomicUsize,
    hung: AtomicUsize,
}

impl Fake {
    fn calls(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
            + self.failed.load(Ordering::SeqCst)
            + self.hung.load(Ordering::SeqCst)
    }
}

/// Pending at its first poll, failed at the next.
struct FailsAtSecondPoll(bool);

impl Future for FailsAtSecondPoll {
    type Output = StoreError;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<StoreError> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(StoreError::Connection("late".into()))
        } else {
            Poll::Pending
        }
    }
}

#[async_trait]
impl Store for Fake {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        match request.tag {
            "ok" => {
                self.answered.fetch_add(1, Ordering::SeqCst);
                Ok(Reply::Decision(Ok(Admitted::new(10, 9, Duration::ZERO))))
            }
            "hang" => {
                self.hung.fetch_add(1, Ordering::SeqCst);
                std::future::pending().await
            }
            "late" => {
                self.failed.fetch_add(1, Ordering::SeqCst);
                Err(FailsAtSecondPoll(false).await)
            }
            _ => {
                self.failed.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::Connection("down".into()))
            }
        }
    }
}

type Tested = Arc<Resilient<Arc<Fake>, ManualClock>>;

/// A store failing closed whose breaker opens after `threshold` failures.
fn resilient(threshold: u32) -> (Tested, Arc<Fake>, ManualClock) {
    let clock = ManualClock::new();
    let fake = Arc::new(Fake::default());
    let store = Resilient::builder(fake.clone(), FailurePolicy::Closed)
        .deadline(DEADLINE)
        .failure_threshold(threshold)
        .cool_down(COOL_DOWN)
        .clock(clock.clone())
        .build()
        .unwrap();
    (Arc::new(store), fake, clock)
}

fn rule() -> Rule {
    FixedWindow::new(10, Duration::from_secs(60))
        .unwrap()
        .into()
}

/// Runs a request for one permit under `tag` to the end, on this thread.
fn run(store: &Tested, tag: &str) -> Reply {
    let rule = rule();
    let checks = [Check::new("k", &rule)];
    let request = Request::new(tag, &checks, Op::Acquire(1));
    block_on(store.execute(&request)).expect("the policy decides")
}

/// A request for one permit under `tag`, on another thread.
fn spawn(store: &Tested, tag: &'static str) -> thread::JoinHandle<Reply> {
    let store = store.clone();
    thread::spawn(move || run(&store, tag))
}

/// How long a request made now is told to wait (the breaker's remaining open time).
fn retry_after(store: &Tested) -> Option<Duration> {
    match run(store, "fail") {
        Reply::Decision(Err(denied)) => denied.retry_after(),
        other => panic!("admitted while open: {other:?}"),
    }
}

/// Three failures race against a threshold of two: the breaker opens once, and the
/// failure that comes after it opened neither opens it again nor moves its end.
#[test]
fn failures_crossing_the_threshold_open_the_breaker_once() {
    loom::model(|| {
        let (store, fake, _) = resilient(2);
        let racers = [spawn(&store, "fail"), spawn(&store, "fail")];
        assert!(!run(&store, "fail").is_admitted());
        for racer in racers {
            assert!(!racer.join().unwrap().is_admitted());
        }
        let stats = store.stats();
        assert_eq!(stats.state, BreakerState::Open);
        assert_eq!(stats.opened, 1);
        assert_eq!(stats.calls as usize, fake.calls());
        assert!(stats.calls >= 2, "{stats:?}");
        assert_eq!(stats.calls + stats.short_circuited, 3);
        assert_eq!(retry_after(&store), Some(COOL_DOWN));
        assert_eq!(fake.calls() as u64, stats.calls, "open: nothing more sent");
    });
}

/// After the cool-down, two requests race to probe a store that is still down:
/// exactly one reaches it, and the breaker opens again for a whole cool-down.
#[test]
fn only_one_probe_is_admitted_after_the_cool_down() {
    loom::model(|| {
        let (store, fake, clock) = resilient(1);
        run(&store, "fail");
        clock.advance(COOL_DOWN);
        let racer = spawn(&store, "fail");
        assert!(!run(&store, "fail").is_admitted());
        assert!(!racer.join().unwrap().is_admitted());
        assert_eq!(fake.calls(), 2, "the trip and one probe");
        let stats = store.stats();
        assert_eq!((stats.state, stats.opened), (BreakerState::Open, 2));
        assert_eq!(stats.short_circuited, 1);
        assert_eq!(retry_after(&store), Some(COOL_DOWN));
    });
}

/// A call sent before the breaker opened fails while the probe is answered on
/// another thread: whatever the order, the probe's answer closes the breaker, the
/// late failure opens nothing, and calls go to the store again.
#[test]
fn a_late_failure_does_not_undo_the_probes_answer() {
    loom::model(|| {
        let (store, fake, clock) = resilient(2);
        let rule = rule();
        let checks = [Check::new("k", &rule)];
        let late_request = Request::new("late", &checks, Op::Acquire(1));
        let mut late = store.execute(&late_request);
        assert!(poll_once(late.as_mut()).is_pending());
        run(&store, "fail");
        run(&store, "fail");
        assert_eq!(store.stats().opened, 1);
        clock.advance(COOL_DOWN);

        let probe = spawn(&store, "ok");
        let Poll::Ready(Ok(outcome)) = poll_once(late.as_mut()) else {
            panic!("the late call did not end")
        };
        assert!(!outcome.is_admitted(), "failed closed");
        assert!(
            probe.join().unwrap().is_admitted(),
            "the probe was answered"
        );

        let stats = store.stats();
        assert_eq!((stats.state, stats.opened), (BreakerState::Closed, 1));
        assert_eq!(stats.failures, 3);
        assert!(run(&store, "ok").is_admitted());
        assert_eq!(fake.answered.load(Ordering::SeqCst), 2, "sent to the store");
    });
}

/// The probe is dropped on one thread while another request arrives: the breaker is
/// never left half open with no probe out, and the next request probes at once.
#[test]
fn a_dropped_probe_returns_the_breaker_to_open() {
    loom::model(|| {
        let (store, fake, clock) = resilient(1);
        run(&store, "fail");
        clock.advance(COOL_DOWN);

        let dropper = {
            let store = store.clone();
            thread::spawn(move || {
                let rule = rule();
                let checks = [Check::new("k", &rule)];
                let request = Request::new("hang", &checks, Op::Acquire(1));
                // Pending if it was let through; dropped either way.
                let _ = poll_once(store.execute(&request));
            })
        };
        let other = run(&store, "ok");
        dropper.join().unwrap();

        let state = store.stats().state;
        assert_ne!(state, BreakerState::HalfOpen, "no probe is out");
        assert_eq!(other.is_admitted(), state == BreakerState::Closed);
        assert_eq!(store.stats().opened, 1, "a dropped probe opens nothing");
        assert!(run(&store, "ok").is_admitted(), "probed, or closed already");
        assert_eq!(store.stats().state, BreakerState::Closed);
        assert!(fake.hung.load(Ordering::SeqCst) <= 1);
    });
}
