//! The [`Resilient`] store over a fake store that answers, fails or hangs on demand,
//! on a manual clock.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;

use super::builder::DEFAULT_DEADLINE;
use super::*;
use crate::algorithm::{FixedWindow, Gcra};
use crate::decision::{Denied, Reservation};
use crate::error::ConfigError;
use crate::quota::Quota;
use crate::store::{Check, MemoryStore, Op, Reply, Request, Rule, Store, StoreError};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::table::KeyedConfig;
use crate::time::{ManualClock, Nanos, Sleep};

/// What the fake store does with the next calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Decide in memory.
    Reply,
    /// Fail with a connection error at once.
    Fail,
    /// Never answer.
    Hang,
    /// Reply after this long on the clock.
    Slow(Duration),
    /// Fail with a permanent error.
    TooLong,
}

struct Fake {
    memory: MemoryStore<ManualClock>,
    clock: ManualClock,
    mode: Mutex<Mode>,
    calls: AtomicU64,
}

impl Fake {
    fn new(clock: &ManualClock) -> Arc<Fake> {
        Arc::new(Fake {
            memory: MemoryStore::with_clock(KeyedConfig::new(100), "fake", clock.clone()).unwrap(),
            clock: clock.clone(),
            mode: Mutex::new(Mode::Reply),
            calls: AtomicU64::new(0),
        })
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock() = mode;
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Store for Fake {
    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        if *self.mode.lock() == Mode::Reply {
            self.calls.fetch_add(1, Ordering::SeqCst);
            return self.memory.execute_each_now(request);
        }
        self.execute(request).await.map(Answers::new)
    }

    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mode = *self.mode.lock();
        match mode {
            Mode::Reply => self.memory.execute_now(request),
            Mode::Fail => Err(StoreError::Connection("refused".into())),
            Mode::Hang => std::future::pending().await,
            Mode::Slow(d) => {
                Sleep::new(self.clock.clone(), d).await;
                self.memory.execute_now(request)
            }
            Mode::TooLong => Err(StoreError::KeyTooLong {
                len: 2000,
                max: 1024,
            }),
        }
    }
}

const DEADLINE: Duration = Duration::from_millis(5);
const COOL_DOWN: Duration = Duration::from_secs(1);

fn resilient(policy: FailurePolicy) -> (Resilient<Arc<Fake>, ManualClock>, Arc<Fake>, ManualClock) {
    let clock = ManualClock::starting_at(Nanos::new(1_700_000_000_000_000_000));
    let fake = Fake::new(&clock);
    let store = Resilient::builder(fake.clone(), policy)
        .deadline(DEADLINE)
        .failure_threshold(3)
        .cool_down(COOL_DOWN)
        .clock(clock.clone())
        .build()
        .unwrap();
    (store, fake, clock)
}

fn gcra(burst: u64) -> Rule {
    Gcra::new(Quota::per_hour(burst).unwrap()).into()
}

/// Polls once: every fake answer that does not wait is ready at the first poll.
fn poll<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    let waker = futures::task::noop_waker();
    future.poll(&mut Context::from_waker(&waker))
}

fn now<S: Store>(store: &S, rule: &Rule, op: Op) -> Result<Reply, StoreError> {
    let checks = [Check::new("k", rule)];
    let request = Request::new("user", &checks, op);
    let mut future = store.execute(&request);
    match poll(future.as_mut()) {
        Poll::Ready(result) => result,
        Poll::Pending => panic!("{op:?} did not answer at once"),
    }
}

fn acquire<S: Store>(store: &S, rule: &Rule, n: u64) -> Reply {
    now(store, rule, Op::Acquire(n)).unwrap()
}

/// Fails `k` calls, opening the breaker of threshold `k`.
fn trip(store: &Resilient<Arc<Fake>, ManualClock>, fake: &Fake, k: u64) {
    fake.set(Mode::Fail);
    let rule = gcra(10);
    let checks = [Check::new("trip", &rule)];
    let request = Request::new("trip", &checks, Op::Acquire(1));
    for _ in 0..k {
        let mut future = store.execute(&request);
        assert!(poll(future.as_mut()).is_ready());
    }
    assert_eq!(store.stats().state, BreakerState::Open);
}

#[test]
fn answers_pass_through_and_are_counted() {
    let (store, fake, _) = resilient(FailurePolicy::Closed);
    let rule = gcra(2);
    assert!(acquire(&store, &rule, 2).is_admitted());
    assert!(!acquire(&store, &rule, 1).is_admitted());
    assert_eq!(fake.calls(), 2);
    let stats = store.stats();
    assert_eq!((stats.calls, stats.failures, stats.fallbacks), (2, 0, 0));
    assert_eq!(stats.state, BreakerState::Closed);
}

#[test]
fn the_deadline_fires_on_a_hanging_store() {
    let (store, fake, clock) = resilient(FailurePolicy::Closed);
    fake.set(Mode::Hang);
    let rule = gcra(10);
    let checks = [Check::new("k", &rule)];
    let request = Request::new("user", &checks, Op::Acquire(1));
    let mut future = store.execute(&request);
    assert!(poll(future.as_mut()).is_pending());
    clock.advance(DEADLINE - Duration::from_nanos(1));
    assert!(poll(future.as_mut()).is_pending());
    clock.advance(Duration::from_nanos(1));
    let Poll::Ready(Ok(Reply::Decision(Err(Denied::Limited(_))))) = poll(future.as_mut()) else {
        panic!("no denial at the deadline")
    };
    let stats = store.stats();
    assert_eq!((stats.calls, stats.failures, stats.timeouts), (1, 1, 1));
    assert_eq!(stats.state, BreakerState::Closed, "one failure of three");
}

#[test]
fn a_slow_answer_within_the_deadline_counts() {
    let (store, fake, clock) = resilient(FailurePolicy::Closed);
    fake.set(Mode::Slow(DEADLINE / 2));
    let rule = gcra(10);
    let checks = [Check::new("k", &rule)];
    let request = Request::new("user", &checks, Op::Acquire(1));
    let mut future = store.execute(&request);
    assert!(poll(future.as_mut()).is_pending());
    clock.advance(DEADLINE / 2);
    let Poll::Ready(Ok(outcome)) = poll(future.as_mut()) else {
        panic!("no answer")
    };
    assert!(outcome.is_admitted());
    assert_eq!(store.stats().timeouts, 0);
}

#[test]
fn the_breaker_opens_after_k_failures_and_short_circuits() {
    let (store, fake, _) = resilient(FailurePolicy::Closed);
    fake.set(Mode::Fail);
    let rule = gcra(10);
    for i in 0..3 {
        assert_eq!(store.stats().state, BreakerState::Closed, "after {i}");
        assert!(!acquire(&store, &rule, 1).is_admitted());
    }
    assert_eq!(store.stats().state, BreakerState::Open);
    for _ in 0..100 {
        assert!(!acquire(&store, &rule, 1).is_admitted());
    }
    assert_eq!(fake.calls(), 3, "an open breaker calls nothing");
    let stats = store.stats();
    assert_eq!(
        (
            stats.calls,
            stats.failures,
            stats.short_circuited,
            stats.fallbacks
        ),
        (3, 3, 100, 103)
    );
}

#[test]
fn an_answer_resets_the_count_of_failures() {
    let (store, fake, _) = resilient(FailurePolicy::Closed);
    let rule = gcra(100);
    for _ in 0..5 {
        fake.set(Mode::Fail);
        acquire(&store, &rule, 1);
        acquire(&store, &rule, 1);
        fake.set(Mode::Reply);
        assert!(acquire(&store, &rule, 1).is_admitted());
    }
    assert_eq!(store.stats().state, BreakerState::Closed);
}

#[test]
fn one_probe_after_the_cool_down_and_recovery() {
    let (store, fake, clock) = resilient(FailurePolicy::Closed);
    trip(&store, &fake, 3);
    clock.advance(COOL_DOWN - Duration::from_nanos(1));
    let rule = gcra(10);
    assert!(!acquire(&store, &rule, 1).is_admitted());
    assert_eq!(fake.calls(), 3);

    // The probe hangs: meanwhile the others are short-circuited.
    clock.advance(Duration::from_nanos(1));
    fake.set(Mode::Hang);
    let checks = [Check::new("k", &rule)];
    let request = Request::new("user", &checks, Op::Acquire(1));
    let mut probe = store.execute(&request);
    assert!(poll(probe.as_mut()).is_pending());
    assert_eq!(store.stats().state, BreakerState::HalfOpen);
    let Reply::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
        panic!("admitted while half open")
    };
    assert_eq!(denied.retry_after(), Some(DEADLINE), "the probe's deadline");
    assert_eq!(fake.calls(), 4, "one probe");

    // It times out: open again, for a whole cool-down.
    clock.advance(DEADLINE);
    assert!(poll(probe.as_mut()).is_ready());
    drop(probe);
    assert_eq!(store.stats().state, BreakerState::Open);
    assert_eq!(store.stats().opened, 2, "tripped, then the probe failed");
    let Reply::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
        panic!("admitted while open")
    };
    assert_eq!(denied.retry_after(), Some(COOL_DOWN));

    // The store is back: the next probe closes the breaker.
    fake.set(Mode::Reply);
    clock.advance(COOL_DOWN);
    assert!(acquire(&store, &rule, 1).is_admitted());
    assert_eq!(store.stats().state, BreakerState::Closed);
    assert!(acquire(&store, &rule, 1).is_admitted());
    assert_eq!(fake.calls(), 6, "calls go to the store again");
}

#[test]
fn a_dropped_probe_lets_the_next_request_probe() {
    let (store, fake, clock) = resilient(FailurePolicy::Closed);
    trip(&store, &fake, 3);
    clock.advance(COOL_DOWN);
    fake.set(Mode::Hang);
    let rule = gcra(10);
    let checks = [Check::new("k", &rule)];
    let request = Request::new("user", &checks, Op::Acquire(1));
    let mut probe = store.execute(&request);
    assert!(poll(probe.as_mut()).is_pending());
    drop(probe);
    assert_eq!(store.stats().state, BreakerState::Open);
    fake.set(Mode::Reply);
    assert!(acquire(&store, &rule, 1).is_admitted(), "probed again");
    assert_eq!(store.stats().state, BreakerState::Closed);
}

#[test]
fn failures_of_calls_sent_before_the_breaker_opened_do_not_extend_it() {
    let (store, fake, clock) = resilient(FailurePolicy::Closed);
    fake.set(Mode::Hang);
    let rule = gcra(10);
    let checks = [Check::new("k", &rule)];
    let request = Request::new("user", &checks, Op::Acquire(1));
    let mut late = store.execute(&request);
    assert!(poll(late.as_mut()).is_pending());
    trip(&store, &fake, 3);
    clock.advance(DEADLINE);
    assert!(poll(late.as_mut()).is_ready());
    let Reply::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
        panic!("admitted while open")
    };
    assert_eq!(denied.retry_after(), Some(COOL_DOWN - DEADLINE));
    assert_eq!(store.stats().opened, 1);
}

#[test]
fn open_admits_and_reserves_but_refunds_fail() {
    let (store, fake, _) = resilient(FailurePolicy::Open);
    trip(&store, &fake, 3);
    let rule = gcra(10);
    let Reply::Decision(Ok(admitted)) = acquire(&store, &rule, 4) else {
        panic!("denied while open")
    };
    assert_eq!(
        (
            admitted.limit(),
            admitted.remaining(),
            admitted.reset_after()
        ),
        (10, 0, Duration::ZERO)
    );
    assert!(now(&store, &rule, Op::Peek(10)).unwrap().is_admitted());
    let reserve = Op::Reserve {
        n: 3,
        max_wait: Duration::ZERO,
    };
    assert_eq!(
        now(&store, &rule, reserve).unwrap(),
        Reply::Reservation(Ok(Reservation::new(3, Duration::ZERO)))
    );
    assert!(matches!(
        now(&store, &rule, Op::Refund(1)),
        Err(StoreError::CircuitOpen)
    ));
    let Reply::Decision(Err(Denied::Insufficient(_))) = acquire(&store, &rule, 11) else {
        panic!("more than the capacity was admitted")
    };
    assert_eq!(
        store.stats().fallbacks,
        3 + 3,
        "the failed calls and three short circuits"
    );
}

#[test]
fn closed_denies_with_the_breakers_time_and_refunds_fail() {
    let (store, fake, clock) = resilient(FailurePolicy::Closed);
    let rule = gcra(10);
    fake.set(Mode::Fail);
    // Before the breaker opens, retry at once.
    let Reply::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
        panic!("admitted")
    };
    assert_eq!(denied.retry_after(), Some(Duration::ZERO));
    assert!(matches!(
        now(&store, &rule, Op::Refund(1)),
        Err(StoreError::Connection(_))
    ));
    trip(&store, &fake, 1);
    clock.advance(Duration::from_millis(400));
    let Reply::Decision(Err(Denied::Limited(limited))) = acquire(&store, &rule, 2) else {
        panic!("admitted")
    };
    assert_eq!(limited.retry_after(), Some(Duration::from_millis(600)));
    assert_eq!((limited.limit(), limited.remaining()), (10, 0));
    let reserve = Op::Reserve {
        n: 1,
        max_wait: Duration::from_secs(10),
    };
    assert!(matches!(
        now(&store, &rule, reserve).unwrap(),
        Reply::Reservation(Err(Denied::Limited(_)))
    ));
    assert!(acquire(&store, &rule, 0).is_admitted(), "zero permits");
    assert!(matches!(
        now(&store, &rule, Op::Refund(1)),
        Err(StoreError::CircuitOpen)
    ));
}

#[test]
fn fallback_admits_the_local_share() {
    let (store, fake, _) = resilient(FailurePolicy::Fallback { nodes: 4 });
    trip(&store, &fake, 3);
    let rule = Rule::from(FixedWindow::new(10, Duration::from_secs(3600)).unwrap());
    let admitted = (0..10)
        .filter(|_| acquire(&store, &rule, 1).is_admitted())
        .count();
    assert_eq!(admitted, 2, "10 over 4 nodes");
    let Reply::Decision(Err(Denied::Limited(limited))) = acquire(&store, &rule, 1) else {
        panic!("admitted past the share")
    };
    assert_eq!(limited.limit(), 2);
    assert_eq!(now(&store, &rule, Op::Refund(1)).unwrap(), Reply::Refunded);
    assert!(now(&store, &rule, Op::Peek(1)).unwrap().is_admitted());
    let reserve = Op::Reserve {
        n: 1,
        max_wait: Duration::ZERO,
    };
    assert!(now(&store, &rule, reserve).unwrap().is_admitted());
    assert!(!acquire(&store, &rule, 1).is_admitted());
    // More than the share but within the rule: denied for now, not for ever.
    let Reply::Decision(Err(denied)) = acquire(&store, &rule, 10) else {
        panic!("admitted")
    };
    assert_eq!(denied.retry_after(), Some(COOL_DOWN), "{denied:?}");
}

#[test]
fn permanent_errors_pass_through_under_every_policy() {
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Fallback { nodes: 2 },
    ] {
        let (store, fake, _) = resilient(policy);
        fake.set(Mode::TooLong);
        for _ in 0..10 {
            assert!(matches!(
                now(&store, &gcra(10), Op::Acquire(1)),
                Err(StoreError::KeyTooLong { .. })
            ));
        }
        let stats = store.stats();
        assert_eq!(stats.state, BreakerState::Closed, "{policy:?}");
        assert_eq!((stats.calls, stats.failures, stats.fallbacks), (10, 0, 0));
        let no_rules = Request::new("user", &[], Op::Acquire(1));
        let mut future = store.execute(&no_rules);
        assert!(matches!(
            poll(future.as_mut()),
            Poll::Ready(Err(StoreError::Config(_)))
        ));
    }
}

#[test]
fn a_rule_without_a_share_is_refused_up_front() {
    let (store, _, _) = resilient(FailurePolicy::Fallback { nodes: 4 });
    assert!(matches!(
        store.check_rule(&gcra(3)),
        Err(StoreError::Config(ConfigError::OutOfRange {
            parameter: "nodes",
            ..
        }))
    ));
    assert!(store.check_rule(&gcra(4)).is_ok());
    let (open, _, _) = resilient(FailurePolicy::Open);
    assert!(open.check_rule(&gcra(3)).is_ok());
}

#[test]
fn a_share_of_nothing_is_an_error_when_it_is_needed() {
    let (store, fake, _) = resilient(FailurePolicy::Fallback { nodes: 4 });
    trip(&store, &fake, 3);
    assert!(matches!(
        now(&store, &gcra(3), Op::Acquire(1)),
        Err(StoreError::Config(_))
    ));
}

#[test]
fn settings_are_checked() {
    let clock = ManualClock::new();
    let build = |b: ResilientBuilder<Arc<Fake>>| b.build().map(|_| ()).unwrap_err();
    let fake = Fake::new(&clock);
    let builder = || Resilient::builder(fake.clone(), FailurePolicy::Open);
    assert_eq!(
        build(builder().deadline(Duration::ZERO)),
        ConfigError::Zero {
            parameter: "deadline"
        }
    );
    assert_eq!(
        build(builder().failure_threshold(0)),
        ConfigError::Zero {
            parameter: "failure_threshold"
        }
    );
    assert_eq!(
        build(builder().cool_down(Duration::ZERO)),
        ConfigError::Zero {
            parameter: "cool_down"
        }
    );
    assert_eq!(
        build(Resilient::builder(
            fake.clone(),
            FailurePolicy::Fallback { nodes: 0 }
        )),
        ConfigError::Zero { parameter: "nodes" }
    );
    assert_eq!(
        build(
            Resilient::builder(fake.clone(), FailurePolicy::Fallback { nodes: 2 })
                .fallback_keys(KeyedConfig::new(0))
        ),
        ConfigError::Zero {
            parameter: "max_keys"
        }
    );
    let store = Resilient::new(fake, FailurePolicy::Closed).unwrap();
    assert_eq!(store.deadline(), DEFAULT_DEADLINE);
    assert_eq!(store.policy(), FailurePolicy::Closed);
}

#[test]
fn each_checks_answers_pass_through_and_a_policys_decision_tells_none() {
    let (store, fake, _) = resilient(FailurePolicy::Fallback { nodes: 2 });
    let rule = gcra(10);
    let each = |checks: &[Check<'_>]| {
        let request = Request::new("user", checks, Op::Acquire(1));
        let mut future = store.execute_each(&request);
        match poll(future.as_mut()) {
            Poll::Ready(answers) => answers.unwrap(),
            Poll::Pending => panic!("no answer at once"),
        }
    };
    let remaining = |reply: &Reply| reply.into_decision().unwrap().unwrap().remaining();
    let checks = [
        Check::new("a", &rule).with_permits(2),
        Check::new("b", &rule).with_permits(0),
    ];
    let answers = each(&checks);
    let from_store: Vec<u64> = answers.checks().unwrap().iter().map(remaining).collect();
    assert_eq!(from_store, [8, 10]);
    assert_eq!(fake.calls(), 1);
    trip(&store, &fake, 3);
    let answers = each(&checks);
    assert!(answers.reply().is_admitted(), "within the share of 5");
    assert_eq!(answers.checks(), None);
    // Denied by the precheck while the breaker is open: its answer alone.
    let big = [
        Check::new("a", &rule).with_permits(11),
        Check::new("b", &rule),
    ];
    let answers = each(&big);
    assert!(
        answers
            .reply()
            .into_decision()
            .unwrap()
            .unwrap_err()
            .is_never()
    );
    assert_eq!(answers.checks(), None);
}
