//! Decisions per second through Redis: C concurrent tokio tasks, each looping on one
//! GCRA decision for a random key, pipelined over one shared connection (or a few),
//! by `FCALL` of the store's library and by `EVALSHA` of its script, next to
//! `redis-benchmark` running a minimal GCRA script and the store's own calls at the
//! same concurrency and pipelining.
//!
//! Starts its own `redis-server` on a free port (never the one on 6379). For each
//! concurrency C (16, 64, 256) and connection count k (1, 4):
//!
//! - `limiter`: C tasks on a 2-worker multi-thread runtime loop on
//!   `SharedLimiter::try_acquire(key, 1)` over k `RedisStore`s (each its own
//!   `ConnectionManager`, as `RedisStore::connect` builds it; task i uses store i % k);
//! - `execute`: the same with `Store::execute` on a `Request` the task builds (without
//!   the `Vec` of checks that `SharedLimiter` builds per call);
//! - each by both paths: `FCALL` (the store as `connect` makes it, on a server with
//!   Functions) and `EVALSHA` (the same stores, `without_functions`): before and after
//!   Functions, in one run;
//! - `redis-benchmark -c k -P C/k`: k connections, each sending a batch of C/k
//!   requests and waiting for all their replies, so at most C are in flight, as with
//!   C tasks on k multiplexed connections. It runs, with the store's arguments
//!   (`RedisStore::script_call`, the key's tag replaced by `__rand_int__`), the
//!   minimal GCRA script (`MINIMAL_GCRA`: `TIME`, `GET`, `SET PX`; the ratio column's
//!   base), then the very `FCALL` and `EVALSHA` the store sends.
//!
//! Keys are `bench:{NNNNNNNNNNNN}`, 12 digits drawn uniformly from 100,000 by both
//! clients. The rule is 1,000 per second with a burst of 1,000 per key, so at these
//! rates every decision is admitted and writes its key (`SET ... PX`). The server is
//! emptied (`FLUSHALL`, scripts and functions kept) before every run.
//!
//! Every call's latency (from building the request to the decision, `Instant`) is kept
//! and sorted for p50/p99; `redis-benchmark` reports its own, from sending a batch to
//! each reply. CPU time per decision: this process's from `/proc/self/stat` (10 ms
//! ticks), redis-benchmark's as a waited-for child, redis-server's from `INFO cpu`.
//! Unless `--no-pin`, redis-server runs on a core of its own, the last, and this
//! process and its `redis-benchmark` children on the others (`taskset`, util-linux),
//! for every table, as production gives Redis a core of its own (as
//! `tollgate-rls/benches/load.rs` does): otherwise the server, the client under test
//! and `redis-benchmark` share the machine's cores, and on 2 cores what a client spends
//! is taken from the server. The tokio runtime has as many workers as the client has
//! cores (`--workers N` to choose).
//!
//! Each configuration runs `--repeat` times (default 3), ours and redis-benchmark in
//! turn, and the run with the median decisions/s of each client is shown; the ratio
//! is of the medians, to the first peer (`--peers`, the minimal script by default).
//!
//! Then coalesced (`RedisStore::coalescing(B)`, one connection), by each path: C tasks
//! on `Store::execute` over one store whose concurrent requests go up to B per call,
//! with the mean requests per call (`INFO commandstats`), next to `redis-benchmark
//! -c 1 -P 1` running the store's batch call of R requests (`batch_script_call`, R
//! the mean per call of our run rounded, each key `__rand_int__`) by the same path,
//! its calls/s times R.
//!
//! Last, the server's ceiling: redis-benchmark alone (one connection, 64 pipelined)
//! with the same arguments on `return 1` (a script and a function), on the minimal
//! GCRA script, on the store's script without its driver (what every call defines),
//! on the store's script (the one it sends GCRA requests to) and its library, on both
//! with n written `01` (the general driver rather than the inline GCRA acquire), and
//! on the script of every kind, with the server's time per call (`CONFIG RESETSTAT`,
//! then `INFO commandstats`' `usec_per_call`). They take turns, `--repeat` rounds;
//! the median of each is shown, and the ratios of the store's script and library to
//! the minimal script.
//!
//! Run `cargo bench -p tollgate-benches --features redis --bench redis_throughput`
//! (about 10 min on 2 cores). Options after `--`: `--secs S` per run (default 2), `--repeat R`,
//! `--tasks 16,64,256`, `--connections 1,4`, `--workers N`, `--no-pin`, `--limiter-only`,
//! `--execute-only`, `--paths fcall,evalsha`, `--peers minimal,fcall,evalsha` (the
//! first is the ratio's base), `--no-ceiling`, `--batches 64,256` (coalesced runs'
//! B), `--no-coalesced`, `--coalesced-only`, `--ceiling-only`, `--extra-script NAME=FILE` and
//! `--extra-library NAME=FILE` (more ceiling cases, e.g. another version's script or
//! library, each also with n as `01`).

#[cfg(not(feature = "redis"))]
fn main() {
    eprintln!(
        "redis_throughput needs the redis feature: \
         cargo bench -p tollgate-benches --features redis --bench redis_throughput"
    );
}

#[cfg(feature = "redis")]
fn main() {
    bench::main();
}

#[cfg(feature = "redis")]
#[path = "../tests/common/redis.rs"]
#[allow(dead_code)]
mod redis_harness;

/// The system allocator, counting allocations: a figure per decision that does not
/// depend on how busy the machine is.
#[cfg(feature = "redis")]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct Counting;

    pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            unsafe {
                ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
                System.alloc(layout)
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            unsafe {
                ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
                System.realloc(ptr, layout, new_size)
            }
        }
    }

    /// Allocations (and reallocations) so far, by every thread.
    pub fn allocations() -> u64 {
        ALLOCATIONS.load(Ordering::Relaxed)
    }
}

#[cfg(feature = "redis")]
#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

#[cfg(feature = "redis")]
mod bench {
    use std::fmt::Write as _;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use redis::aio::{ConnectionManager, MultiplexedConnection};
    use tollgate::Quota;
    use tollgate::algorithm::Gcra;
    use tollgate::store::{Check, Op, RedisStore, Request, Rule, RuleKind, SharedLimiter, Store};

    use super::counting::allocations;
    use super::redis_harness::{RedisServer, require_redis};

    const PREFIX: &str = "bench";
    /// Keys drawn from; `redis-benchmark -r` draws the same 12-digit numbers.
    const KEYSPACE: u64 = 100_000;
    /// Untimed calls before each run of ours: connections busy, script loaded.
    const WARM_UP: Duration = Duration::from_millis(500);
    /// Attempts at one redis-benchmark run: on a loaded machine it sometimes drops
    /// its connection at start-up ("All clients disconnected").
    const PEER_ATTEMPTS: usize = 3;

    /// What the tasks call.
    #[derive(Clone, Copy, PartialEq)]
    enum Api {
        Limiter,
        Execute,
    }

    impl Api {
        fn name(self) -> &'static str {
            match self {
                Api::Limiter => "tollgate limiter",
                Api::Execute => "tollgate execute",
            }
        }
    }

    /// How the store calls its Lua: the library by `FCALL` (the default where the
    /// server has Functions), or the scripts by `EVALSHA` (`without_functions`, the
    /// path before Functions and on Redis 6).
    #[derive(Clone, Copy, PartialEq)]
    enum Path {
        Fcall,
        Evalsha,
    }

    impl Path {
        fn name(self) -> &'static str {
            match self {
                Path::Fcall => "FCALL",
                Path::Evalsha => "EVALSHA",
            }
        }

        fn store(self, store: &RedisStore<ConnectionManager>) -> RedisStore<ConnectionManager> {
            match self {
                Path::Fcall => store.clone(),
                Path::Evalsha => store.clone().without_functions(),
            }
        }

        /// The command redis-benchmark sends for the store's call: `FCALL` of the
        /// function or `EVALSHA` of the script, then `args`.
        fn command(self, args: &[String]) -> Vec<String> {
            let mut command = match self {
                Path::Fcall => vec!["FCALL".to_owned(), function_name().to_owned()],
                Path::Evalsha => vec!["EVALSHA".to_owned(), gcra_script_hash().to_owned()],
            };
            command.extend(args.iter().cloned());
            command
        }
    }

    /// What redis-benchmark runs next to our clients, at the same concurrency.
    #[derive(Clone, Copy, PartialEq)]
    enum Peer {
        /// The minimal GCRA script (`MINIMAL_GCRA`): the issue's target.
        Minimal,
        /// The very call the store sends, by either path.
        Store(Path),
    }

    impl Peer {
        fn name(self) -> &'static str {
            match self {
                Peer::Minimal => "minimal GCRA script",
                Peer::Store(Path::Fcall) => "the store's FCALL",
                Peer::Store(Path::Evalsha) => "the store's EVALSHA",
            }
        }
    }

    /// One run's figures.
    #[derive(Clone)]
    struct Figures {
        per_second: f64,
        p50: Duration,
        p99: Duration,
        /// Denied decisions, where the client sees them (not redis-benchmark).
        denied: Option<u64>,
        /// CPU time of the client (this process, or redis-benchmark) per decision.
        client_cpu: Duration,
        /// CPU time of redis-server per decision.
        server_cpu: Duration,
        /// Heap allocations of this process per decision (not redis-benchmark's).
        allocations: Option<f64>,
        /// Decisions per call (`FCALL` or `EVALSHA`), for our runs.
        per_call: Option<f64>,
    }

    struct Settings {
        secs: f64,
        repeat: usize,
        tasks: Vec<usize>,
        connections: Vec<usize>,
        /// Tokio workers; `None`: one per core the client may run on.
        workers: Option<usize>,
        /// redis-server on a core of its own, the clients on the others.
        pin: bool,
        apis: Vec<Api>,
        paths: Vec<Path>,
        peers: Vec<Peer>,
        ceiling: bool,
        /// More ceiling cases: (name, script or library source), e.g. another
        /// version's, to compare in the same run.
        extra: Vec<(String, Extra)>,
        batches: Vec<usize>,
        uncoalesced: bool,
    }

    fn settings() -> Settings {
        let mut settings = Settings {
            secs: 2.0,
            repeat: 3,
            tasks: vec![16, 64, 256],
            connections: vec![1, 4],
            workers: None,
            pin: true,
            apis: vec![Api::Limiter, Api::Execute],
            paths: vec![Path::Fcall, Path::Evalsha],
            peers: vec![
                Peer::Minimal,
                Peer::Store(Path::Fcall),
                Peer::Store(Path::Evalsha),
            ],
            ceiling: true,
            extra: Vec::new(),
            batches: vec![64, 256],
            uncoalesced: true,
        };
        let list = |v: Option<String>, what: &str| -> Vec<usize> {
            v.unwrap_or_default()
                .split(',')
                .map(|x| x.trim().parse().unwrap_or_else(|_| panic!("{what}")))
                .collect()
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--secs" => {
                    settings.secs = args.next().and_then(|v| v.parse().ok()).expect("--secs S")
                }
                "--repeat" => settings.repeat = list(args.next(), "--repeat R")[0].max(1),
                "--tasks" => settings.tasks = list(args.next(), "--tasks 16,64"),
                "--connections" => settings.connections = list(args.next(), "--connections 1,4"),
                "--workers" => settings.workers = Some(list(args.next(), "--workers N")[0]),
                "--no-pin" => settings.pin = false,
                "--limiter-only" => settings.apis = vec![Api::Limiter],
                "--execute-only" => settings.apis = vec![Api::Execute],
                "--paths" => {
                    let text = args.next().unwrap_or_default();
                    settings.paths = text
                        .split(',')
                        .map(|p| match p.trim() {
                            "fcall" => Path::Fcall,
                            "evalsha" => Path::Evalsha,
                            _ => panic!("--paths fcall,evalsha"),
                        })
                        .collect();
                }
                "--peers" => {
                    let text = args.next().unwrap_or_default();
                    settings.peers = text
                        .split(',')
                        .map(|p| match p.trim() {
                            "minimal" => Peer::Minimal,
                            "fcall" => Peer::Store(Path::Fcall),
                            "evalsha" => Peer::Store(Path::Evalsha),
                            _ => panic!("--peers minimal,fcall,evalsha"),
                        })
                        .collect();
                }
                "--no-ceiling" => settings.ceiling = false,
                "--extra-script" | "--extra-library" => {
                    let usage = "--extra-script NAME=FILE, --extra-library NAME=FILE";
                    let spec = args.next().expect(usage);
                    let (name, file) = spec.split_once('=').expect(usage);
                    let source = std::fs::read_to_string(file).expect("a readable file");
                    let extra = if arg == "--extra-script" {
                        Extra::Script(source)
                    } else {
                        Extra::Library(source)
                    };
                    settings.extra.push((name.to_owned(), extra));
                }
                "--batches" => settings.batches = list(args.next(), "--batches 64,256"),
                "--no-coalesced" => settings.batches.clear(),
                "--coalesced-only" => {
                    settings.uncoalesced = false;
                    settings.ceiling = false;
                }
                "--ceiling-only" => {
                    settings.uncoalesced = false;
                    settings.batches.clear();
                }
                // `cargo bench` passes `--bench`.
                _ => {}
            }
        }
        settings
    }

    /// The hash of the script the store sends a GCRA request to.
    fn gcra_script_hash() -> &'static str {
        RedisStore::<ConnectionManager>::script_hash_for(&[RuleKind::Gcra])
    }

    /// The function the store calls where the server has Functions.
    fn function_name() -> &'static str {
        RedisStore::<ConnectionManager>::function_name()
    }

    /// The SHA1 of `MINIMAL_GCRA`.
    fn minimal_hash() -> String {
        redis::Script::new(MINIMAL_GCRA).get_hash().to_owned()
    }

    fn rule() -> Rule {
        let quota = Quota::per_second(1_000).unwrap().burst(1_000).unwrap();
        Rule::from(Gcra::new(quota))
    }

    /// Random 12-digit keys below `KEYSPACE` from a xorshift64*: no dependency.
    struct Keys(u64);

    impl Keys {
        fn next(&mut self, buf: &mut String) {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let n = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % KEYSPACE;
            buf.clear();
            write!(buf, "{n:012}").unwrap();
        }
    }

    pub fn main() {
        let Some(()) = require_redis() else { return };
        if Command::new("redis-benchmark")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!(
                "note: skipping: redis-benchmark not found; it comes with redis-server \
                 (apt-get install -y redis-server)"
            );
            return;
        }
        let settings = settings();
        let server = RedisServer::start();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Pinned before the runtime starts its workers, which inherit it, as do the
        // redis-benchmark children.
        let pinned = settings.pin && cores >= 2 && {
            let pinning = Pinning::new(cores);
            server_pid(server.port()).is_some_and(|pid| pinning.redis(pid))
                && pinning.client(std::process::id())
        };
        let workers = settings
            .workers
            .unwrap_or(if pinned { cores - 1 } else { cores })
            .max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .unwrap();
        let max_connections = settings.connections.iter().copied().max().unwrap_or(1);
        let (stores, mut monitor) = runtime.block_on(async {
            let mut stores = Vec::new();
            for _ in 0..max_connections {
                stores.push(RedisStore::connect(&server.url(), PREFIX).await.unwrap());
            }
            let client = redis::Client::open(server.url()).unwrap();
            (
                stores,
                client.get_multiplexed_async_connection().await.unwrap(),
            )
        });
        let rule = rule();
        // The arguments after the function or script, the tag `__rand_int__`.
        let args = {
            let checks = [Check::new("", &rule)];
            let request = Request::new("__rand_int__", &checks, Op::Acquire(1));
            stores[0].script_call(&request).unwrap()
        };
        let command = Path::Evalsha.command(&args);
        let version = Command::new("redis-server")
            .arg("--version")
            .output()
            .unwrap();
        println!(
            "server: {} on 127.0.0.1:{}; {} CPUs, load average {}",
            String::from_utf8_lossy(&version.stdout).trim_end(),
            server.port(),
            cores,
            load_average()
        );
        println!(
            "{}",
            if pinned {
                let clients = match cores {
                    2 => "core 0".to_owned(),
                    _ => format!("cores 0-{}", cores - 2),
                };
                format!(
                    "pinned (taskset): redis-server on core {}, this process and \
                     redis-benchmark on {clients}",
                    cores - 1
                )
            } else {
                "not pinned: redis-server and the clients share every core".to_owned()
            }
        );
        println!(
            "client: tokio multi-thread runtime with {} workers; GCRA 1000/s, burst 1000, \
             {KEYSPACE} random keys; {} s per run after {} ms of warm-up; median of {}",
            workers,
            settings.secs,
            WARM_UP.as_millis(),
            settings.repeat
        );
        println!("redis-benchmark runs: {}", shell_words(&command));
        println!(
            "  and the same arguments on FCALL {} and on EVALSHA {} (the minimal script)",
            function_name(),
            minimal_hash()
        );
        // The script the store sends GCRA requests to, and the minimal one, which
        // redis-benchmark runs too (the library is loaded by `connect`).
        for source in [
            RedisStore::<ConnectionManager>::script_source_for(&[RuleKind::Gcra]),
            MINIMAL_GCRA,
        ] {
            let _: String = runtime
                .block_on(
                    redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(source)
                        .query_async(&mut monitor),
                )
                .unwrap();
        }
        if settings.uncoalesced {
            uncoalesced(
                &settings,
                &runtime,
                &server,
                &stores,
                &mut monitor,
                &rule,
                &args,
            );
        }
        if !settings.batches.is_empty() {
            runtime.block_on(coalesced(&settings, &server, &rule, &mut monitor));
        }
        if settings.ceiling {
            runtime.block_on(ceiling(
                &mut monitor,
                server.port(),
                &args,
                &settings.extra,
                settings.repeat,
            ));
        }
        println!();
        println!("load average at the end: {}", load_average());
    }

    /// The table of one decision per call.
    fn uncoalesced(
        settings: &Settings,
        runtime: &tokio::runtime::Runtime,
        server: &RedisServer,
        stores: &[RedisStore<ConnectionManager>],
        monitor: &mut MultiplexedConnection,
        rule: &Rule,
        args: &[String],
    ) {
        let base = settings.peers.first().copied().unwrap_or(Peer::Minimal);
        println!();
        println!(
            "| tasks C | connections k | client | decisions/s | p50 | p99 | denied \
             | client CPU/decision | client allocations/decision | server CPU/decision \
             | ratio to redis-benchmark, {} |",
            base.name()
        );
        println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let length = Duration::from_secs_f64(settings.secs);
        let clients: Vec<(Api, Path)> = settings
            .apis
            .iter()
            .flat_map(|&api| settings.paths.iter().map(move |&path| (api, path)))
            .collect();
        let minimal = {
            let mut command = vec!["EVALSHA".to_owned(), minimal_hash()];
            command.extend(args.iter().cloned());
            command
        };
        for &tasks in &settings.tasks {
            for &k in &settings.connections {
                if tasks % k != 0 {
                    continue;
                }
                let mut ours: Vec<Vec<Figures>> = vec![Vec::new(); clients.len()];
                let mut peers: Vec<Vec<Figures>> = vec![Vec::new(); settings.peers.len()];
                for _ in 0..settings.repeat {
                    let mut fastest: f64 = 0.0;
                    for (i, &(api, path)) in clients.iter().enumerate() {
                        let stores: Vec<_> = stores[..k].iter().map(|s| path.store(s)).collect();
                        runtime.block_on(flush(monitor));
                        let f = runtime.block_on(run(&stores, rule, api, tasks, length, monitor));
                        fastest = fastest.max(f.per_second);
                        ours[i].push(f);
                    }
                    // About as long as our runs.
                    let requests = ((fastest * settings.secs) as u64).max(20_000);
                    for (i, &peer) in settings.peers.iter().enumerate() {
                        let command = match peer {
                            Peer::Minimal => minimal.clone(),
                            Peer::Store(path) => path.command(args),
                        };
                        runtime.block_on(flush(monitor));
                        peers[i].push(runtime.block_on(redis_benchmark(
                            monitor,
                            server.port(),
                            &command,
                            (k, tasks / k),
                            requests,
                        )));
                    }
                }
                let peers: Vec<Figures> = peers.into_iter().map(median).collect();
                let base = peers.first().map_or(f64::NAN, |p| p.per_second);
                for (&(api, path), figures) in clients.iter().zip(ours) {
                    let f = median(figures);
                    let ratio = format!("**{:.2}**", f.per_second / base);
                    let name = format!("{}, {}", api.name(), path.name());
                    row(tasks, k, &name, &f, &ratio);
                }
                for (peer, f) in settings.peers.iter().zip(&peers) {
                    let name = format!("redis-benchmark -c {k} -P {}, {}", tasks / k, peer.name());
                    let ratio = format!("{:.2}", f.per_second / base);
                    row(tasks, k, &name, f, &ratio);
                }
            }
        }
    }

    /// The table of coalesced runs: C tasks on one coalescing store, against
    /// redis-benchmark sending the same batch calls one at a time.
    async fn coalesced(
        settings: &Settings,
        server: &RedisServer,
        rule: &Rule,
        monitor: &mut MultiplexedConnection,
    ) {
        println!();
        println!(
            "Coalesced: one connection, `RedisStore::coalescing(B)`; redis-benchmark -c 1 -P 1 \
             on the batch call of R requests (R = our mean requests per call), calls/s × R"
        );
        println!();
        println!(
            "| tasks C | B | client | decisions/s | requests/call | p50 | p99 | denied \
             | client CPU/decision | server CPU/decision | ratio to redis-benchmark |"
        );
        println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let length = Duration::from_secs_f64(settings.secs);
        let checks = [Check::new("", rule)];
        for &tasks in &settings.tasks {
            for (&batch, &path) in settings
                .batches
                .iter()
                .flat_map(|b| settings.paths.iter().map(move |p| (b, p)))
            {
                let connected = RedisStore::connect(&server.url(), PREFIX).await.unwrap();
                let store = path.store(&connected).coalescing(batch);
                let mut ours = Vec::new();
                let mut peer = Vec::new();
                for _ in 0..settings.repeat {
                    flush(monitor).await;
                    let stores = [store.clone()];
                    let f = run(&stores, rule, Api::Execute, tasks, length, monitor).await;
                    let per_call = f.per_call.unwrap_or(1.0).round().max(1.0) as usize;
                    let requests: Vec<Request<'_>> = (0..per_call)
                        .map(|_| Request::new("__rand_int__", &checks, Op::Acquire(1)))
                        .collect();
                    let call = path.command(&store.batch_script_call(&requests).unwrap());
                    let calls =
                        ((f.per_second * settings.secs) as u64 / per_call as u64).max(2_000);
                    ours.push(f);
                    flush(monitor).await;
                    let mut p = redis_benchmark(monitor, server.port(), &call, (1, 1), calls).await;
                    p.per_second *= per_call as f64;
                    p.client_cpu /= per_call as u32;
                    p.server_cpu /= per_call as u32;
                    p.per_call = Some(per_call as f64);
                    peer.push(p);
                }
                let (f, p) = (median(ours), median(peer));
                let ratio = format!("**{:.2}**", f.per_second / p.per_second);
                let name = format!("tollgate execute, {}", path.name());
                coalesced_row(tasks, batch, &name, &f, &ratio);
                let name = format!("redis-benchmark -c 1 -P 1, {}", path.name());
                coalesced_row(tasks, batch, &name, &p, "1.00");
            }
        }
    }

    fn coalesced_row(tasks: usize, batch: usize, client: &str, f: &Figures, ratio: &str) {
        let denied = f.denied.map_or("n/a".to_owned(), |d| d.to_string());
        let per_call = f.per_call.map_or("n/a".to_owned(), |r| format!("{r:.1}"));
        println!(
            "| {tasks} | {batch} | {client} | {:.0} | {per_call} | {} | {} | {denied} | {} | {} | {ratio} |",
            f.per_second,
            micros(f.p50),
            micros(f.p99),
            micros(f.client_cpu),
            micros(f.server_cpu),
        );
    }

    /// The same GCRA decision with nothing but what any such script needs: the
    /// server's time, the state read, the state written with a TTL, five integers
    /// back. ARGV as the store sends it: `acquire n max_wait now gcra 3 interval
    /// tolerance burst`.
    const MINIMAL_GCRA: &str = "\
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local n, interval, tolerance = tonumber(ARGV[2]), tonumber(ARGV[7]), tonumber(ARGV[8])
        local stored = redis.call('GET', KEYS[1])
        local tat = math.max(stored and tonumber(stored) or 0, now) + n * interval
        if tat - tolerance > now then
          return {0, tonumber(ARGV[9]), 0, 0, tat - tolerance - now}
        end
        redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
        return {1, tonumber(ARGV[9]), 0, tat - now, 0}";

    /// What the server alone can do, with a client that costs nearly nothing
    /// (redis-benchmark, one connection, 64 pipelined): the same call on scripts and
    /// functions that do less than the store's, on the store's library and scripts,
    /// and on both with n written `01` (which the inline GCRA acquire leaves to the
    /// general driver), with the server's time per call (`INFO commandstats`), in
    /// `repeat` rounds taking turns.
    async fn ceiling(
        monitor: &mut MultiplexedConnection,
        port: u16,
        args: &[String],
        extra: &[(String, Extra)],
        repeat: usize,
    ) {
        let store = RedisStore::<ConnectionManager>::script_source_for(&[RuleKind::Gcra]);
        // The store's script with its driver cut off: the cost of defining what it
        // defines, which each call pays before deciding anything.
        // (From the prelude: the inline GCRA acquire before it would return first.)
        let start = store.find("-- tollgate: every rule").unwrap_or(0);
        let definitions = store
            .find("-- The driver:")
            .map(|at| format!("{}\nreturn {{1, 1, 1, 1, 1}}\n", &store[start..at]));
        // The general driver's path: n as "01", not one digit.
        let mut general = args.to_vec();
        let n = general
            .iter()
            .position(|a| a == "acquire")
            .expect("an acquire")
            + 1;
        general[n] = format!("0{}", general[n]);
        // A function that returns 1: what an FCALL costs before any work.
        let one = "tollgate_bench_return_1";
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(format!(
                "#!lua name={one}\nredis.register_function('{one}', function() return 1 end)\n"
            ))
            .query_async(monitor)
            .await
            .unwrap();
        let mut cases: Vec<(String, Code, &[String])> = vec![
            (
                "EVALSHA `return 1`".into(),
                Code::Script("return 1".to_owned()),
                args,
            ),
            ("FCALL `return 1`".into(), Code::Function(one.into()), args),
            (
                MINIMAL_NAME.into(),
                Code::Script(MINIMAL_GCRA.to_owned()),
                args,
            ),
        ];
        if let Some(definitions) = definitions {
            cases.push((
                "the store's script, definitions only".into(),
                Code::Script(definitions),
                args,
            ));
        }
        let library = Code::Function(function_name().into());
        cases.push((STORE_NAME.into(), Code::Script(store.to_owned()), args));
        cases.push((LIBRARY_NAME.into(), library.clone(), args));
        cases.push((
            "the store's script, general path (n as `01`)".into(),
            Code::Script(store.to_owned()),
            &general[..],
        ));
        cases.push((
            "the store's library, general path (n as `01`)".into(),
            library,
            &general[..],
        ));
        cases.push((
            "the script of every kind".into(),
            Code::Script(RedisStore::<ConnectionManager>::script_source().to_owned()),
            args,
        ));
        for (name, extra) in extra {
            let code = match extra {
                Extra::Script(source) => Code::Script(source.clone()),
                Extra::Library(source) => {
                    let _: String = redis::cmd("FUNCTION")
                        .arg("LOAD")
                        .arg("REPLACE")
                        .arg(source)
                        .query_async(monitor)
                        .await
                        .unwrap();
                    // A library of tollgate's registers a function named as itself.
                    let first = source.lines().next().unwrap_or_default();
                    let library = first.strip_prefix("#!lua name=").expect("a shebang");
                    Code::Function(library.trim().to_owned())
                }
            };
            cases.push((name.clone(), code.clone(), args));
            cases.push((
                format!("{name}, general path (n as `01`)"),
                code,
                &general[..],
            ));
        }
        // Per case: decisions/s, the server's µs per call, and of those the µs in the
        // commands the Lua calls (`TIME`, `GET`, `SET`, `DEL`, timed on their own).
        let mut runs: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> =
            vec![(Vec::new(), Vec::new(), Vec::new()); cases.len()];
        for _ in 0..repeat {
            for (i, (_, code, args)) in cases.iter().enumerate() {
                let mut call = match code {
                    Code::Script(script) => {
                        let hash: String = redis::cmd("SCRIPT")
                            .arg("LOAD")
                            .arg(script)
                            .query_async(monitor)
                            .await
                            .unwrap();
                        vec!["EVALSHA".to_owned(), hash]
                    }
                    Code::Function(name) => vec!["FCALL".to_owned(), name.clone()],
                };
                call.extend(args.iter().cloned());
                flush(monitor).await;
                let () = redis::cmd("CONFIG")
                    .arg("RESETSTAT")
                    .query_async(monitor)
                    .await
                    .unwrap();
                let f = redis_benchmark(monitor, port, &call, (1, 64), 200_000).await;
                let per_call = command_stat(monitor, &call[0], "usec_per_call").await;
                let calls = command_stat(monitor, &call[0], "calls").await;
                let mut inner = 0.0;
                for command in ["time", "get", "set", "del"] {
                    inner += command_stat(monitor, command, "usec").await;
                }
                runs[i].0.push(f.per_second);
                runs[i].1.push(per_call);
                runs[i].2.push(inner / calls.max(1.0));
            }
        }
        let middle = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!();
        println!(
            "Server ceiling: redis-benchmark -c 1 -P 64, the same arguments, other scripts \
             and functions; median of {repeat} rounds taking turns"
        );
        println!();
        println!(
            "| script or function | decisions/s | server time per call (`usec_per_call`) \
             | of which in TIME, GET, SET, DEL | rounds |"
        );
        println!("|---|---:|---:|---:|---|");
        for ((name, ..), (per_second, per_call, inner)) in cases.iter().zip(&runs) {
            let rounds: Vec<String> = per_call.iter().map(|us| format!("{us:.2}")).collect();
            println!(
                "| {name} | {:.0} | {:.2} µs | {:.2} µs | {} |",
                middle(per_second),
                middle(per_call),
                middle(inner),
                rounds.join(", ")
            );
        }
        let rounds_of = |name: &str| &runs[cases.iter().position(|c| c.0 == name).unwrap()].1;
        let minimal = rounds_of(MINIMAL_NAME);
        for (name, target) in [(STORE_NAME, "≤ 1.25×"), (LIBRARY_NAME, "≤ 1.00×")] {
            let rounds = rounds_of(name);
            let ratios: Vec<String> = rounds
                .iter()
                .zip(minimal)
                .map(|(ours, minimal)| format!("{:.2}", ours / minimal))
                .collect();
            println!();
            println!(
                "server time per decision, {name} over the minimal script: **{:.2}×** \
                 (medians; per round {}; target {target})",
                middle(rounds) / middle(minimal),
                ratios.join(", ")
            );
        }
    }

    /// What a ceiling case calls.
    #[derive(Clone)]
    enum Code {
        /// A script, by `EVALSHA` once loaded.
        Script(String),
        /// A loaded function, by `FCALL`.
        Function(String),
    }

    /// A ceiling case from a file.
    enum Extra {
        /// A script's source.
        Script(String),
        /// A library's source, whose function is named as the library.
        Library(String),
    }

    const MINIMAL_NAME: &str = "minimal GCRA: TIME, GET, SET PX (EVALSHA)";
    const STORE_NAME: &str = "the store's script (GCRA's, EVALSHA)";
    const LIBRARY_NAME: &str = "the store's library (FCALL)";

    /// CPU affinity by role, set with `taskset` (util-linux) as
    /// `tollgate-rls/benches/load.rs` sets it: redis-server on the last core, the
    /// clients on the others.
    struct Pinning {
        redis: String,
        others: String,
    }

    impl Pinning {
        fn new(cores: usize) -> Pinning {
            let cores = cores.min(64);
            let all = if cores == 64 {
                u64::MAX
            } else {
                (1u64 << cores) - 1
            };
            let redis = 1u64 << (cores - 1);
            Pinning {
                redis: format!("{redis:x}"),
                others: format!("{:x}", all & !redis),
            }
        }

        /// Pins every thread of `pid`; false (and says so) when `taskset` fails.
        fn set(mask: &str, pid: u32) -> bool {
            let done = Command::new("taskset")
                .args(["-a", "-p", mask, &pid.to_string()])
                .stdout(std::process::Stdio::null())
                .status();
            let pinned = done.is_ok_and(|s| s.success());
            if !pinned {
                eprintln!("taskset -a -p {mask} {pid} failed: process {pid} is not pinned");
            }
            pinned
        }

        fn redis(&self, pid: u32) -> bool {
            Pinning::set(&self.redis, pid)
        }

        fn client(&self, pid: u32) -> bool {
            Pinning::set(&self.others, pid)
        }
    }

    /// The pid of the redis-server listening on `port`, from `/proc`.
    fn server_pid(port: u16) -> Option<u32> {
        let suffix = format!(":{port}");
        std::fs::read_dir("/proc").ok()?.find_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline);
            let mut words = cmdline.split(|c: char| c == '\0' || c.is_whitespace());
            let is_redis = words.next().is_some_and(|w| w.ends_with("redis-server"));
            (is_redis && words.any(|w| w.ends_with(&suffix))).then_some(pid)
        })
    }

    /// The run with the median decisions/s.
    fn median(mut runs: Vec<Figures>) -> Figures {
        runs.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        runs[runs.len() / 2].clone()
    }

    fn row(tasks: usize, k: usize, client: &str, f: &Figures, ratio: &str) {
        let denied = f.denied.map_or("n/a".to_owned(), |d| d.to_string());
        let allocations = f
            .allocations
            .map_or("n/a".to_owned(), |a| format!("{a:.1}"));
        println!(
            "| {tasks} | {k} | {client} | {:.0} | {} | {} | {denied} | {} | {allocations} | {} \
             | {ratio} |",
            f.per_second,
            micros(f.p50),
            micros(f.p99),
            micros(f.client_cpu),
            micros(f.server_cpu),
        );
    }

    fn micros(d: Duration) -> String {
        let us = d.as_secs_f64() * 1e6;
        if us < 100.0 {
            format!("{us:.1} µs")
        } else {
            format!("{us:.0} µs")
        }
    }

    fn shell_words(args: &[String]) -> String {
        let quoted: Vec<String> = args
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains(['{', '}']) {
                    format!("'{a}'")
                } else {
                    a.clone()
                }
            })
            .collect();
        quoted.join(" ")
    }

    fn load_average() -> String {
        let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// User + system CPU time of this process, or of its waited-for children, from
    /// `/proc/self/stat` (in clock ticks, 100 per second on Linux).
    fn cpu_time(children: bool) -> Duration {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // After the command name in parentheses, fields 14 to 17 of the line: utime,
        // stime, cutime, cstime.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(4)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        let ticks = match (fields.len(), children) {
            (4, false) => fields[0] + fields[1],
            (4, true) => fields[2] + fields[3],
            _ => 0,
        };
        Duration::from_millis(ticks * 10)
    }

    /// redis-server's CPU time so far (`INFO cpu`).
    async fn server_cpu(connection: &mut MultiplexedConnection) -> Duration {
        let info: String = redis::cmd("INFO")
            .arg("cpu")
            .query_async(connection)
            .await
            .unwrap();
        let seconds: f64 = info
            .lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(':')?;
                let counted = name == "used_cpu_user" || name == "used_cpu_sys";
                counted.then(|| value.trim().parse::<f64>().ok())?
            })
            .sum();
        Duration::from_secs_f64(seconds)
    }

    /// Empties the server, so each run starts from fresh keys; keeps the script.
    async fn flush(connection: &mut MultiplexedConnection) {
        let () = redis::cmd("FLUSHALL")
            .query_async(connection)
            .await
            .unwrap();
    }

    /// `tasks` tasks calling `api` in a loop over `stores` for `WARM_UP + length`;
    /// the calls that start and end within the last `length` are counted.
    async fn run(
        stores: &[RedisStore<ConnectionManager>],
        rule: &Rule,
        api: Api,
        tasks: usize,
        length: Duration,
        monitor: &mut MultiplexedConnection,
    ) -> Figures {
        let measure_from = Instant::now() + WARM_UP;
        let end = measure_from + length;
        let mut handles = Vec::new();
        for i in 0..tasks {
            let store = stores[i % stores.len()].clone();
            let limiter = SharedLimiter::new(store.clone(), rule.clone()).unwrap();
            let rule = rule.clone();
            handles.push(tokio::spawn(async move {
                let seed = 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x1000_0001);
                let mut keys = Keys(seed);
                let mut key = String::with_capacity(12);
                let checks = [Check::new("", &rule)];
                let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
                let mut denied = 0;
                loop {
                    keys.next(&mut key);
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    let admitted = match api {
                        Api::Limiter => limiter.check(&key, 1).await.unwrap().is_ok(),
                        Api::Execute => store
                            .execute(&Request::new(&key, &checks, Op::Acquire(1)))
                            .await
                            .unwrap()
                            .is_admitted(),
                    };
                    let t1 = Instant::now();
                    if t0 >= measure_from && t1 <= end {
                        let nanos = u32::try_from((t1 - t0).as_nanos()).unwrap_or(u32::MAX);
                        latencies.push(nanos);
                        denied += u64::from(!admitted);
                    }
                }
                (latencies, denied)
            }));
        }
        tokio::time::sleep_until(measure_from.into()).await;
        let (client_from, server_from) = (cpu_time(false), server_cpu(monitor).await);
        let calls_from = script_calls(monitor).await;
        let allocations_from = allocations();
        tokio::time::sleep_until(end.into()).await;
        let allocations_to = allocations();
        let (client_to, server_to) = (cpu_time(false), server_cpu(monitor).await);
        let calls_to = script_calls(monitor).await;
        let mut all = Vec::new();
        let mut denied = 0;
        for handle in handles {
            let (latencies, d) = handle.await.unwrap();
            all.extend(latencies);
            denied += d;
        }
        assert!(!all.is_empty(), "no call completed within the run");
        all.sort_unstable();
        let at =
            |q: f64| Duration::from_nanos(u64::from(all[((all.len() - 1) as f64 * q) as usize]));
        let decisions = u32::try_from(all.len()).unwrap_or(u32::MAX);
        Figures {
            per_second: all.len() as f64 / length.as_secs_f64(),
            p50: at(0.5),
            p99: at(0.99),
            denied: Some(denied),
            client_cpu: client_to.saturating_sub(client_from) / decisions,
            server_cpu: server_to.saturating_sub(server_from) / decisions,
            allocations: Some((allocations_to - allocations_from) as f64 / f64::from(decisions)),
            per_call: Some(
                f64::from(decisions) / calls_to.saturating_sub(calls_from).max(1) as f64,
            ),
        }
    }

    /// Runs `redis-benchmark` with `command` on `clients` connections each pipelining
    /// `pipeline` requests, and reads its CSV line; checks with `INFO commandstats`
    /// that every call it sent succeeded.
    async fn redis_benchmark(
        monitor: &mut MultiplexedConnection,
        port: u16,
        command: &[String],
        (clients, pipeline): (usize, usize),
        requests: u64,
    ) -> Figures {
        let mut failures = String::new();
        for _ in 0..PEER_ATTEMPTS {
            let name = command[0].to_lowercase();
            let calls_from = command_stat(monitor, &name, "calls").await;
            let failed_from = command_stat(monitor, &name, "failed_calls").await;
            let (client_from, server_from) = (cpu_time(true), server_cpu(monitor).await);
            // Blocks the thread in `block_on`, not a worker: the monitor's connection
            // keeps running.
            let output = Command::new("redis-benchmark")
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
                .args(["-n", &requests.to_string(), "-r", &KEYSPACE.to_string()])
                .args(["--csv", "--precision", "3"])
                .args(command)
                .output()
                .expect("redis-benchmark runs");
            let (client_to, server_to) = (cpu_time(true), server_cpu(monitor).await);
            let calls_to = command_stat(monitor, &name, "calls").await;
            let failed_to = command_stat(monitor, &name, "failed_calls").await;
            let stdout = String::from_utf8_lossy(&output.stdout);
            if !output.status.success() {
                let stderr = String::from_utf8_lossy(&output.stderr);
                writeln!(failures, "{stdout}{stderr}").unwrap();
                continue;
            }
            assert_eq!(
                failed_to, failed_from,
                "redis-benchmark's {name} failed: {stdout}"
            );
            assert!(
                calls_to - calls_from >= requests as f64,
                "redis-benchmark sent too few"
            );
            // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
            // "p95_latency_ms","p99_latency_ms","max_latency_ms": the command itself
            // has commas in it, so read from the end.
            let line = stdout
                .lines()
                .rev()
                .find(|l| l.starts_with('"') && !l.starts_with("\"test\""))
                .unwrap_or_else(|| panic!("no CSV line from redis-benchmark: {stdout}"));
            let fields: Vec<f64> = line
                .rsplitn(8, ',')
                .take(7)
                .map(|f| f.trim_matches('"').parse().expect("a number"))
                .collect();
            // Reversed: max, p99, p95, p50, min, avg, rps.
            let ms = |v: f64| Duration::from_secs_f64(v / 1e3);
            let decisions = u32::try_from(requests).unwrap_or(u32::MAX);
            return Figures {
                per_second: fields[6],
                p50: ms(fields[3]),
                p99: ms(fields[1]),
                denied: None,
                client_cpu: client_to.saturating_sub(client_from) / decisions,
                server_cpu: server_to.saturating_sub(server_from) / decisions,
                allocations: None,
                per_call: None,
            };
        }
        panic!(
            "redis-benchmark -c {clients} -P {pipeline} failed {PEER_ATTEMPTS} times:\n{failures}"
        );
    }

    /// `EVALSHA` and `FCALL` calls so far.
    async fn script_calls(connection: &mut MultiplexedConnection) -> u64 {
        let evalsha = command_stat(connection, "evalsha", "calls").await;
        let fcall = command_stat(connection, "fcall", "calls").await;
        (evalsha + fcall) as u64
    }

    /// `field` of `command` in `INFO commandstats` (0 before its first call).
    async fn command_stat(
        connection: &mut MultiplexedConnection,
        command: &str,
        field: &str,
    ) -> f64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(connection)
            .await
            .unwrap();
        let prefix = format!("cmdstat_{}:", command.to_lowercase());
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or("");
        line.split(',')
            .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }
}
