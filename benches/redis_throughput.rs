//! Decisions per second through Redis: C concurrent tokio tasks, each looping on one
//! GCRA decision for a random key, pipelined over one shared connection (or a few),
//! next to `redis-benchmark` running the same `EVALSHA` at the same concurrency and
//! pipelining.
//!
//! Starts its own `redis-server` on a free port (never the one on 6379). For each
//! concurrency C (16, 64, 256) and connection count k (1, 4):
//!
//! - `limiter`: C tasks on a 2-worker multi-thread runtime loop on
//!   `SharedLimiter::try_acquire(key, 1)` over k `RedisStore`s (each its own
//!   `ConnectionManager`, as `RedisStore::connect` builds it; task i uses store i % k);
//! - `execute`: the same with `Store::execute` on a `Request` built by the task (no
//!   per-call `Vec` of checks, which `SharedLimiter` builds);
//! - `redis-benchmark -c k -P C/k`: k connections, each sending a batch of C/k
//!   requests and waiting for all their replies, so at most C are in flight, as with
//!   C tasks on k multiplexed connections. It runs the very `EVALSHA` the store sends
//!   (`RedisStore::script_call`), with the key's tag replaced by `__rand_int__`.
//!
//! Keys are `bench:{NNNNNNNNNNNN}`, 12 digits drawn uniformly from 100,000 by both
//! clients. The rule is 1,000 per second with a burst of 1,000 per key, so at these
//! rates every decision is admitted and writes its key (`SET ... PX`).
//!
//! Every call's latency (request built to decision returned, `Instant`) is kept and
//! sorted for p50/p99; `redis-benchmark` reports its own (send of the batch to each
//! reply). The server, the client under test and `redis-benchmark` share the
//! machine's cores: on 2 cores, what the client spends is taken from the server.
//!
//! Run `cargo bench --features redis --bench redis_throughput` (about 50 s). Options
//! after `--`: `--secs S` per run (default 3), `--tasks 16,64,256`,
//! `--connections 1,4`.

#[cfg(not(feature = "redis"))]
fn main() {
    eprintln!("redis_throughput needs the redis feature: cargo bench --features redis --bench redis_throughput");
}

#[cfg(feature = "redis")]
fn main() {
    bench::main();
}

#[cfg(feature = "redis")]
#[path = "../tests/common/redis.rs"]
#[allow(dead_code)]
mod redis_harness;

#[cfg(feature = "redis")]
mod bench {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use redis::aio::{ConnectionManager, MultiplexedConnection};
    use tollgate::algorithm::Gcra;
    use tollgate::store::{Check, Op, RedisStore, Request, Rule, SharedLimiter, Store};
    use tollgate::Quota;

    use super::redis_harness::{require_redis, RedisServer};

    const PREFIX: &str = "bench";
    /// Keys drawn from; `redis-benchmark -r` draws the same 12-digit numbers.
    const KEYSPACE: u64 = 100_000;
    /// Untimed calls before each run: connections warm, script loaded.
    const WARM_UP: Duration = Duration::from_millis(500);

    /// What the tasks call.
    #[derive(Clone, Copy, PartialEq)]
    enum Api {
        Limiter,
        Execute,
    }

    impl Api {
        fn name(self) -> &'static str {
            match self {
                Api::Limiter => "limiter",
                Api::Execute => "execute",
            }
        }
    }

    /// One run's figures.
    struct Figures {
        per_second: f64,
        p50: Duration,
        p99: Duration,
        denied: u64,
        /// CPU time of the client (this process, or redis-benchmark) per decision.
        client_cpu: Duration,
        /// CPU time of redis-server per decision.
        server_cpu: Duration,
    }

    /// User + system CPU time of this process (`self`) or of its waited-for children,
    /// from `/proc/self/stat` (in clock ticks, 100 per second on Linux).
    fn cpu_time(children: bool) -> Duration {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name, which is in parentheses: the 14th to 17th
        // of the line are utime, stime, cutime, cstime.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(4)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        let ticks = if fields.len() < 4 {
            0
        } else if children {
            fields[2] + fields[3]
        } else {
            fields[0] + fields[1]
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
            .filter_map(|l| {
                let (name, value) = l.split_once(':')?;
                matches!(name, "used_cpu_user" | "used_cpu_sys")
                    .then(|| value.trim().parse::<f64>().ok())?
            })
            .sum();
        Duration::from_secs_f64(seconds)
    }

    struct Settings {
        secs: f64,
        tasks: Vec<usize>,
        connections: Vec<usize>,
        workers: usize,
        apis: Vec<Api>,
    }

    fn settings() -> Settings {
        let mut settings = Settings {
            secs: 3.0,
            tasks: vec![16, 64, 256],
            connections: vec![1, 4],
            workers: 2,
            apis: vec![Api::Limiter, Api::Execute],
        };
        let list = |v: &str| -> Vec<usize> {
            v.split(',')
                .map(|x| x.trim().parse().expect("a list of counts"))
                .collect()
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--secs" => {
                    settings.secs = args.next().and_then(|v| v.parse().ok()).expect("--secs S")
                }
                "--tasks" => settings.tasks = list(&args.next().expect("--tasks 16,64")),
                "--connections" => {
                    settings.connections = list(&args.next().expect("--connections 1,4"))
                }
                "--workers" => settings.workers = list(&args.next().expect("--workers 2"))[0],
                "--limiter-only" => settings.apis = vec![Api::Limiter],
                // `cargo bench` passes `--bench`.
                _ => {}
            }
        }
        settings
    }

    fn rule() -> Rule {
        let quota = Quota::per_second(1_000).unwrap().burst(1_000).unwrap();
        Rule::from(Gcra::new(quota))
    }

    /// A xorshift64*: random keys without a dependency.
    struct Keys(u64);

    impl Keys {
        fn next(&mut self, buf: &mut String) {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let n = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % KEYSPACE;
            buf.clear();
            use std::fmt::Write;
            write!(buf, "{n:012}").unwrap();
        }
    }

    pub fn main() {
        let Some(()) = require_redis() else { return };
        if !runs("redis-benchmark") {
            eprintln!("note: redis-benchmark not found; it comes with redis-server (apt-get install -y redis-server)");
            return;
        }
        let settings = settings();
        let server = RedisServer::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(settings.workers)
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
        let command = {
            let checks = [Check::new("", &rule)];
            let call = stores[0]
                .script_call(&Request::new("__rand_int__", &checks, Op::Acquire(1)))
                .unwrap();
            let mut args = vec!["EVALSHA".to_owned(), stores[0].script_hash().to_owned()];
            args.extend(call);
            args
        };
        println!("server: redis-server on 127.0.0.1:{}", server.port());
        println!(
            "client: tokio multi-thread runtime, {} workers; rule: GCRA 1000/s, burst 1000, \
             {KEYSPACE} random keys; {} s per run after {} ms of warm-up",
            settings.workers,
            settings.secs,
            WARM_UP.as_millis()
        );
        println!("redis-benchmark runs: {}", shell_words(&command));
        println!();
        println!(
            "| tasks C | connections k | client | decisions/s | p50 | p99 | denied \
             | client CPU/decision | server CPU/decision | vs redis-benchmark |"
        );
        println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
        for &tasks in &settings.tasks {
            for &k in &settings.connections {
                if tasks % k != 0 {
                    continue;
                }
                let mut ours = Vec::new();
                for &api in &settings.apis {
                    runtime.block_on(flush(&mut monitor));
                    let length = Duration::from_secs_f64(settings.secs);
                    let figures = runtime.block_on(run(
                        &stores[..k],
                        &rule,
                        api,
                        tasks,
                        length,
                        &mut monitor,
                    ));
                    ours.push((api, figures));
                }
                runtime.block_on(flush(&mut monitor));
                let best = ours.iter().map(|(_, f)| f.per_second).fold(0.0, f64::max);
                let requests = ((best * settings.secs) as u64).max(50_000);
                let peer = runtime.block_on(redis_benchmark(
                    &mut monitor,
                    server.port(),
                    &command,
                    k,
                    tasks / k,
                    requests,
                ));
                for (api, f) in &ours {
                    row(
                        tasks,
                        k,
                        &format!("tollgate {}", api.name()),
                        f,
                        &f.denied.to_string(),
                        &format!("**{:.2}**", f.per_second / peer.per_second),
                    );
                }
                let name = format!("redis-benchmark -c {k} -P {}", tasks / k);
                row(tasks, k, &name, &peer, "n/a", "1.00");
            }
        }
        drop(server);
    }

    fn row(tasks: usize, k: usize, client: &str, f: &Figures, denied: &str, ratio: &str) {
        println!(
            "| {tasks} | {k} | {client} | {:.0} | {} | {} | {denied} | {} | {} | {ratio} |",
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
        args.iter()
            .map(|a| {
                if a.is_empty() {
                    "''".to_owned()
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn runs(binary: &str) -> bool {
        Command::new(binary).arg("--version").output().is_ok()
    }

    /// Empties the server, so each run starts from fresh keys; keeps the script.
    async fn flush(connection: &mut MultiplexedConnection) {
        let () = redis::cmd("FLUSHALL")
            .query_async(connection)
            .await
            .unwrap();
    }

    /// `tasks` tasks calling `api` in a loop over `stores` for `WARM_UP + length`,
    /// the calls that start and end within the last `length` counted.
    async fn run(
        stores: &[RedisStore<ConnectionManager>],
        rule: &Rule,
        api: Api,
        tasks: usize,
        length: Duration,
        monitor: &mut MultiplexedConnection,
    ) -> Figures {
        let start = Instant::now();
        let measure_from = start + WARM_UP;
        let end = measure_from + length;
        let mut handles = Vec::new();
        for i in 0..tasks {
            let store = stores[i % stores.len()].clone();
            let limiter = SharedLimiter::new(store.clone(), rule.clone()).unwrap();
            let rule = rule.clone();
            handles.push(tokio::spawn(async move {
                let mut keys =
                    Keys(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x1000_0001));
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
                        Api::Limiter => limiter.try_acquire(&key, 1).await.unwrap().is_ok(),
                        Api::Execute => store
                            .execute(&Request::new(&key, &checks, Op::Acquire(1)))
                            .await
                            .unwrap()
                            .is_admitted(),
                    };
                    let t1 = Instant::now();
                    if t0 >= measure_from && t1 <= end {
                        latencies.push(u32::try_from((t1 - t0).as_nanos()).unwrap_or(u32::MAX));
                        denied += u64::from(!admitted);
                    }
                }
                (latencies, denied)
            }));
        }
        tokio::time::sleep_until(measure_from.into()).await;
        let (client_from, server_from) = (cpu_time(false), server_cpu(monitor).await);
        tokio::time::sleep_until(end.into()).await;
        let (client_to, server_to) = (cpu_time(false), server_cpu(monitor).await);
        let mut all = Vec::new();
        let mut denied = 0;
        for handle in handles {
            let (latencies, d) = handle.await.unwrap();
            all.extend(latencies);
            denied += d;
        }
        all.sort_unstable();
        let at =
            |q: f64| Duration::from_nanos(u64::from(all[((all.len() - 1) as f64 * q) as usize]));
        let decisions = all.len().max(1) as u32;
        Figures {
            per_second: all.len() as f64 / length.as_secs_f64(),
            p50: at(0.5),
            p99: at(0.99),
            denied,
            client_cpu: (client_to - client_from) / decisions,
            server_cpu: (server_to - server_from) / decisions,
        }
    }

    /// Runs `redis-benchmark` with `command` and reads its CSV line; checks with
    /// `INFO commandstats` that every `EVALSHA` it sent succeeded.
    async fn redis_benchmark(
        monitor: &mut MultiplexedConnection,
        port: u16,
        command: &[String],
        clients: usize,
        pipeline: usize,
        requests: u64,
    ) -> Figures {
        let before = evalsha_stats(monitor).await;
        let (client_from, server_from) = (cpu_time(true), server_cpu(monitor).await);
        // Blocks the thread in `block_on`, not a worker: the connection runs meanwhile.
        let output = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
            .args(["-n", &requests.to_string(), "-r", &KEYSPACE.to_string()])
            .args(["--csv", "--precision", "3"])
            .args(command)
            .output()
            .expect("redis-benchmark runs");
        let (client_to, server_to) = (cpu_time(true), server_cpu(monitor).await);
        let after = evalsha_stats(monitor).await;
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "redis-benchmark -c {clients} -P {pipeline} -n {requests} failed: {}{}",
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            after.1, before.1,
            "redis-benchmark's EVALSHA calls failed: {stdout}"
        );
        assert!(
            after.0 - before.0 >= requests,
            "redis-benchmark sent fewer calls than asked"
        );
        // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
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
        let decisions = requests as u32;
        Figures {
            per_second: fields[6],
            p50: ms(fields[3]),
            p99: ms(fields[1]),
            denied: 0,
            client_cpu: (client_to - client_from) / decisions,
            server_cpu: (server_to - server_from) / decisions,
        }
    }

    /// `EVALSHA` calls and failed calls so far.
    async fn evalsha_stats(connection: &mut MultiplexedConnection) -> (u64, u64) {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(connection)
            .await
            .unwrap();
        let line = info
            .lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .unwrap_or("");
        let field = |name: &str| -> u64 {
            line.split(|c| c == ':' || c == ',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("calls"), field("failed_calls"))
    }
}
