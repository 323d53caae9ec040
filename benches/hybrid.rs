//! The hybrid modes against the exact one: several simulated nodes (each its own
//! connection and limiter, in one process on a tokio multi-thread runtime) share a
//! few hot keys through one `redis-server` this benchmark starts on a free port.
//!
//! Modes:
//! - `exact`: `SharedLimiter` over `RedisStore`, one script call per decision;
//! - `denied-cache`: the same over `DeniedCache<RedisStore>`;
//! - `batched <interval>`: `BatchedLimiter`, fixed windows counted on each node and
//!   synced every interval; `batched <interval> ÷8` with `with_divisor(8)`, admitting
//!   at most an eighth of what remained between syncs;
//! - `lease`: `LeaseLimiter` with a fixed window, each node admitting from slices of
//!   what remains leased from Redis; `lease gcra`: the same with a GCRA of `LIMIT`
//!   per second and a burst of `LIMIT`; `lease sliding`: the same with a sliding
//!   window counter of `LIMIT` per second.
//!
//! Loads, each for a few seconds starting on a whole second:
//! - `hammer`: closed-loop clients, each sending its next request as soon as the last
//!   is decided (yielding to the runtime in between, as a server's request handlers
//!   would);
//! - `paced`: every node offers each key a steady rate; all nodes together offer
//!   twice the quota.
//!
//! For each run it prints decisions per second, permits admitted against the quota,
//! the over- and under-admission, and script calls per decision. The quota is `LIMIT`
//! per key per second: fixed windows of one second where the rule is a fixed window,
//! a sliding window counter over windows of one second for `lease sliding`, and
//! otherwise a GCRA of `LIMIT` per second with a burst of `LIMIT`, whose quota over a
//! run of `d` seconds is `LIMIT × (1 + d)`.
//!
//! Over- and under-admission follow each rule's definition. A fixed window: the
//! permits admitted beyond the limit in each key's window (the one ending
//! `reset_after` after the request, to the nearest second), summed, over the quota; the permits of windows left below the limit,
//! summed, over the quota (both loads offer more than the limit in every window). A
//! GCRA: the permits admitted beyond `LIMIT × (1 + d)` over the run, or short of it,
//! over the quota (a lease mode's bound adds `LIMIT × term`).
//!
//! A sliding window counter admits a permit when `previous × (W − e) / W + current ≤
//! LIMIT`, `e` the time since the window began, `current` the permits of this window
//! counting that one and `previous` those of the window before. Over-admission: the
//! admissions that broke this when replayed in order per key, `previous` and `current`
//! counting the permits admitted (not those leased), `e` the instant the caller had
//! its answer; a count above `LIMIT` in a window breaks it too. Under-admission: per
//! key and window, the permits short of `LIMIT` (the rule admits at most `LIMIT` in a
//! window, and both loads ask until the window's last instant, where the previous
//! window weighs nothing). Quota: `LIMIT` per key and window, as a fixed window. Each
//! admission is placed by its `reset_after`: the key's state is empty one window after
//! the current one ends, so the window and `e` come from the server's clock, as the
//! lease took them, not from this process's.
//!
//! Run `cargo bench -p tollgate-benches --features redis --bench hybrid` (about a
//! minute: 16 runs of about 4 s); it needs `redis-server` on `PATH`.

#[cfg(feature = "redis")]
#[path = "../tests/common/redis.rs"]
#[allow(dead_code)]
mod redis_harness;

#[cfg(not(feature = "redis"))]
fn main() {
    eprintln!(
        "the hybrid benchmark needs the redis feature: \
         cargo bench -p tollgate-benches --features redis --bench hybrid"
    );
}

#[cfg(feature = "redis")]
fn main() {
    bench::main();
}

#[cfg(feature = "redis")]
mod bench {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    use redis::aio::MultiplexedConnection;
    use tokio::time::MissedTickBehavior;
    use tollgate::Quota;
    use tollgate::algorithm::{FixedWindow, Gcra, SlidingCounter};
    use tollgate::store::{
        BatchedLimiter, DeniedCache, LeaseLimiter, RedisStore, Rule, SharedLimiter, Store,
        StoreError,
    };
    use tollgate::time::{Clock, MonotonicClock};

    use super::redis_harness::{RedisServer, require_redis};

    /// Simulated nodes.
    const NODES: usize = 4;
    /// Hot keys every node serves.
    const KEYS: [&str; 4] = ["hot-0", "hot-1", "hot-2", "hot-3"];
    /// Permits per key per second.
    const LIMIT: u64 = 1_000;
    /// How long each run lasts.
    const RUN: Duration = Duration::from_secs(3);
    /// Closed-loop clients per node in the hammer load.
    const CLIENTS_PER_NODE: usize = 8;
    /// The paced load: all nodes together offer each key this many times the quota.
    const PACED_OVERLOAD: u64 = 2;

    #[derive(Clone, Copy, Debug)]
    enum Mode {
        Exact,
        DeniedCache,
        Batched(Duration),
        BatchedShare(Duration),
        Lease,
        LeaseGcra,
        LeaseSliding,
    }

    impl Mode {
        fn name(self) -> String {
            match self {
                Mode::Exact => "exact".into(),
                Mode::DeniedCache => "denied-cache".into(),
                Mode::Batched(d) => format!("batched {} ms", d.as_millis()),
                Mode::BatchedShare(d) => format!("batched {} ms ÷8", d.as_millis()),
                Mode::Lease => "lease".into(),
                Mode::LeaseGcra => "lease gcra".into(),
                Mode::LeaseSliding => "lease sliding".into(),
            }
        }

        /// The rule the mode runs, given what the exact modes run.
        fn shape(self, quotum: Quotum) -> Shape {
            match self {
                Mode::Batched(_) | Mode::BatchedShare(_) | Mode::Lease => Shape::FixedWindow,
                Mode::LeaseGcra => Shape::Gcra,
                Mode::LeaseSliding => Shape::SlidingCounter,
                Mode::Exact | Mode::DeniedCache => match quotum {
                    Quotum::FixedWindow => Shape::FixedWindow,
                    Quotum::Gcra => Shape::Gcra,
                },
            }
        }
    }

    /// The rule a run decides by, which defines its over- and under-admission.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Shape {
        FixedWindow,
        SlidingCounter,
        Gcra,
    }

    impl Shape {
        fn name(self) -> &'static str {
            match self {
                Shape::FixedWindow => "fixed window",
                Shape::SlidingCounter => "sliding counter",
                Shape::Gcra => "gcra",
            }
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Load {
        Hammer,
        Paced,
    }

    impl Load {
        fn name(self) -> &'static str {
            match self {
                Load::Hammer => "hammer",
                Load::Paced => "paced",
            }
        }
    }

    /// The quota as the exact modes run it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Quotum {
        FixedWindow,
        Gcra,
    }

    /// One node's limiter.
    #[derive(Clone)]
    enum Node {
        Exact(SharedLimiter<RedisStore<MultiplexedConnection>>),
        Cached(SharedLimiter<DeniedCache<RedisStore<MultiplexedConnection>>>),
        Batched(Box<BatchedLimiter<MultiplexedConnection>>),
        Lease(Box<LeaseLimiter<MultiplexedConnection>>),
    }

    impl Node {
        /// One permit: when the window it was counted in ends, if admitted.
        async fn try_acquire(&self, key: &str) -> Result<Option<Duration>, StoreError> {
            let decision = match self {
                Node::Exact(l) => l.check(key, 1).await?,
                Node::Cached(l) => l.check(key, 1).await?,
                Node::Batched(l) => l.check(key, 1).await?,
                Node::Lease(l) => l.check(key, 1).await?,
            };
            Ok(decision.ok().map(|admitted| admitted.reset_after()))
        }

        fn cache_hits(&self) -> u64 {
            match self {
                Node::Cached(l) => l.store().hits(),
                _ => 0,
            }
        }
    }

    /// What one client counted.
    #[derive(Default)]
    struct Tally {
        decisions: u64,
        errors: u64,
        first_error: Option<String>,
        /// Admissions per key and per second since the epoch, at send time.
        admitted: HashMap<(usize, u64), u64>,
        /// A sliding counter's admissions: key, window (second since the epoch) and
        /// nanoseconds into it.
        sliding: Vec<(usize, u64, u64)>,
    }

    impl Tally {
        fn merge(&mut self, other: Tally) {
            self.decisions += other.decisions;
            self.errors += other.errors;
            if self.first_error.is_none() {
                self.first_error = other.first_error;
            }
            for (k, v) in other.admitted {
                *self.admitted.entry(k).or_default() += v;
            }
            self.sliding.extend(other.sliding);
        }
    }

    struct Row {
        mode: String,
        load: &'static str,
        rule: &'static str,
        decisions_per_sec: f64,
        admitted: u64,
        quota: u64,
        /// Permits admitted beyond the rule's definition, and short of it.
        over: u64,
        under: u64,
        calls_per_decision: f64,
        hit_rate: f64,
        errors: u64,
    }

    pub fn main() {
        let Some(()) = require_redis() else {
            eprintln!("skipping the hybrid benchmark: no redis-server");
            return;
        };
        let server = RedisServer::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let rows = runtime.block_on(run_all(&server));
        print_table(&rows);
    }

    async fn run_all(server: &RedisServer) -> Vec<Row> {
        let mut connections = Vec::new();
        for _ in 0..NODES {
            let client = redis::Client::open(server.url()).expect("a client");
            connections.push(
                client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("a connection"),
            );
        }
        let window = Rule::from(FixedWindow::new(LIMIT, Duration::from_secs(1)).expect("rule"));
        let probe = RedisStore::new(connections[0].clone(), "probe").expect("store");
        let quotum = if probe.check_rule(&window).is_ok() {
            Quotum::FixedWindow
        } else {
            Quotum::Gcra
        };
        let modes = [
            Mode::Exact,
            Mode::DeniedCache,
            Mode::Batched(Duration::from_millis(10)),
            Mode::Batched(Duration::from_millis(100)),
            Mode::BatchedShare(Duration::from_millis(10)),
            Mode::Lease,
            Mode::LeaseGcra,
            Mode::LeaseSliding,
        ];
        let mut rows = Vec::new();
        for load in [Load::Hammer, Load::Paced] {
            for (i, mode) in modes.iter().enumerate() {
                let prefix = format!("bench-{}-{i}", load.name());
                let nodes = build(&connections, *mode, quotum, &prefix);
                let row = run(&connections[0], &nodes, *mode, quotum, load).await;
                eprintln!(
                    "{:>7} {:<16} {:>10.0}/s admitted {:>6} quota {:>6}",
                    row.load, row.mode, row.decisions_per_sec, row.admitted, row.quota
                );
                rows.push(row);
            }
        }
        rows
    }

    fn build(
        connections: &[MultiplexedConnection],
        mode: Mode,
        quotum: Quotum,
        prefix: &str,
    ) -> Vec<Node> {
        let rule = match mode.shape(quotum) {
            Shape::FixedWindow => {
                Rule::from(FixedWindow::new(LIMIT, Duration::from_secs(1)).expect("rule"))
            }
            Shape::SlidingCounter => {
                Rule::from(SlidingCounter::new(LIMIT, Duration::from_secs(1)).expect("rule"))
            }
            Shape::Gcra => {
                let quota = Quota::per_second(LIMIT).expect("quota");
                Rule::from(Gcra::new(quota.burst(LIMIT).expect("burst")))
            }
        };
        connections
            .iter()
            .map(|connection| {
                let store = RedisStore::new(connection.clone(), prefix).expect("store");
                match mode {
                    Mode::Exact => {
                        Node::Exact(SharedLimiter::new(store, rule.clone()).expect("limiter"))
                    }
                    Mode::DeniedCache => {
                        let cache = DeniedCache::new(store, 10_000).expect("cache");
                        Node::Cached(SharedLimiter::new(cache, rule.clone()).expect("limiter"))
                    }
                    Mode::Batched(interval) => Node::Batched(Box::new(
                        BatchedLimiter::with_clock(
                            connection.clone(),
                            prefix,
                            rule.clone(),
                            interval,
                            clock().clone(),
                        )
                        .expect("batched"),
                    )),
                    Mode::BatchedShare(interval) => Node::Batched(Box::new(
                        BatchedLimiter::with_clock(
                            connection.clone(),
                            prefix,
                            rule.clone(),
                            interval,
                            clock().clone(),
                        )
                        .and_then(|b| Ok(b.with_divisor(8)?))
                        .expect("batched"),
                    )),
                    Mode::Lease | Mode::LeaseGcra | Mode::LeaseSliding => Node::Lease(Box::new(
                        LeaseLimiter::new(connection.clone(), prefix, rule.clone()).expect("lease"),
                    )),
                }
            })
            .collect()
    }

    /// Unix time on the clock the batched nodes decide by, so that an admission is
    /// counted in the window its node counted it in (Redis decides the exact modes on
    /// the system clock, which agrees with this one to a few microseconds).
    fn unix_now() -> Duration {
        let clock = clock();
        clock.unix_origin() + clock.now().as_duration()
    }

    fn clock() -> &'static MonotonicClock {
        static CLOCK: OnceLock<MonotonicClock> = OnceLock::new();
        CLOCK.get_or_init(MonotonicClock::new)
    }

    /// Script and function calls the server has run so far.
    async fn script_calls(connection: &MultiplexedConnection) -> u64 {
        let mut connection = connection.clone();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut connection)
            .await
            .expect("INFO");
        info.lines()
            .filter(|l| {
                l.starts_with("cmdstat_evalsha:")
                    || l.starts_with("cmdstat_eval:")
                    || l.starts_with("cmdstat_fcall:")
            })
            .filter_map(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }

    async fn run(
        probe: &MultiplexedConnection,
        nodes: &[Node],
        mode: Mode,
        quotum: Quotum,
        load: Load,
    ) -> Row {
        // Run whole seconds, so that the run covers whole windows.
        let to_next_second =
            Duration::from_secs(1) - Duration::from_nanos(u64::from(unix_now().subsec_nanos()));
        tokio::time::sleep(to_next_second).await;
        // Tokio's timer and this clock may disagree by a millisecond: never start in
        // the last moments of the previous second.
        while unix_now().subsec_millis() > 900 {
            tokio::task::yield_now().await;
        }
        let first_second = unix_now().as_secs();
        let end = Duration::from_secs(first_second) + RUN;
        let shape = mode.shape(quotum);
        let calls_before = script_calls(probe).await;
        let started = Instant::now();
        let mut tasks = Vec::new();
        for node in nodes {
            match load {
                Load::Hammer => {
                    for client in 0..CLIENTS_PER_NODE {
                        let node = node.clone();
                        tasks.push(tokio::spawn(async move {
                            let mut tally = Tally::default();
                            let mut i = client;
                            while unix_now() < end {
                                decide(&node, i % KEYS.len(), shape, &mut tally).await;
                                i += 1;
                                // A decision made locally is ready at once: without
                                // this, clients never yield, and the connections'
                                // tasks starve until their calls time out.
                                tokio::task::yield_now().await;
                            }
                            tally
                        }));
                    }
                }
                Load::Paced => {
                    // Each node offers each key its share of the overload.
                    let per_node = LIMIT * PACED_OVERLOAD / NODES as u64;
                    let period = Duration::from_secs(1) / per_node as u32;
                    for key in 0..KEYS.len() {
                        let node = node.clone();
                        tasks.push(tokio::spawn(async move {
                            let mut tally = Tally::default();
                            let mut ticks = tokio::time::interval(period);
                            ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
                            loop {
                                ticks.tick().await;
                                if unix_now() >= end {
                                    break tally;
                                }
                                decide(&node, key, shape, &mut tally).await;
                            }
                        }));
                    }
                }
            }
        }
        let mut tally = Tally::default();
        for task in tasks {
            tally.merge(task.await.expect("a client"));
        }
        let elapsed = started.elapsed();
        let calls = script_calls(probe).await - calls_before;

        let admitted: u64 = tally.admitted.values().sum();
        // GCRA: a full burst, then the rate, over the run.
        let per_key = match shape {
            Shape::FixedWindow | Shape::SlidingCounter => LIMIT * RUN.as_secs(),
            Shape::Gcra => LIMIT + LIMIT * RUN.as_secs(),
        };
        let windows = first_second..first_second + RUN.as_secs();
        let (over, under) = match shape {
            Shape::FixedWindow => {
                // Each key's window, by the second the permits were asked in.
                let mut over = 0;
                let mut under = 0;
                for key in 0..KEYS.len() {
                    for second in windows.clone() {
                        let n = tally.admitted.get(&(key, second)).copied().unwrap_or(0);
                        over += n.saturating_sub(LIMIT);
                        under += LIMIT.saturating_sub(n);
                    }
                }
                (over, under)
            }
            Shape::SlidingCounter => sliding_admission(&mut tally.sliding, windows),
            Shape::Gcra => {
                let quota = per_key * KEYS.len() as u64;
                (
                    admitted.saturating_sub(quota),
                    quota.saturating_sub(admitted),
                )
            }
        };
        let hits: u64 = nodes.iter().map(Node::cache_hits).sum();
        if let Some(e) = &tally.first_error {
            eprintln!("{} errors, the first: {e}", tally.errors);
        }
        Row {
            mode: mode.name(),
            load: load.name(),
            rule: shape.name(),
            decisions_per_sec: tally.decisions as f64 / elapsed.as_secs_f64(),
            admitted,
            quota: per_key * KEYS.len() as u64,
            over,
            under,
            calls_per_decision: calls as f64 / tally.decisions.max(1) as f64,
            hit_rate: hits as f64 / tally.decisions.max(1) as f64,
            errors: tally.errors,
        }
    }

    /// Decides one permit, counting an admission in the window it was granted in:
    /// the one ending `reset_after` after the decision (a fixed window's; a GCRA's
    /// admissions are counted over the whole run). A sliding counter's key is empty
    /// one window after the current one ends, which places the admission in its
    /// window, and within it, on the server's clock.
    async fn decide(node: &Node, key: usize, shape: Shape, tally: &mut Tally) {
        let sent = unix_now();
        match node.try_acquire(KEYS[key]).await {
            Ok(admitted) => {
                tally.decisions += 1;
                let Some(reset_after) = admitted else {
                    return;
                };
                if shape == Shape::SlidingCounter {
                    const WINDOW: u128 = 1_000_000_000;
                    let decided = unix_now();
                    // Empty at a window's start (to this clock's error): round to it.
                    let empty = (decided + reset_after).as_nanos();
                    let window = ((empty + WINDOW / 2) / WINDOW).saturating_sub(2) as u64;
                    let into = (2 * WINDOW)
                        .saturating_sub(reset_after.as_nanos())
                        .min(WINDOW);
                    tally.sliding.push((key, window, into as u64));
                    *tally.admitted.entry((key, window)).or_default() += 1;
                    return;
                }
                let second = if reset_after.is_zero() {
                    sent.as_secs()
                } else {
                    // The window's end, rounded: this clock and the server's differ by
                    // fractions of a millisecond, which truncating would turn into
                    // admissions at a window's start counted in the next one.
                    let end = (sent + reset_after).as_millis();
                    ((end + 500) / 1_000).saturating_sub(1) as u64
                };
                *tally.admitted.entry((key, second)).or_default() += 1;
            }
            Err(e) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }

    /// A sliding counter's over- and under-admission in `windows` (seconds since the
    /// epoch): the admissions, replayed in order per key, that the rule would have
    /// refused given those before them; the permits short of `LIMIT` per key and
    /// window.
    fn sliding_admission(
        admissions: &mut [(usize, u64, u64)],
        windows: std::ops::Range<u64>,
    ) -> (u64, u64) {
        const WINDOW: u128 = 1_000_000_000;
        admissions.sort_unstable();
        let mut counts: HashMap<(usize, u64), u64> = HashMap::new();
        for &(key, window, _) in admissions.iter() {
            *counts.entry((key, window)).or_default() += 1;
        }
        let mut over = 0;
        let mut current = 0u64;
        let mut last = None;
        for &(key, window, into) in admissions.iter() {
            if last != Some((key, window)) {
                last = Some((key, window));
                current = 0;
            }
            current += 1;
            if !windows.contains(&window) {
                continue;
            }
            let previous = counts.get(&(key, window - 1)).copied().unwrap_or(0);
            // previous × (W − e) + current × W ≤ LIMIT × W, in integers.
            let estimate =
                u128::from(previous) * (WINDOW - u128::from(into)) + u128::from(current) * WINDOW;
            if estimate > u128::from(LIMIT) * WINDOW {
                over += 1;
            }
        }
        let mut under = 0;
        for key in 0..KEYS.len() {
            for window in windows.clone() {
                let n = counts.get(&(key, window)).copied().unwrap_or(0);
                under += LIMIT.saturating_sub(n);
            }
        }
        (over, under)
    }

    fn print_table(rows: &[Row]) {
        println!();
        println!(
            "{NODES} nodes, {} hot keys, {LIMIT} permits per key per second, {} s per run",
            KEYS.len(),
            RUN.as_secs()
        );
        println!(
            "| load | mode | rule | decisions/s | admitted | quota | admitted − quota | over-admission | under-admission | script calls/decision | cache hits | errors |"
        );
        println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in rows {
            let net = (r.admitted as f64 - r.quota as f64) / r.quota as f64 * 100.0;
            let over = r.over as f64 / r.quota as f64 * 100.0;
            let under = r.under as f64 / r.quota as f64 * 100.0;
            println!(
                "| {} | {} | {} | {:.0} | {} | {} | {:+.1}% | {:.2}% | {:.2}% | {:.3} | {:.1}% | {} |",
                r.load,
                r.mode,
                r.rule,
                r.decisions_per_sec,
                r.admitted,
                r.quota,
                net,
                over,
                under,
                r.calls_per_decision,
                r.hit_rate * 100.0,
                r.errors
            );
        }
    }
}
