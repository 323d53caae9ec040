//! A bounded soak of the Redis-backed parts that hold state (issue 26, item 6): about
//! a minute against one `redis-server` it starts on a free loopback port, over tens of
//! thousands of keys that keep arriving, so that idle ones must be forgotten. At the
//! end it checks, and exits non-zero when one fails:
//!
//! 1. **client memory stays flat**: the heap's live bytes and live blocks (a counting
//!    global allocator in this binary, exact) averaged over the last third of the run
//!    after the warm-up are within `MEMORY_RATIO` + `MEMORY_SLACK` (bytes) or
//!    `BLOCKS_SLACK` (blocks) of the first third's;
//! 2. **no key without a TTL**: `SCAN` over every key, `PTTL` of each, none `-1`;
//! 3. **leases returned**: after the churn, each `LeaseLimiter` (fixed window, sliding
//!    counter, GCRA; two nodes each) takes leases on fresh keys, then `close()` on
//!    every node; then every lease is settled (no lease record left in those keys'
//!    hashes, their sorted sets of leases gone), a window's count equals the permits
//!    admitted in it (so every unused permit came back), a GCRA bucket owes no less
//!    than an exact bucket would (its give-back is bounded by design and may keep
//!    some credit back: reported), and `held()` is 0 on every node for every key the
//!    soak used. The fleet shedder's slots (half released, half dropped) are all back
//!    (`in_use() == 0`) within a second, well before their leases run out. A key a
//!    full table forgot leaves its ended leases unsettled (forfeited, as
//!    `LeaseLimiter` documents), so the audit runs on fresh keys, each looked at before
//!    any lease is taken; the soak reports the lease records the churn left, which go
//!    with their hash's TTL.
//!
//! What runs, each paced (bursts of decisions every 10 ms, at most the rate asked: a
//! burst waits for its round trips), with 10 % of the requests on two hot keys that
//! reach their limits and the rest on the `ACTIVE` newest keys of a stream arriving
//! at `ARRIVALS` a second:
//! - `SharedLimiter<RedisStore>`, one per rule the Redis store runs (a concurrency
//!   rule's permits mostly refunded, some left to their lease);
//! - `SharedLimiter<DeniedCache<RedisStore>>`;
//! - `BatchedLimiter` on two nodes (flushed and closed at the end);
//! - `LeaseLimiter` with a fixed window, a sliding counter and a GCRA, two nodes each;
//! - `FleetShedder<RedisUsage>`: tasks holding slots for a few milliseconds.
//!
//! The limiters' tables, the cache and the batched counts are bounded by `MAX_KEYS`,
//! which the stream passes within the warm-up, so memory must stop growing there.
//!
//! Run `cargo bench -p tollgate-benches --features redis --bench soak` (60 s; `--
//! --seconds N` for another length, `-- --short` for an 8 s smoke run); it needs
//! `redis-server` on `PATH`.

#[path = "../tests/common/redis.rs"]
#[allow(dead_code)]
mod redis_harness;

fn main() {
    std::process::exit(soak::main());
}

/// The heap's live bytes: a global allocator that wraps the system's and counts, the
/// blocks too, and apart the bytes in large blocks (tables and buffers).
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[global_allocator]
    static COUNTING: Counting = Counting;

    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static BLOCKS: AtomicUsize = AtomicUsize::new(0);
    static LARGE: AtomicUsize = AtomicUsize::new(0);
    /// A block this large is counted in `LARGE` as well.
    const LARGE_BLOCK: usize = 64 << 10;

    struct Counting;

    fn grew(size: usize) {
        LIVE.fetch_add(size, Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        if size >= LARGE_BLOCK {
            LARGE.fetch_add(size, Ordering::Relaxed);
        }
    }

    fn shrank(size: usize) {
        LIVE.fetch_sub(size, Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        if size >= LARGE_BLOCK {
            LARGE.fetch_sub(size, Ordering::Relaxed);
        }
    }

    // SAFETY: every call is forwarded unchanged to `System`; the counters only observe.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let ptr = unsafe { System.alloc(layout) };
            if !ptr.is_null() {
                grew(layout.size());
            }
            ptr
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let ptr = unsafe { System.alloc_zeroed(layout) };
            if !ptr.is_null() {
                grew(layout.size());
            }
            ptr
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) };
            shrank(layout.size());
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let new = unsafe { System.realloc(ptr, layout, new_size) };
            if !new.is_null() {
                grew(new_size);
                shrank(layout.size());
            }
            new
        }
    }

    /// Bytes allocated and not freed.
    pub fn live() -> usize {
        LIVE.load(Ordering::Relaxed)
    }

    /// Blocks allocated and not freed.
    pub fn blocks() -> usize {
        BLOCKS.load(Ordering::Relaxed)
    }

    /// Bytes in live blocks of 64 KiB or more.
    pub fn large() -> usize {
        LARGE.load(Ordering::Relaxed)
    }
}

mod soak {
    use std::collections::HashMap;
    use std::fmt::Write as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use redis::aio::MultiplexedConnection;
    use tokio::time::MissedTickBehavior;
    use tollgate::Quota;
    use tollgate::algorithm::{
        Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod, SlidingCounter,
        SlidingLog, SmoothBursty, SmoothWarmingUp,
    };
    use tollgate::shed::{Classes, FleetShedder, RedisUsage};
    use tollgate::store::{
        BatchedLimiter, DeniedCache, LeaseLimiter, RedisStore, Rule, SharedLimiter, Store,
        StoreError,
    };

    use super::heap;
    use super::redis_harness::{RedisServer, require_redis};

    type Conn = MultiplexedConnection;

    /// Keys live at once: requests go to the newest `ACTIVE` of the stream.
    const ACTIVE: u64 = 500;
    /// New keys a second.
    const ARRIVALS: u64 = 500;
    /// Hot keys, taking `HOT_PERCENT` of the requests; they reach their limits.
    const HOT: u64 = 2;
    const HOT_PERCENT: u64 = 10;
    /// Keys each limiter, cache and batched node holds at most: the stream passes it
    /// in about two seconds.
    const MAX_KEYS: usize = 1_024;
    /// Nodes of the batched and lease limiters.
    const NODES: usize = 2;
    /// Decisions are made in bursts every tick, at these rates a second.
    const TICK: Duration = Duration::from_millis(10);
    const EXACT_RATE: u64 = 200;
    const CACHED_RATE: u64 = 1_000;
    const BATCHED_RATE: u64 = 2_000;
    const LEASE_RATE: u64 = 2_000;
    /// The fleet shedder: tasks, capacity and lease.
    const SHED_TASKS: usize = 6;
    const SHED_CAPACITY: u64 = 4;
    const SHED_LEASE: Duration = Duration::from_secs(5);
    /// The lease limiters' windows: long enough that the audit fits in one.
    const LEASE_WINDOW: Duration = Duration::from_secs(10);
    const LEASE_LIMIT: u64 = 300;
    /// The lease GCRA: slow, so that a permit not given back shows in its debt.
    const LEASE_GCRA_RATE: u64 = 5;
    const LEASE_GCRA_BURST: u64 = 100;
    const GCRA_INTERVAL: u64 = 1_000_000 / LEASE_GCRA_RATE;
    /// The audit: fresh keys per lease limiter, requests per key per node.
    const AUDIT_KEYS: usize = 64;
    const AUDIT_ROUNDS: u64 = 30;
    /// How long a request may wait for Redis's answer.
    const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
    /// The memory check: the last third's mean live bytes and blocks at most the first
    /// third's times `1 + MEMORY_RATIO`, plus `MEMORY_SLACK` bytes or `BLOCKS_SLACK`
    /// blocks. The bytes' slack is for hash tables that, full of keys since the
    /// warm-up, double once more later as removals leave tombstones (hashbrown grows a
    /// table whose items pass half its capacity when it runs out of room): bounded by
    /// the keys they hold, seen at +0.32 MiB per batched node's table, 2,048 to 4,096
    /// buckets, at 62 s and at 136 s of one run. A leak of an object per key or per
    /// request shows in the blocks, which such a doubling changes by one.
    const MEMORY_RATIO: f64 = 0.10;
    const MEMORY_SLACK: usize = 1 << 20;
    const BLOCKS_SLACK: usize = 256;

    struct Args {
        seconds: u64,
        short: bool,
    }

    impl Args {
        fn parse() -> Result<Args, String> {
            let mut args = Args {
                seconds: 60,
                short: false,
            };
            let mut words = std::env::args().skip(1);
            while let Some(word) = words.next() {
                match word.as_str() {
                    "--seconds" => {
                        let n = words.next().ok_or("--seconds needs a number")?;
                        args.seconds = n
                            .parse()
                            .map_err(|_| format!("--seconds: not a number: {n}"))?;
                        if args.seconds < 6 {
                            return Err("--seconds: at least 6".into());
                        }
                    }
                    "--short" => {
                        args.short = true;
                        args.seconds = 8;
                    }
                    // cargo bench passes it to every harness = false target.
                    "--bench" => {}
                    other => return Err(format!("unknown argument {other}")),
                }
            }
            Ok(args)
        }

        fn run(&self) -> Duration {
            Duration::from_secs(self.seconds)
        }

        /// Until the tables are full: a sixth of the run, at least 3 s.
        fn warm_up(&self) -> Duration {
            Duration::from_secs((self.seconds / 6).max(3))
        }

        fn sample_every(&self) -> Duration {
            if self.short {
                Duration::from_millis(250)
            } else {
                Duration::from_secs(2)
            }
        }
    }

    pub fn main() -> i32 {
        let args = match Args::parse() {
            Ok(args) => args,
            Err(e) => {
                eprintln!("soak: {e}\nusage: soak [--seconds N | --short]");
                return 2;
            }
        };
        let Some(()) = require_redis() else {
            eprintln!("skipping the soak: no redis-server");
            return 0;
        };
        let server = RedisServer::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let report = runtime.block_on(soak(&server, &args));
        drop(runtime);
        report.print(&args);
        if report.failures.is_empty() {
            println!("\nsoak: every check passed");
            0
        } else {
            for failure in &report.failures {
                eprintln!("soak: FAILED: {failure}");
            }
            1
        }
    }

    /// A small xorshift generator: the same requests on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Writes the key of the next request at `elapsed` into `key`: a hot key, or one
    /// of the `ACTIVE` newest of the stream.
    fn churn_key(key: &mut String, rng: &mut Rng, elapsed: Duration) {
        key.clear();
        let r = rng.next();
        if r % 100 < HOT_PERCENT {
            let _ = write!(key, "hot-{}", (r >> 8) % HOT);
        } else {
            let _ = write!(key, "k{}", newest(elapsed) + (r >> 8) % ACTIVE);
        }
    }

    /// The first of the keys live at `elapsed`.
    fn newest(elapsed: Duration) -> u64 {
        (elapsed.as_millis() as u64) * ARRIVALS / 1_000
    }

    /// What one component counted.
    #[derive(Default)]
    struct Tally {
        decisions: AtomicU64,
        admitted: AtomicU64,
        errors: AtomicU64,
        first_error: Mutex<Option<String>>,
    }

    impl Tally {
        fn record(&self, result: Result<bool, StoreError>) {
            self.decisions.fetch_add(1, Ordering::Relaxed);
            match result {
                Ok(true) => {
                    self.admitted.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(e) => self.fail(e),
            }
        }

        /// A failure that is not a decision (a release).
        fn fail(&self, e: StoreError) {
            self.errors.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first_error.lock().expect("tally lock");
            first.get_or_insert_with(|| e.to_string());
        }
    }

    /// A limiter a driver decides on.
    #[derive(Clone)]
    enum Target {
        /// A concurrency rule's permits are refunded, but one in four.
        Exact(SharedLimiter<RedisStore<Conn>>, bool),
        Cached(SharedLimiter<DeniedCache<RedisStore<Conn>>>),
        Batched(BatchedLimiter<Conn>),
        Lease(LeaseLimiter<Conn>),
    }

    impl Target {
        async fn decide(&self, key: &str, rng: &mut Rng) -> Result<bool, StoreError> {
            Ok(match self {
                Target::Exact(limiter, refunds) => {
                    let admitted = limiter.check(key, 1).await?.is_ok();
                    if admitted && *refunds && rng.next() % 4 != 0 {
                        limiter.refund(key, 1).await?;
                    }
                    admitted
                }
                Target::Cached(limiter) => limiter.check(key, 1).await?.is_ok(),
                Target::Batched(limiter) => limiter.check(key, 1).await?.is_ok(),
                Target::Lease(limiter) => limiter.check(key, 1).await?.is_ok(),
            })
        }
    }

    /// One component: its name, its nodes, its rate per node, what it counted.
    struct Component {
        name: String,
        nodes: Vec<Target>,
        rate: u64,
        tally: Arc<Tally>,
    }

    /// A lease limiter's nodes, and what they decided in the churn.
    struct LeaseSet {
        kind: &'static str,
        nodes: Vec<LeaseLimiter<Conn>>,
        tally: Arc<Tally>,
    }

    struct Sample {
        at: Duration,
        live: usize,
        blocks: usize,
        large: usize,
        rss: Option<u64>,
        lease_keys: usize,
        batched_keys: usize,
        cached: usize,
        redis_keys: u64,
        redis_memory: u64,
        decisions: u64,
    }

    struct Check {
        name: &'static str,
        figure: String,
        bound: String,
        passed: bool,
    }

    /// What a component counted, at the end.
    struct Summary {
        name: String,
        decisions: u64,
        admitted: u64,
        errors: u64,
        first_error: Option<String>,
    }

    pub struct Report {
        samples: Vec<Sample>,
        components: Vec<Summary>,
        checks: Vec<Check>,
        notes: Vec<String>,
        pub failures: Vec<String>,
    }

    async fn soak(server: &RedisServer, args: &Args) -> Report {
        let client = redis::Client::open(server.url()).expect("a client");
        // Any failed request fails the soak: wait out the stalls of a shared machine
        // rather than redis-rs's default of 500 ms.
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
        let mut connections = Vec::new();
        for _ in 0..NODES + 1 {
            connections.push(
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .expect("a connection"),
            );
        }
        let probe = connections.pop().expect("the probe's connection");
        let mut report = Report {
            samples: Vec::new(),
            components: Vec::new(),
            checks: Vec::new(),
            notes: Vec::new(),
            failures: Vec::new(),
        };

        let (components, leases, batched) = build(&connections, &mut report);
        let cached = components
            .iter()
            .find_map(|c| match c.nodes.first() {
                Some(Target::Cached(l)) => Some(l.clone()),
                _ => None,
            })
            .expect("the denied cache");
        let shed_store = RedisStore::new(connections[0].clone(), "soak-shed").expect("store");
        let usage = RedisUsage::new(&shed_store, "fleet", SHED_LEASE).expect("usage");
        let usage_key = usage.key().to_owned();
        let classes = Classes::google();
        let shedder =
            FleetShedder::with_counter(classes.clone(), SHED_CAPACITY, 0.25, usage).expect("shed");
        let shed_tally = Arc::new(Tally::default());

        let start = Instant::now();
        let end = start + args.run();
        let mut drivers = Vec::new();
        for component in &components {
            for (n, node) in component.nodes.iter().enumerate() {
                let seed = 0x9E37_79B9_7F4A_7C15 ^ ((drivers.len() as u64 + 1) << 20) ^ n as u64;
                drivers.push(tokio::spawn(drive(
                    node.clone(),
                    Arc::clone(&component.tally),
                    component.rate,
                    seed,
                    start,
                    end,
                )));
            }
        }
        for task in 0..SHED_TASKS {
            let shedder = shedder.clone();
            let classes = classes.clone();
            let tally = Arc::clone(&shed_tally);
            drivers.push(tokio::spawn(async move {
                let names = ["critical_plus", "critical", "sheddable_plus", "sheddable"];
                let mut i = task;
                while Instant::now() < end {
                    let class = classes.parse(names[i % names.len()]);
                    match shedder.decide_async(&class).await {
                        Ok(decision) => match decision.into_slot() {
                            Ok(slot) => {
                                tally.record(Ok(true));
                                tokio::time::sleep(Duration::from_millis(1 + (i % 3) as u64)).await;
                                if i % 7 == 0 {
                                    let _ = slot.renew().await;
                                }
                                if i % 2 == 0 {
                                    if let Err(e) = slot.release().await {
                                        tally.fail(e);
                                    }
                                } else {
                                    // Given back by a task the drop spawns.
                                    drop(slot);
                                }
                            }
                            Err(_) => {
                                tally.record(Ok(false));
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                        },
                        Err(e) => tally.record(Err(e)),
                    }
                    i += 1;
                }
            }));
        }

        // The series.
        let mut ticks = tokio::time::interval(args.sample_every());
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let at = start.elapsed();
            let decisions = components
                .iter()
                .map(|c| c.tally.decisions.load(Ordering::Relaxed))
                .sum::<u64>()
                + shed_tally.decisions.load(Ordering::Relaxed);
            let (redis_keys, redis_memory) = redis_size(&probe).await;
            report.samples.push(Sample {
                at,
                live: heap::live(),
                blocks: heap::blocks(),
                large: heap::large(),
                rss: rss_kib(),
                lease_keys: leases
                    .iter()
                    .flat_map(|set| set.nodes.iter())
                    .map(LeaseLimiter::len)
                    .sum(),
                batched_keys: batched.iter().map(BatchedLimiter::len).sum(),
                cached: cached.store().len(),
                redis_keys,
                redis_memory,
                decisions,
            });
            if Instant::now() >= end {
                break;
            }
        }
        for driver in drivers {
            driver.await.expect("a driver");
        }
        let elapsed = start.elapsed();
        for component in &components {
            report
                .components
                .push(summary(&component.name, &component.tally));
        }
        report
            .components
            .push(summary("fleet shedder (RedisUsage)", &shed_tally));
        let total: u64 = report.components.iter().map(|c| c.decisions).sum();
        report.notes.push(format!(
            "{total} decisions in {:.1} s ({:.0}/s); {} distinct keys per component",
            elapsed.as_secs_f64(),
            total as f64 / elapsed.as_secs_f64(),
            newest(elapsed) + ACTIVE + HOT
        ));

        let errors: u64 = report.components.iter().map(|c| c.errors).sum();
        if errors > 0 {
            report.failures.push(format!(
                "{errors} requests failed (see the components' first errors)"
            ));
        }
        check_memory(&mut report, args);

        // Wind down: the batched counts go out, the shedder's slots come back.
        for node in &batched {
            if let Err(e) = node.flush().await {
                report.failures.push(format!("batched flush: {e}"));
            }
            node.close();
        }
        check_shedder(&mut report, &shedder, &probe, &usage_key).await;
        // Every lease of the churn ends (terms are 20 ms).
        tokio::time::sleep(Duration::from_millis(50)).await;
        check_leases(&mut report, &leases, &probe, newest(elapsed) + ACTIVE).await;
        check_ttls(&mut report, &probe).await;
        report
    }

    fn summary(name: &str, tally: &Tally) -> Summary {
        Summary {
            name: name.to_owned(),
            decisions: tally.decisions.load(Ordering::Relaxed),
            admitted: tally.admitted.load(Ordering::Relaxed),
            errors: tally.errors.load(Ordering::Relaxed),
            first_error: tally.first_error.lock().expect("tally lock").clone(),
        }
    }

    /// The components, the lease limiters (also among the components), the batched
    /// nodes.
    fn build(
        connections: &[Conn],
        report: &mut Report,
    ) -> (Vec<Component>, Vec<LeaseSet>, Vec<BatchedLimiter<Conn>>) {
        let short = Duration::from_secs(2);
        let per_second = |n| Quota::per_second(n).expect("quota");
        let exact_rules: Vec<(&str, Result<Rule, tollgate::ConfigError>)> = vec![
            (
                "gcra",
                per_second(10).burst(20).map(|q| Rule::from(Gcra::new(q))),
            ),
            (
                "leaky_bucket",
                LeakyBucket::new(20, per_second(10)).map(Rule::from),
            ),
            ("fixed_window", FixedWindow::new(20, short).map(Rule::from)),
            (
                "fixed_window_first_hit",
                FixedWindow::from_first_hit(20, short).map(Rule::from),
            ),
            ("sliding_log", SlidingLog::new(20, short).map(Rule::from)),
            (
                "sliding_counter",
                SlidingCounter::new(20, short).map(Rule::from),
            ),
            ("smooth_bursty", SmoothBursty::new(10.0).map(Rule::from)),
            (
                "smooth_warming_up",
                SmoothWarmingUp::new(10.0, short).map(Rule::from),
            ),
            (
                "refresh_period",
                RefreshPeriod::new(20, short, Duration::ZERO).map(Rule::from),
            ),
            (
                "concurrency",
                Concurrency::new(2)
                    .and_then(|c| Leased::new(c, short))
                    .map(Rule::from),
            ),
        ];
        let mut components = Vec::new();
        for (name, rule) in exact_rules {
            let rule = rule.expect("a rule");
            let store = RedisStore::new(connections[0].clone(), &format!("soak-exact-{name}"))
                .expect("store");
            if let Err(e) = store.check_rule(&rule) {
                report.notes.push(format!(
                    "exact {name}: not run, the Redis store refuses it: {e}"
                ));
                continue;
            }
            let limiter = SharedLimiter::new(store, rule).expect("limiter");
            components.push(Component {
                name: format!("exact {name}"),
                nodes: vec![Target::Exact(limiter, name == "concurrency")],
                rate: EXACT_RATE,
                tally: Arc::default(),
            });
        }

        let store = RedisStore::new(connections[1].clone(), "soak-cached").expect("store");
        let cache = DeniedCache::new(store, MAX_KEYS).expect("cache");
        let gcra = Gcra::new(per_second(10).burst(20).expect("burst"));
        components.push(Component {
            name: "denied-cache gcra".into(),
            nodes: vec![Target::Cached(
                SharedLimiter::new(cache, gcra).expect("limiter"),
            )],
            rate: CACHED_RATE,
            tally: Arc::default(),
        });

        let window = FixedWindow::new(20, short).expect("rule");
        let batched: Vec<BatchedLimiter<Conn>> = connections
            .iter()
            .map(|connection| {
                BatchedLimiter::new(
                    connection.clone(),
                    "soak-batched",
                    window,
                    Duration::from_millis(50),
                )
                .and_then(|b| Ok(b.with_max_keys(MAX_KEYS)?))
                .expect("batched")
            })
            .collect();
        components.push(Component {
            name: "batched fixed window".into(),
            nodes: batched.iter().cloned().map(Target::Batched).collect(),
            rate: BATCHED_RATE,
            tally: Arc::default(),
        });

        let lease_rules: [(&'static str, Rule); 3] = [
            (
                "fixed_window",
                FixedWindow::new(LEASE_LIMIT, LEASE_WINDOW)
                    .expect("rule")
                    .into(),
            ),
            (
                "sliding_counter",
                SlidingCounter::new(LEASE_LIMIT, LEASE_WINDOW)
                    .expect("rule")
                    .into(),
            ),
            (
                "gcra",
                Gcra::new(
                    per_second(LEASE_GCRA_RATE)
                        .burst(LEASE_GCRA_BURST)
                        .expect("burst"),
                )
                .into(),
            ),
        ];
        let mut leases = Vec::new();
        for (kind, rule) in lease_rules {
            let nodes: Vec<LeaseLimiter<Conn>> = connections
                .iter()
                .map(|connection| {
                    LeaseLimiter::new(
                        connection.clone(),
                        &format!("soak-lease-{kind}"),
                        rule.clone(),
                    )
                    .and_then(|l| Ok(l.with_max_keys(MAX_KEYS)?))
                    .expect("lease")
                })
                .collect();
            leases.push(LeaseSet {
                kind,
                nodes,
                tally: Arc::default(),
            });
        }
        components.extend(leases.iter().map(|set| Component {
            name: format!("lease {}", set.kind),
            nodes: set.nodes.iter().cloned().map(Target::Lease).collect(),
            rate: LEASE_RATE,
            tally: Arc::clone(&set.tally),
        }));
        (components, leases, batched)
    }

    /// Decides at `rate` a second on `target`, in bursts every tick, until `end`.
    async fn drive(
        target: Target,
        tally: Arc<Tally>,
        rate: u64,
        seed: u64,
        start: Instant,
        end: Instant,
    ) {
        let mut rng = Rng(seed | 1);
        let per_tick = (rate * TICK.as_millis() as u64 / 1_000).max(1);
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut key = String::new();
        loop {
            ticks.tick().await;
            let now = Instant::now();
            if now >= end {
                break;
            }
            for _ in 0..per_tick {
                churn_key(&mut key, &mut rng, now - start);
                let result = target.decide(&key, &mut rng).await;
                tally.record(result);
            }
        }
    }

    /// This process's resident set, in KiB.
    fn rss_kib() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// `DBSIZE` and `used_memory`.
    async fn redis_size(probe: &Conn) -> (u64, u64) {
        let mut connection = probe.clone();
        let keys: u64 = redis::cmd("DBSIZE")
            .query_async(&mut connection)
            .await
            .unwrap_or(0);
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        let used = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        (keys, used)
    }

    /// Microseconds on the server's clock.
    async fn redis_micros(probe: &Conn) -> u64 {
        let mut connection = probe.clone();
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut connection)
            .await
            .expect("TIME");
        secs * 1_000_000 + micros
    }

    /// Check 1: the mean live bytes and blocks of the last third after the warm-up
    /// against the first third's.
    fn check_memory(report: &mut Report, args: &Args) {
        let warm = args.warm_up();
        let after: Vec<&Sample> = report.samples.iter().filter(|s| s.at >= warm).collect();
        if after.len() < 3 {
            report.failures.push(format!(
                "memory: {} samples after the warm-up, too few to judge",
                after.len()
            ));
            return;
        }
        let third = args.run().saturating_sub(warm) / 3;
        let (early, late) = (warm + third, warm + third * 2);
        let mean = |measure: fn(&Sample) -> usize, late_third: bool| {
            let picked: Vec<usize> = after
                .iter()
                .filter(|s| {
                    if late_third {
                        s.at >= late
                    } else {
                        s.at <= early
                    }
                })
                .map(|s| measure(s))
                .collect();
            picked.iter().sum::<usize>() as f64 / picked.len().max(1) as f64
        };
        let (first, last) = (mean(|s| s.live, false), mean(|s| s.live, true));
        let (first_large, last_large) = (mean(|s| s.large, false), mean(|s| s.large, true));
        let bound = first * (1.0 + MEMORY_RATIO) + MEMORY_SLACK as f64;
        let passed = last <= bound;
        // Least squares over the samples after the warm-up, per minute.
        let n = after.len() as f64;
        let xs: Vec<f64> = after.iter().map(|s| s.at.as_secs_f64()).collect();
        let ys: Vec<f64> = after.iter().map(|s| s.live as f64).collect();
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
        let slope = if sxx > 0.0 { sxy / sxx * 60.0 } else { 0.0 };
        report.checks.push(Check {
            name: "client memory flat: heap live bytes",
            figure: format!(
                "first third {} → last third {} ({:+.2} %), of which in blocks ≥ 64 KiB {} → \
                 {}; trend {:+} KiB/min",
                mib(first),
                mib(last),
                (last - first) / first * 100.0,
                mib(first_large),
                mib(last_large),
                (slope / 1024.0).round()
            ),
            bound: format!(
                "last ≤ first × {:.2} + {} MiB",
                1.0 + MEMORY_RATIO,
                MEMORY_SLACK >> 20
            ),
            passed,
        });
        if !passed {
            report.failures.push(format!(
                "memory grew: mean live bytes {} in the last third against {} in the first \
                 (bound {})",
                mib(last),
                mib(first),
                mib(bound)
            ));
        }
        let (first, last) = (mean(|s| s.blocks, false), mean(|s| s.blocks, true));
        let bound = first * (1.0 + MEMORY_RATIO) + BLOCKS_SLACK as f64;
        let passed = last <= bound;
        report.checks.push(Check {
            name: "client memory flat: heap live blocks",
            figure: format!(
                "first third {first:.0} → last third {last:.0} ({:+.2} %)",
                (last - first) / first * 100.0
            ),
            bound: format!("last ≤ first × {:.2} + {BLOCKS_SLACK}", 1.0 + MEMORY_RATIO),
            passed,
        });
        if !passed {
            report.failures.push(format!(
                "memory grew: {last:.0} live blocks on average in the last third against \
                 {first:.0} in the first (bound {bound:.0})"
            ));
        }
    }

    fn mib(bytes: f64) -> String {
        format!("{:.2} MiB", bytes / (1 << 20) as f64)
    }

    /// The fleet shedder's slots all come back, well within a lease.
    async fn check_shedder(
        report: &mut Report,
        shedder: &FleetShedder<RedisUsage<Conn>>,
        probe: &Conn,
        key: &str,
    ) {
        let started = Instant::now();
        let mut in_use = u64::MAX;
        while started.elapsed() < Duration::from_secs(1) {
            match shedder.counter().in_use().await {
                Ok(n) => in_use = n,
                Err(e) => {
                    report.failures.push(format!("shedder in_use: {e}"));
                    return;
                }
            }
            if in_use == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut connection = probe.clone();
        let members: u64 = redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut connection)
            .await
            .expect("ZCARD");
        let passed = in_use == 0 && members == 0;
        report.checks.push(Check {
            name: "shedder slots returned (released or dropped)",
            figure: format!(
                "in use {in_use}, leases in Redis {members}, {} ms after the last request",
                started.elapsed().as_millis()
            ),
            bound: format!("0 within 1 s (a lease is {} s)", SHED_LEASE.as_secs()),
            passed,
        });
        if !passed {
            report.failures.push(format!(
                "shedder: {in_use} slots in use and {members} leases in `{key}` one second \
                 after the last request"
            ));
        }
    }

    /// Check 3: on fresh keys, every lease limiter's nodes take leases and close; then
    /// Redis counts what was admitted and holds no lease, and no node holds a permit
    /// of any key the soak used.
    async fn check_leases(report: &mut Report, leases: &[LeaseSet], probe: &Conn, keys: u64) {
        // The churn's leases first: one give-back per key held, which on a slow
        // machine could outlast the audit's window.
        let released = Instant::now();
        let mut credited_churn = 0;
        for set in leases {
            for node in &set.nodes {
                match node.release_all().await {
                    Ok(n) => credited_churn += n,
                    Err(e) => report
                        .failures
                        .push(format!("lease {}: release_all: {e}", set.kind)),
                }
            }
        }
        report.notes.push(format!(
            "release_all() on the {} lease nodes after the churn: {credited_churn} permits \
             credited back, {} ms (one give-back call per key with a lease to settle)",
            leases.len() * NODES,
            released.elapsed().as_millis()
        ));
        // The audit must fit in one window: start in the first two thirds of one.
        let window = LEASE_WINDOW.as_micros() as u64;
        let into = redis_micros(probe).await % window;
        if into > window * 2 / 3 {
            tokio::time::sleep(Duration::from_micros(window - into + 50_000)).await;
        }
        let before = redis_micros(probe).await;
        let audited = futures::future::join_all(leases.iter().map(audit)).await;
        let mut admitted = Vec::new();
        for (set, (counts, errors)) in leases.iter().zip(audited) {
            if errors > 0 {
                report.failures.push(format!(
                    "lease {}: {errors} audit requests failed",
                    set.kind
                ));
            }
            admitted.push(counts);
        }
        let mut credited = Vec::new();
        for set in leases {
            let mut sum = 0;
            for node in &set.nodes {
                match node.close().await {
                    Ok(n) => sum += n,
                    Err(e) => report
                        .failures
                        .push(format!("lease {}: close: {e}", set.kind)),
                }
            }
            credited.push(sum);
        }
        let after = redis_micros(probe).await;
        if before / window != after / window {
            report.failures.push(format!(
                "lease audit: inconclusive, it straddled a window ({} ms; the machine is \
                 too slow for a {} s window)",
                (after - before) / 1_000,
                LEASE_WINDOW.as_secs()
            ));
            return;
        }
        let index = before / window;

        for ((set, admitted), credited) in leases.iter().zip(&admitted).zip(credited) {
            let mut problems = Vec::new();
            let mut records = 0;
            // GCRA: credit the script declined to give back (µs), by design.
            let mut kept = 0;
            let node = &set.nodes[0];
            let mut connection = probe.clone();
            for (i, &n) in admitted.iter().enumerate() {
                let key = node.redis_key(&audit_key(set.kind, i));
                let fields: HashMap<String, String> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(&mut connection)
                    .await
                    .expect("HGETALL");
                let sorted: u64 = redis::cmd("EXISTS")
                    .arg(format!("{key}:leases"))
                    .query_async(&mut connection)
                    .await
                    .expect("EXISTS");
                let left = fields.keys().filter(|f| f.starts_with("l:")).count();
                records += left;
                if left > 0 || sorted > 0 {
                    problems.push(format!(
                        "{key}: {left} lease records and {sorted} sorted set left after close"
                    ));
                }
                let field = |name: &str| fields.get(name).and_then(|v| v.parse::<u64>().ok());
                if set.kind == "gcra" {
                    // The audit is far shorter than a permit's interval: an exact
                    // bucket owes `n` intervals less the time since the audit began.
                    let now = redis_micros(probe).await;
                    let debt = field("t").unwrap_or(0).saturating_sub(now);
                    let exact = (n * GCRA_INTERVAL).saturating_sub(now - before);
                    kept += debt.saturating_sub(n * GCRA_INTERVAL);
                    if debt < exact {
                        problems.push(format!(
                            "{key}: the bucket owes {debt} µs, less than an exact bucket's \
                             {exact} µs for the {n} permits admitted: credited more than \
                             was unused"
                        ));
                    }
                } else {
                    let count = if set.kind == "fixed_window" { "g" } else { "c" };
                    let (w, c) = (field("w"), field(count).unwrap_or(0));
                    let previous = field("p").unwrap_or(0);
                    if w != Some(index) || c != n || previous != 0 {
                        problems.push(format!(
                            "{key}: window {w:?} counts {c} (previous {previous}), {n} \
                             admitted in window {index}"
                        ));
                    }
                }
            }
            let mut held = 0;
            let mut tag = String::new();
            for node in &set.nodes {
                for id in 0..keys {
                    tag.clear();
                    let _ = write!(tag, "k{id}");
                    held += node.held(&tag);
                }
                for id in 0..HOT {
                    held += node.held(&format!("hot-{id}"));
                }
                for i in 0..AUDIT_KEYS {
                    held += node.held(&audit_key(set.kind, i));
                }
            }
            if held > 0 {
                problems.push(format!("{held} permits still held locally after close"));
            }
            let total: u64 = admitted.iter().sum();
            let exactness = if set.kind == "gcra" {
                format!(
                    "debt never below an exact bucket's; credit kept back {:.1} permits",
                    kept as f64 / GCRA_INTERVAL as f64
                )
            } else {
                "window counts = admitted".into()
            };
            report.checks.push(Check {
                name: match set.kind {
                    "fixed_window" => "leases returned: lease fixed window",
                    "sliding_counter" => "leases returned: lease sliding counter",
                    _ => "leases returned: lease gcra",
                },
                figure: format!(
                    "{AUDIT_KEYS} fresh keys × {NODES} nodes: {total} admitted, {credited} \
                     credited back by close(); lease records left {records}; held locally \
                     {held} ({} keys × {NODES} nodes); {exactness}; {} problems",
                    keys + HOT + AUDIT_KEYS as u64,
                    problems.len()
                ),
                bound: if set.kind == "gcra" {
                    "no record left; debt ≥ exact bucket's; held 0".into()
                } else {
                    "no record left; count = admitted; held 0".into()
                },
                passed: problems.is_empty(),
            });
            for problem in problems.into_iter().take(5) {
                report
                    .failures
                    .push(format!("lease {}: {problem}", set.kind));
            }
        }
    }

    fn audit_key(kind: &str, i: usize) -> String {
        format!("audit-{kind}-{i}")
    }

    /// Both nodes of `set` ask `AUDIT_ROUNDS` permits of each audit key in turn, as a
    /// burst (so that slices are large, and left partly unused): the permits admitted
    /// per key, and the requests that failed.
    async fn audit(set: &LeaseSet) -> (Vec<u64>, u64) {
        let tasks: Vec<_> = set
            .nodes
            .iter()
            .map(|node| {
                let node = node.clone();
                let kind = set.kind;
                tokio::spawn(async move {
                    let mut admitted = vec![0; AUDIT_KEYS];
                    let mut errors = 0;
                    // A look at every key first, which takes no lease: a full table
                    // forgets the slots whose leases ended, with their leases unsettled
                    // (by design), so every audit key must have its slot before any
                    // takes one.
                    for i in 0..AUDIT_KEYS {
                        if node.check(&audit_key(kind, i), 0).await.is_err() {
                            errors += 1;
                        }
                    }
                    for (i, count) in admitted.iter_mut().enumerate() {
                        let tag = audit_key(kind, i);
                        for _ in 0..AUDIT_ROUNDS {
                            match node.check(&tag, 1).await {
                                Ok(Ok(_)) => *count += 1,
                                Ok(Err(_)) => {}
                                Err(_) => errors += 1,
                            }
                        }
                        // Let the other node at the key.
                        tokio::task::yield_now().await;
                    }
                    (admitted, errors)
                })
            })
            .collect();
        let mut total = vec![0; AUDIT_KEYS];
        let mut errors = 0;
        for task in tasks {
            let (admitted, failed) = task.await.expect("an audit task");
            errors += failed;
            for (sum, n) in total.iter_mut().zip(admitted) {
                *sum += n;
            }
        }
        (total, errors)
    }

    /// Check 2: every key carries a TTL.
    async fn check_ttls(report: &mut Report, probe: &Conn) {
        let mut connection = probe.clone();
        let mut cursor: u64 = 0;
        let mut keys = 0u64;
        let mut without = Vec::new();
        let mut max_ttl = 0i64;
        let mut per_prefix: HashMap<String, u64> = HashMap::new();
        let mut records = 0u64;
        let mut record_permits = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1_000)
                .query_async(&mut connection)
                .await
                .expect("SCAN");
            cursor = next;
            if batch.is_empty() {
                if cursor == 0 {
                    break;
                }
                continue;
            }
            let mut pipe = redis::pipe();
            for key in &batch {
                pipe.cmd("PTTL").arg(key);
            }
            let ttls: Vec<i64> = pipe.query_async(&mut connection).await.expect("PTTL");
            for (key, ttl) in batch.iter().zip(ttls) {
                keys += 1;
                let prefix = key.split(':').next().unwrap_or("").to_owned();
                *per_prefix.entry(prefix).or_default() += 1;
                match ttl {
                    -1 => without.push(key.clone()),
                    ttl => max_ttl = max_ttl.max(ttl),
                }
            }
            // Lease records left by keys the tables forgot (they go with their hash).
            let hashes: Vec<&String> = batch
                .iter()
                .filter(|k| k.starts_with("soak-lease-") && !k.ends_with(":leases"))
                .collect();
            if !hashes.is_empty() {
                let mut pipe = redis::pipe();
                for key in &hashes {
                    pipe.cmd("HGETALL").arg(*key);
                }
                let all: Vec<HashMap<String, String>> =
                    pipe.query_async(&mut connection).await.unwrap_or_default();
                for fields in all {
                    for (field, value) in fields {
                        if field.starts_with("l:") {
                            records += 1;
                            record_permits += value
                                .split_whitespace()
                                .next()
                                .and_then(|v| v.parse::<u64>().ok())
                                .unwrap_or(0);
                        }
                    }
                }
            }
            if cursor == 0 {
                break;
            }
        }
        let mut prefixes: Vec<_> = per_prefix.into_iter().collect();
        prefixes.sort();
        let listing: Vec<String> = prefixes.iter().map(|(p, n)| format!("{p} {n}")).collect();
        report
            .notes
            .push(format!("keys in Redis at the end: {}", listing.join(", ")));
        report.notes.push(format!(
            "lease records still in Redis after close, every key: {records}, over \
             {record_permits} permits (keys a full table forgot give theirs back from a \
             task; one whose give-back failed keeps them until its hash's TTL)"
        ));
        let passed = without.is_empty();
        report.checks.push(Check {
            name: "every key has a TTL (SCAN + PTTL)",
            figure: format!(
                "{keys} keys, {} without a TTL, longest TTL {:.1} s",
                without.len(),
                max_ttl as f64 / 1_000.0
            ),
            bound: "none without".into(),
            passed,
        });
        if !passed {
            without.truncate(10);
            report
                .failures
                .push(format!("keys without a TTL: {}", without.join(", ")));
        }
    }

    impl Report {
        fn print(&self, args: &Args) {
            println!(
                "\nsoak: {} s, {ACTIVE} keys live of a stream of {ARRIVALS}/s, {HOT} hot keys \
                 ({HOT_PERCENT} % of requests), tables of {MAX_KEYS} keys, warm-up {} s",
                args.seconds,
                args.warm_up().as_secs()
            );
            println!();
            println!(
                "| t (s) | heap live | blocks | in blocks ≥ 64 KiB | RSS | lease keys held | batched keys | cache entries | Redis keys | Redis used_memory | decisions |"
            );
            println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for s in &self.samples {
                println!(
                    "| {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    s.at.as_secs_f64(),
                    mib(s.live as f64),
                    s.blocks,
                    mib(s.large as f64),
                    s.rss
                        .map_or_else(|| "–".into(), |kib| mib(kib as f64 * 1024.0)),
                    s.lease_keys,
                    s.batched_keys,
                    s.cached,
                    s.redis_keys,
                    mib(s.redis_memory as f64),
                    s.decisions
                );
            }
            println!();
            println!("| component | decisions | admitted | errors |");
            println!("|---|---:|---:|---:|");
            for c in &self.components {
                let first = c
                    .first_error
                    .as_ref()
                    .map_or(String::new(), |e| format!(" (first: {e})"));
                println!(
                    "| {} | {} | {} | {}{first} |",
                    c.name, c.decisions, c.admitted, c.errors
                );
            }
            println!();
            println!("| check | figure | bound | result |");
            println!("|---|---|---|---|");
            for c in &self.checks {
                println!(
                    "| {} | {} | {} | {} |",
                    c.name,
                    c.figure,
                    c.bound,
                    if c.passed { "pass" } else { "**FAIL**" }
                );
            }
            println!();
            for note in &self.notes {
                println!("- {note}");
            }
        }
    }
}
