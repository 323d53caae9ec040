//! Waiting on a remote store: a `SharedLimiter` over a store that never decides at
//! once, so that every booking is a round trip whose answer another thread decides and
//! delivers. The first waiter's booking is then in flight while refunds,
//! cancellations and the clock move around it.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use loom::future::block_on;
use loom::sync::Mutex;
use loom::thread::{self, JoinHandle};
use loom_tests::poll_once;
use tollgate::algorithm::{Concurrency, Gcra, Leased};
use tollgate::store::{
    Check, MemoryStore, Op, Reply, Request, Rule, SharedLimiter, Store, StoreError,
};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{KeyedConfig, Quota};

/// A `MemoryStore` behind a network: `try_execute_now` answers `None` (the default),
/// and `execute` of a booking (`Acquire`, `Reserve`) sends it to a thread of its own,
/// the server's side of the round trip, which decides it at a time of its own and
/// wakes the caller. A refund or a peek is answered on its future's first poll.
/// (std's `Arc`, as in the crate: see its `src/sync.rs`; what it points to is loom's.)
#[derive(Clone)]
struct Remote(Arc<Server>);

struct Server {
    memory: MemoryStore<ManualClock>,
    flights: Mutex<Flights>,
}

#[derive(Default)]
struct Flights {
    /// Every booking sent, in order: the round trips made.
    sent: Vec<Op>,
    /// The server's side of each round trip not yet landed.
    landing: Vec<JoinHandle<()>>,
}

/// A booking in flight, owned: the server decides it whether or not its caller still
/// waits, as Redis runs a command whose client has given up on it.
struct Call {
    tag: String,
    checks: Vec<(String, Rule)>,
    op: Op,
    at: Option<Duration>,
    reply: Mutex<Landing>,
}

#[derive(Default)]
struct Landing {
    answer: Option<Result<Reply, StoreError>>,
    waker: Option<Waker>,
}

impl Remote {
    fn new(clock: ManualClock) -> Remote {
        Remote(Arc::new(Server {
            memory: MemoryStore::with_clock(KeyedConfig::new(4), "loom", clock).unwrap(),
            flights: Mutex::new(Flights::default()),
        }))
    }

    /// Sends `request`: a thread decides it on the store and delivers the answer.
    fn send(&self, request: &Request<'_>) -> Arc<Call> {
        let call = Arc::new(Call {
            tag: request.tag.to_owned(),
            checks: request
                .checks
                .iter()
                .map(|c| (c.key.to_owned(), c.rule.clone()))
                .collect(),
            op: request.op,
            at: request.at,
            reply: Mutex::new(Landing::default()),
        });
        let server = Arc::clone(&self.0);
        let flight = {
            let call = Arc::clone(&call);
            thread::spawn(move || server.deliver(&call))
        };
        let mut flights = self.0.flights.lock().unwrap();
        flights.sent.push(request.op);
        flights.landing.push(flight);
        drop(flights);
        call
    }

    /// Waits until every booking sent has been decided and delivered.
    fn land_all(&self) {
        loop {
            let flight = self.0.flights.lock().unwrap().landing.pop();
            match flight {
                Some(flight) => flight.join().unwrap(),
                None => return,
            }
        }
    }

    /// The bookings sent so far.
    fn sent(&self) -> Vec<Op> {
        self.0.flights.lock().unwrap().sent.clone()
    }

    /// `op` on `key` under `limiter`'s rules, decided on the spot by the store behind
    /// the network: for a model's setup and its final checks.
    fn decide_now<C: Clock>(&self, limiter: &SharedLimiter<Remote, C>, key: &str, op: Op) -> Reply {
        let checks: Vec<Check<'_>> = limiter.rules().map(|(n, r)| Check::new(n, r)).collect();
        self.0
            .memory
            .execute_now(&Request::new(key, &checks, op))
            .unwrap()
    }
}

impl Server {
    /// Decides `call` on the store, and hands its caller the answer.
    fn deliver(&self, call: &Call) {
        let checks: Vec<Check<'_>> = call
            .checks
            .iter()
            .map(|(key, rule)| Check::new(key, rule))
            .collect();
        let mut request = Request::new(&call.tag, &checks, call.op);
        request.at = call.at;
        let answer = self.memory.execute_now(&request);
        let waker = {
            let mut reply = call.reply.lock().unwrap();
            reply.answer = Some(answer);
            reply.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The answer to one booking: ready once the server has delivered it.
struct Delivery(Arc<Call>);

impl Future for Delivery {
    type Output = Result<Reply, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut reply = self.0.reply.lock().unwrap();
        match reply.answer.take() {
            Some(answer) => Poll::Ready(answer),
            None => {
                reply.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[async_trait]
impl Store for Remote {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        if let Op::Acquire(_) | Op::Reserve { .. } = request.op {
            let call = self.send(request);
            return Delivery(call).await;
        }
        // A refund or a peek takes the async path too, but is answered on its first
        // poll: the races of interest are a booking's.
        self.0.memory.execute_now(request)
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        self.0.memory.check_rule(rule)
    }
}

type Limiter = SharedLimiter<Remote, ManualClock>;

/// `rule` over a fresh remote store, on a manual clock at 0, with its one permit (the
/// rules below grant one at a time) already taken if `spent`.
fn limiter(rule: impl Into<Rule>, spent: bool) -> (Arc<Limiter>, Remote, ManualClock) {
    let clock = ManualClock::new();
    let remote = Remote::new(clock.clone());
    let limiter = Arc::new(SharedLimiter::with_clock(remote.clone(), rule, clock.clone()).unwrap());
    if spent {
        assert!(remote
            .decide_now(&limiter, "k", Op::Acquire(1))
            .is_admitted());
    }
    (limiter, remote, clock)
}

/// One permit, held 60 s once taken: "taken" is visible in the store.
fn one_permit() -> Leased {
    Leased::new(Concurrency::new(1).unwrap(), Duration::from_secs(60)).unwrap()
}

/// One permit a second: booked ahead, a reservation waits for its turn.
fn one_a_second() -> Gcra {
    Gcra::new(Quota::per_second(1).unwrap())
}

/// A waiter cancelled (its future dropped) after the store decided its booking and
/// before it read the reply leaves no permit taken: the queue hands the booking to
/// the gate (`Gate::abandon`), which gives back what the store booked, racing the
/// clock and nothing else.
///
/// On a tokio runtime a booking still in flight when its waiter leaves is finished
/// in the background and refunded the same way
/// (`tests/store_limiter.rs`, `a_waiter_cancelled_mid_round_trip_leaves_nothing_taken`);
/// a loom model has no runtime to finish it on, so here the reply has landed.
#[test]
fn a_waiter_cancelled_mid_round_trip_leaves_no_permit_taken() {
    loom::model(|| {
        let (limiter, remote, _clock) = limiter(one_permit(), false);
        let mut waiter = Box::pin(limiter.acquire("k", 1));
        // One poll takes the turn and sends the booking; the server answers whenever.
        if poll_once(waiter.as_mut()).is_ready() {
            // Granted within that poll: the waiter holds the permit, nothing to cancel.
            return;
        }
        remote.land_all();
        drop(waiter);
        assert_eq!(limiter.waiters(), 0);
        assert!(
            remote.decide_now(&limiter, "k", Op::Peek(1)).is_admitted(),
            "the permit booked by the cancelled round trip is still taken: {:?}",
            remote.sent()
        );
    });
}

/// The only permit is given back while the waiter's booking is in flight: the waiter
/// is granted exactly once, whether the store decides its booking before the refund
/// (denied: the refund's wake-up makes it ask again, rather than leave it to a
/// release poll that never comes) or after (granted), and afterwards it holds the
/// one permit, and nothing more is booked.
#[test]
fn a_refund_racing_a_booking_in_flight_grants_the_waiter_once() {
    loom::model(|| {
        let (limiter, remote, _clock) = limiter(one_permit(), true);
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || block_on(limiter.refund("k", 1)).unwrap())
        };
        // A lost wake-up leaves this parked, which loom reports as a deadlock.
        block_on(limiter.acquire("k", 1)).expect("granted");
        refunder.join().unwrap();
        remote.land_all();
        assert_eq!(limiter.waiters(), 0);
        // Granted once: the one permit is taken, by the waiter.
        assert!(!remote.decide_now(&limiter, "k", Op::Peek(1)).is_admitted());
        let sent = remote.sent();
        // Once, or twice when the first was denied before the refund.
        assert!(
            matches!(
                sent[..],
                [Op::Acquire(1)] | [Op::Acquire(1), Op::Acquire(1)]
            ),
            "{sent:?}"
        );
    });
}

/// With a rule that books ahead (GCRA, one permit a second, spent at 0), the first
/// waiter books in exactly one round trip, a reservation (no polling), and the alarm
/// it then sets is never lost, while another thread moves the clock 1 s as the
/// booking is in flight: run as under a runtime with paused time, which moves the
/// clock on to the next alarm when the waiter is idle, it is granted, and not before
/// the 1 s it booked.
#[test]
fn a_booking_ahead_is_one_round_trip_and_its_alarm_grants_it() {
    loom::model(|| {
        let (limiter, remote, clock) = limiter(one_a_second(), true);
        let ticker = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(Duration::from_secs(1)))
        };
        let (granted, granted_at) = on_paused_time(&clock, limiter.acquire("k", 1));
        granted.expect("granted");
        assert!(
            granted_at >= Nanos::new(1_000_000_000),
            "early: {granted_at:?}"
        );
        ticker.join().unwrap();
        remote.land_all();
        assert_eq!(limiter.waiters(), 0);
        let sent = remote.sent();
        assert!(
            matches!(sent[..], [Op::Reserve { n: 1, .. }]),
            "one round trip: {sent:?}"
        );
    });
}

/// Runs `future` to its end as under a runtime with paused time: whenever it is
/// pending and an alarm is set, the clock moves on to that alarm. Returns the output
/// and the time on the clock when it was ready.
fn on_paused_time<F: Future>(clock: &ManualClock, future: F) -> (F::Output, Nanos) {
    let mut future = std::pin::pin!(future);
    block_on(std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready((output, clock.now()));
        }
        if let Some(at) = clock.next_alarm() {
            clock.set(at);
            // Polled again at once: the alarm may have granted it.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }))
}
