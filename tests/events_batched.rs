//! Events of a `BatchedLimiter`, against a real `redis-server` on a `ManualClock`:
//! every `check`, `try_acquire` and wait, keyed by its tag, with the permits asked;
//! one hub shared by clones and kept once attached. Skipped, with a note, without
//! `redis-server` on `PATH`.

#![cfg(feature = "redis")]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tollgate::AcquireError;
use tollgate::algorithm::FixedWindow;
use tollgate::observe::{DenyReason, EventKind, Events};
use tollgate::store::BatchedLimiter;
use tollgate::time::{ManualClock, Nanos};

use common::events::{Log, Seen, denied, hub, limited};
use common::redis::{RedisServer, require_redis};

type Node = BatchedLimiter<MultiplexedConnection, ManualClock>;

/// 2023-11-14 22:13:20 UTC, on a whole second: fixed windows start there.
const START_SECS: u64 = 1_700_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn clock() -> ManualClock {
    ManualClock::starting_at(Nanos::new(START_SECS * 1_000_000_000))
}

/// A node admitting `limit` a second, syncing every 100 ms.
async fn node(server: &RedisServer, clock: &ManualClock, limit: u64) -> Node {
    let client = redis::Client::open(server.url()).unwrap();
    let connection = client.get_multiplexed_async_connection().await.unwrap();
    let rule = FixedWindow::new(limit, Duration::from_secs(1)).unwrap();
    BatchedLimiter::with_clock(connection, "e", rule, ms(100), clock.clone()).unwrap()
}

/// Polls once, on a waker that does nothing.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let waker = futures::task::noop_waker();
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

#[tokio::test]
async fn check_and_try_acquire_report_admitted_and_denied_by_tag() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let clock = clock();
    let log = Log::default();
    let limiter = node(&server, &clock, 2).await.with_events(hub("api", &log));
    assert!(limiter.check("k", 2).await.unwrap().is_ok()); // syncs first
    let now = limiter.try_acquire("k", 1).expect("no sync due").unwrap();
    assert!(now.is_err());
    assert!(limiter.check("k", 3).await.unwrap().is_err());
    // Not counted here yet: `try_acquire` cannot decide, and reports nothing.
    assert!(limiter.try_acquire("other", 1).is_none());
    let seen = |permits, kind| Seen {
        source: "api".to_owned(),
        key: Some("k".to_owned()),
        permits,
        kind,
    };
    assert_eq!(
        log.all(),
        [
            seen(2, EventKind::Admitted),
            seen(1, limited(ms(1_000))),
            seen(3, denied(DenyReason::Insufficient)),
        ]
    );
}

#[tokio::test]
async fn waits_report_admitted_waited_and_timed_out() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let clock = clock();
    let log = Log::default();
    let limiter = node(&server, &clock, 2).await.with_events(hub("api", &log));
    assert!(limiter.check("k", 1).await.unwrap().is_ok()); // syncs first
    // Decided between syncs, without a round trip: admitted at once.
    let mut at_once = limiter.acquire("k", 1);
    assert!(matches!(
        poll_once(&mut at_once),
        Poll::Ready(Ok(Duration::ZERO))
    ));
    // The window is spent: it ends after this timeout, known at once.
    assert!(matches!(
        limiter.acquire_timeout("k", 1, ms(500)).await,
        Err(AcquireError::TimedOut)
    ));
    // This one waits for the next window.
    let mut waiting = limiter.acquire("k", 1);
    assert!(poll_once(&mut waiting).is_pending());
    clock.advance(ms(1_000)); // the next window: the queue's alarm rings
    assert_eq!(waiting.await.unwrap(), ms(1_000));
    let kinds = log.kinds();
    assert_eq!(
        kinds,
        [
            EventKind::Admitted,
            EventKind::Admitted,
            denied(DenyReason::TimedOut),
            EventKind::Waited { wait: ms(1_000) },
        ]
    );
    assert!(log.all().iter().all(|s| s.key.as_deref() == Some("k")));
}

#[tokio::test]
async fn clones_share_the_hub_and_the_first_stays() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let clock = clock();
    let limiter = node(&server, &clock, 10).await;
    let before = limiter.clone();
    let (first, second) = (Log::default(), Log::default());
    let limiter = limiter.with_events(hub("first", &first));
    let after = limiter.clone().with_events(hub("second", &second));
    assert!(before.check("a", 1).await.unwrap().is_ok());
    assert!(after.check("b", 1).await.unwrap().is_ok());
    assert!(limiter.check("c", 1).await.unwrap().is_ok());
    for clone in [&before, &limiter, &after] {
        assert_eq!(clone.events().map(Events::name), Some("first"));
    }
    let keys: Vec<Option<String>> = first.all().into_iter().map(|s| s.key).collect();
    assert_eq!(keys, [Some("a".into()), Some("b".into()), Some("c".into())]);
    assert!(second.kinds().is_empty());
}

#[tokio::test]
async fn a_closed_limiter_reports_its_denials_and_peeks_report_nothing() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let clock = clock();
    let log = Log::default();
    let limiter = node(&server, &clock, 2).await.with_events(hub("api", &log));
    assert!(limiter.peek("k", 1).await.unwrap().is_ok());
    limiter.close();
    assert!(limiter.check("k", 1).await.unwrap().is_err());
    assert!(matches!(
        limiter.acquire("k", 1).await,
        Err(AcquireError::Closed)
    ));
    assert_eq!(
        log.kinds(),
        [denied(DenyReason::Closed), denied(DenyReason::Closed)]
    );
}
