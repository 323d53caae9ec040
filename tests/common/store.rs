//! The stores' differential test: the same random requests at the same explicit times,
//! decided by a `MemoryStore` and by a `RedisStore` on a real `redis-server`, must get
//! the same outcomes; and no key Redis holds may lack a TTL.
//!
//! ```ignore
//! let Some(diff) = Differential::start() else { return };
//! diff.run(32, (rules_strategy, steps(2_000_000, 5, 1..24)), |diff, (rules, steps)| {
//!     diff.check(&rules, &steps)
//! });
//! ```

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tollgate::KeyedConfig;
use tollgate::store::{Check, MemoryStore, Op, RedisStore, Reply, Request, Rule, Store};
use tollgate::time::ManualClock;

use super::redis::{RedisServer, require_redis};

/// A realistic "now": µs since the epoch in 2023, so the scripts' doubles see real sizes.
pub const EPOCH_MICROS: u64 = 1_700_000_000_000_000;

/// What one step asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    Acquire,
    Peek,
    Reserve,
    Refund,
}

/// One request of a case: after `dt_micros`, `ask` for `n` on tag `tag` of three.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub dt_micros: u64,
    pub ask: Ask,
    pub n: u64,
    pub max_wait_micros: u64,
    pub tag: u8,
}

impl Step {
    pub fn op(&self) -> Op {
        match self.ask {
            Ask::Acquire => Op::Acquire(self.n),
            Ask::Peek => Op::Peek(self.n),
            Ask::Reserve => Op::Reserve {
                n: self.n,
                max_wait: Duration::from_micros(self.max_wait_micros),
            },
            Ask::Refund => Op::Refund(self.n),
        }
    }
}

/// Steps up to `max_dt_micros` apart (a quarter of them at the same instant), for up to
/// `max_n` permits (sometimes one more than asked, to reach "never").
pub fn steps(
    max_dt_micros: u64,
    max_n: u64,
    len: Range<usize>,
) -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![1 => Just(0u64), 3 => 0..=max_dt_micros];
    let ask = prop_oneof![
        5 => Just(Ask::Acquire),
        1 => Just(Ask::Peek),
        2 => Just(Ask::Reserve),
        1 => Just(Ask::Refund),
    ];
    let step = (dt, ask, 0..=max_n + 1, 0..=max_dt_micros * 2, 0u8..3).prop_map(
        |(dt_micros, ask, n, max_wait_micros, tag)| Step {
            dt_micros,
            ask,
            n,
            max_wait_micros,
            tag,
        },
    );
    prop::collection::vec(step, len)
}

/// One Redis server, a runtime and a connection, for every case of a test.
pub struct Differential {
    // Dropped last: kills the server.
    _server: RedisServer,
    runtime: tokio::runtime::Runtime,
    connection: MultiplexedConnection,
    next_case: AtomicU64,
}

impl Differential {
    /// Starts a server; `None` where Redis is missing and CI is not set.
    pub fn start() -> Option<Differential> {
        require_redis()?;
        let server = RedisServer::start();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let url = server.url();
        let connection = runtime.block_on(connect(&url));
        Some(Differential {
            _server: server,
            runtime,
            connection,
            next_case: AtomicU64::new(0),
        })
    }

    /// A fresh Redis store on this server, with its own prefix.
    pub fn redis_store(&self) -> RedisStore<MultiplexedConnection> {
        let case = self.next_case.fetch_add(1, Ordering::Relaxed);
        RedisStore::new(self.connection.clone(), &format!("case{case}")).unwrap()
    }

    /// Runs `future` on the harness's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs `cases` cases of `strategy` through `test`, panicking on the first failure
    /// (shrunk).
    pub fn run<S: Strategy>(
        &self,
        cases: u32,
        strategy: S,
        test: impl Fn(&Differential, S::Value) -> Result<(), TestCaseError>,
    ) {
        let mut runner = TestRunner::new(ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        if let Err(failure) = runner.run(&strategy, |value| test(self, value)) {
            panic!("{failure}");
        }
    }

    /// Runs `steps` from `EPOCH_MICROS + start_micros` on both stores, each request
    /// checking every rule of `rules` (rule i on key `r{i}`), and compares.
    pub fn check(
        &self,
        rules: &[Rule],
        start_micros: u64,
        steps: &[Step],
    ) -> Result<(), TestCaseError> {
        let redis_store = self.redis_store();
        let prefix = redis_store.prefix().to_owned();
        let memory =
            MemoryStore::with_clock(KeyedConfig::new(1_000), &prefix, ManualClock::new()).unwrap();
        let keys: Vec<String> = (0..rules.len()).map(|i| format!("r{i}")).collect();
        let checks: Vec<Check<'_>> = rules
            .iter()
            .zip(&keys)
            .map(|(rule, key)| Check::new(key, rule))
            .collect();
        let mut now = EPOCH_MICROS + start_micros;
        let mut connection = self.connection.clone();
        for (i, step) in steps.iter().enumerate() {
            now += step.dt_micros;
            let tag = format!("t{}", step.tag);
            let request = Request::new(&tag, &checks, step.op()).at(Duration::from_micros(now));
            let expected = memory.execute_now(&request);
            let got = self.runtime.block_on(redis_store.execute(&request));
            match (&expected, &got) {
                (Ok(e), Ok(g)) => prop_assert_eq!(
                    e,
                    g,
                    "step {} ({:?} at +{} µs) of {:?} on {:?}",
                    i,
                    step,
                    now - EPOCH_MICROS,
                    steps,
                    rules
                ),
                _ => prop_assert!(
                    false,
                    "step {i} ({step:?}): memory {expected:?}, redis {got:?}, rules {rules:?}"
                ),
            }
            if let (Ok(e), Ok(g)) = (&expected, &got) {
                prop_assert_eq!(
                    next_permit(e),
                    next_permit(g),
                    "next permit and rule at step {} ({:?} at +{} µs) of {:?} on {:?}: memory {:?}, redis {:?}",
                    i,
                    step,
                    now - EPOCH_MICROS,
                    steps,
                    rules,
                    e,
                    g
                );
            }
            for key in &keys {
                let redis_key = redis_store.redis_key(&tag, key);
                let ttl: i64 = self.runtime.block_on(connection.pttl(&redis_key)).unwrap();
                prop_assert!(ttl != -1, "{} has no TTL after step {}", redis_key, i);
            }
        }
        Ok(())
    }
}

/// A connection to `url` that waits for slow replies: a loaded 2-core machine can stall
/// one past redis-rs's default 500 ms.
pub async fn connect(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// The server's clock, µs since the epoch.
pub async fn server_micros(connection: &mut MultiplexedConnection) -> u64 {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(connection).await.unwrap();
    seconds * 1_000_000 + micros
}

/// A decision's `next_permit_after` (the HTTP `t`) and the rule it describes, which
/// `Reply`'s equality leaves out.
pub fn next_permit(reply: &Reply) -> Option<(Option<Duration>, usize)> {
    match reply {
        Reply::Decision(Ok(admitted)) => {
            Some((Some(admitted.next_permit_after()), admitted.rule()))
        }
        Reply::Decision(Err(tollgate::Denied::Limited(limited)))
        | Reply::Reservation(Err(tollgate::Denied::Limited(limited))) => {
            Some((limited.next_permit_after(), limited.rule()))
        }
        _ => None,
    }
}

/// Whether two outcomes agree; a convenience for tests that compare by hand.
pub fn same(a: &Reply, b: &Reply) -> bool {
    a == b
}
