//! Load on the running service: `ShouldRateLimit` requests a second and their latency,
//! with the client's and the server's CPU per call, for the memory and Redis backends.
//!
//! `cargo bench -p tollgate-rls --bench load` runs three rounds of: the memory backend,
//! the Redis decision ceiling, the Redis backend; then prints each figure's median.
//! The memory backend runs at 32 calls in flight, for latency; the Redis runs at 128,
//! which it takes to keep Redis busy through the service. Options after `--`:
//!
//! | option | default | |
//! |---|---|---|
//! | `--seconds N` | 5 | measured time of each run, after a second's warm-up |
//! | `--rounds N` | 3 | rounds; the summary is the median of each figure |
//! | `--concurrency N` | 32; Redis 128 | requests in flight (one loop each) |
//! | `--connections N` | 2 | HTTP/2 connections the loops share |
//! | `--client-threads N` | 1 | the client runtime's threads (1: current-thread) |
//! | `--descriptors N` | 1 | descriptors per request (1 to 3: `user`, `path`, `tenant`) |
//! | `--counting MODE` | `all-or-nothing` | the service's `--counting` (`each`: Go's) |
//! | `--only LIST` | `memory,redis` | comma-separated, of `memory`, `redis`, `cluster` |
//! | `--server-threads N` | 1 | the service's `--worker-threads` (0: its default) |
//! | `--no-pin` | | leave Redis off a core of its own (below) |
//! | `--server-env K=V` | | one more environment variable of the service (repeatable) |
//! | `--server-bin PATH` | this build's | another build of the service, to compare two |
//! | `--client h2\|tonic` | `h2` | the load generator's gRPC client (below) |
//!
//! The server is the release binary, started on loopback ports; Redis is a
//! `redis-server` of its own on a free port (and `cluster`, three of them as a Redis
//! Cluster). The Redis decision ceiling is measured in the same run: the same rules,
//! keys, store calls and concurrency from `RedisStore` directly, with no service
//! between, so the service's ratio to it is what the service costs.
//!
//! The default client speaks gRPC over the `h2` crate directly, with every request
//! encoded once before the run: a load generator's job is to cost the service's
//! figures as little CPU as it can on a machine it shares with the service, as
//! `h2load` and `ghz` do. Each answer is still read whole, decoded and checked. With
//! `--client tonic`, tonic's generated client makes the calls instead (about twice the
//! client CPU per call).
//!
//! On this 2-core machine the client, the service and Redis share two cores, so each
//! runs on one thread: more threads than cores only add switches and wake-ups. Unless
//! `--no-pin`, Redis is pinned to the last core and the client and the service to the
//! others (with `taskset`), in the ceiling's runs as in the service's, as production
//! gives Redis a core of its own.
//!
//! CPU is user + system time from `/proc/PID/stat` over the measured seconds, divided
//! by the calls answered in them: `client` is this process (the loops, tonic's client,
//! or for the ceiling `RedisStore`), `server` the service, `redis` the Redis server(s).

// The harness's rust-version predates let chains, hence collapsible_if.
#[allow(dead_code, clippy::collapsible_if)]
#[path = "../../tests/common/redis.rs"]
mod redis_harness;

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::Message as _;
use tollgate::algorithm::FixedWindow;
use tollgate::store::{Check, Op, RedisStore, Request, Rule, Store};
use tonic::transport::Channel;

/// Distinct values of `user` (and of `path`); `tenant` takes `TENANTS`.
const KEYS: usize = 1_000;
const TENANTS: usize = 10;
/// The limit of every rule: high enough that every request is admitted.
const LIMIT: u64 = 100_000_000;
/// The descriptor keys of a request, in order.
const DESCRIPTOR_KEYS: [&str; 3] = ["user", "path", "tenant"];
/// The store's key prefix and the request's domain, as the service uses them.
const PREFIX: &str = "ratelimit";
const DOMAIN: &str = "load";

const CONFIG: &str = "\
domain: load
descriptors:
  - key: user
    rate_limit: { unit: second, requests_per_unit: 100000000 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 100000000 }
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100000000 }
";

#[derive(Clone, Debug)]
struct Options {
    seconds: u64,
    rounds: usize,
    concurrency: Option<usize>,
    connections: usize,
    client_threads: usize,
    pin: bool,
    descriptors: usize,
    counting: String,
    only: Vec<String>,
    server_threads: Option<usize>,
    server_env: Vec<(String, String)>,
    server_bin: Option<String>,
    tonic_client: bool,
}

impl Options {
    fn parse() -> Options {
        let mut options = Options {
            seconds: 5,
            rounds: 3,
            concurrency: None,
            connections: 2,
            client_threads: 1,
            pin: true,
            descriptors: 1,
            counting: "all-or-nothing".into(),
            only: vec!["memory".into(), "redis".into()],
            server_threads: Some(1),
            server_env: Vec::new(),
            server_bin: None,
            tonic_client: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().unwrap_or_default();
            match arg.as_str() {
                "--seconds" => options.seconds = number(&arg, &value()),
                "--rounds" => options.rounds = number(&arg, &value()),
                "--concurrency" => options.concurrency = Some(number(&arg, &value())),
                "--no-pin" => options.pin = false,
                "--connections" => options.connections = number(&arg, &value()),
                "--client-threads" => options.client_threads = number(&arg, &value()),
                "--descriptors" => options.descriptors = number(&arg, &value()),
                "--server-threads" => {
                    options.server_threads = Some(number(&arg, &value())).filter(|&n| n > 0)
                }
                "--counting" => options.counting = value(),
                "--server-bin" => options.server_bin = Some(value()),
                "--client" => {
                    options.tonic_client = match value().as_str() {
                        "h2" => false,
                        "tonic" => true,
                        other => panic!("--client takes h2 or tonic, not {other:?}"),
                    }
                }
                "--server-env" => {
                    let pair = value();
                    let (k, v) = pair
                        .split_once('=')
                        .unwrap_or_else(|| panic!("--server-env takes K=V, not {pair:?}"));
                    options.server_env.push((k.to_owned(), v.to_owned()));
                }
                "--only" => {
                    options.only = value().split(',').map(str::to_owned).collect();
                }
                // `cargo bench` passes `--bench`.
                "--bench" => {}
                other => panic!("unknown option {other:?} (see benches/load.rs)"),
            }
        }
        assert!(
            (1..=DESCRIPTOR_KEYS.len()).contains(&options.descriptors),
            "--descriptors takes 1 to {}",
            DESCRIPTOR_KEYS.len()
        );
        assert!(
            matches!(options.counting.as_str(), "all-or-nothing" | "each"),
            "--counting takes all-or-nothing or each"
        );
        for backend in &options.only {
            assert!(
                matches!(backend.as_str(), "memory" | "redis" | "cluster"),
                "--only takes memory, redis, cluster"
            );
        }
        assert!(options.concurrency != Some(0) && options.connections > 0 && options.rounds > 0);
        assert!(options.client_threads > 0 && options.seconds > 0);
        options
    }

    /// Calls in flight for `backend`'s runs.
    fn concurrency(&self, backend: &str) -> usize {
        self.concurrency
            .unwrap_or(if backend == "memory" { 32 } else { 128 })
    }

    fn runs(&self, backend: &str) -> bool {
        self.only.iter().any(|b| b == backend)
    }

    fn each(&self) -> bool {
        self.counting == "each"
    }
}

fn number<T: std::str::FromStr>(option: &str, value: &str) -> T {
    value
        .parse()
        .unwrap_or_else(|_| panic!("{option} takes a number, not {value:?}"))
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The service, running; killed on drop.
struct Service {
    child: Child,
    grpc: String,
    // Held open: the service's stdout stays a live pipe.
    _stdout: BufReader<ChildStdout>,
    _config: TempDir,
}

impl Service {
    fn start(options: &Options, env: &[(&str, String)]) -> Service {
        let config = TempDir::new("tollgate-rls-load");
        std::fs::File::create(config.0.join("load.yaml"))
            .and_then(|mut f| f.write_all(CONFIG.as_bytes()))
            .expect("config file");
        let mut command = Command::new(
            options
                .server_bin
                .as_deref()
                .unwrap_or(env!("CARGO_BIN_EXE_tollgate-rls")),
        );
        command
            .arg("--config")
            .arg(&config.0)
            .args(["--counting", &options.counting])
            .env("HOST", "127.0.0.1")
            .env("PORT", "0")
            .env("GRPC_HOST", "127.0.0.1")
            .env("GRPC_PORT", "0")
            .env("LOG_LEVEL", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(threads) = options.server_threads {
            command.env("TOKIO_WORKER_THREADS", threads.to_string());
        }
        for (k, v) in env {
            command.env(k, v);
        }
        for (k, v) in &options.server_env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("start tollgate-rls");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the listening line");
        let Some(grpc) = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("grpc="))
            .map(str::to_owned)
        else {
            let _ = child.kill();
            panic!("tollgate-rls did not start: {line:?}");
        };
        Service {
            child,
            grpc,
            _stdout: stdout,
            _config: config,
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// User and system CPU of a process, from its `/proc/PID/stat`.
fn cpu_of(pid: u32) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime and stime are the 12th
    // and 13th there (14 and 15 of the whole line).
    let after = text.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

/// The pid of the `redis-server` listening on `port`, found by its command line
/// (which the server rewrites to `redis-server 127.0.0.1:PORT`).
fn redis_pid(port: u16) -> Option<u32> {
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

/// The pids whose CPU a run reports, by role.
#[derive(Clone, Default)]
struct Watched {
    server: Option<u32>,
    redis: Vec<u32>,
}

impl Watched {
    fn sample(&self) -> [Duration; 3] {
        [
            cpu_of(std::process::id()),
            self.server.map_or(Duration::ZERO, cpu_of),
            self.redis.iter().map(|&pid| cpu_of(pid)).sum(),
        ]
    }
}

#[derive(Clone)]
struct Run {
    calls: u64,
    elapsed: Duration,
    latencies_us: Vec<u32>,
    cpu: [Duration; 3],
}

impl Run {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> f64 {
        let n = self.latencies_us.len();
        if n == 0 {
            return 0.0;
        }
        f64::from(self.latencies_us[((n as f64 * p) as usize).min(n - 1)])
    }

    /// µs of CPU per call: client, server, Redis.
    fn per_call(&self) -> [f64; 3] {
        self.cpu
            .map(|d| d.as_secs_f64() * 1e6 / self.calls.max(1) as f64)
    }

    /// The figures of a summary row, in [`COLUMNS`] order.
    fn figures(&self) -> [f64; 7] {
        let [client, server, redis] = self.per_call();
        [
            self.rate(),
            self.percentile(0.50),
            self.percentile(0.99),
            self.percentile(0.999),
            client,
            server,
            redis,
        ]
    }
}

const COLUMNS: [&str; 7] = [
    "req/s",
    "p50 µs",
    "p99 µs",
    "p99.9 µs",
    "client µs/call",
    "server µs/call",
    "redis µs/call",
];

fn print_row(name: &str, figures: &[f64; 7]) {
    println!(
        "{name:<26} {:>9.0} req/s  p50 {:>6.0} µs  p99 {:>6.0} µs  p99.9 {:>6.0} µs  \
         CPU/call: client {:>5.1} µs  server {:>5.1} µs  redis {:>5.1} µs",
        figures[0], figures[1], figures[2], figures[3], figures[4], figures[5], figures[6],
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// `concurrency` loops, each calling `call(state, i)` with its own state and a rising
/// index, for `seconds` after a second's warm-up; a call hands its state back.
async fn drive<S, F, Fut>(options: &Options, states: Vec<S>, call: F, watched: &Watched) -> Run
where
    S: Send + 'static,
    F: Fn(S, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = S> + Send,
{
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let loops = states.len();
    let mut tasks = Vec::with_capacity(loops);
    for (t, mut state) in states.into_iter().enumerate() {
        let (measuring, stop, call) = (measuring.clone(), stop.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(1 << 16);
            // Loops walk the keys with a stride, so that they seldom share a key.
            let mut i = t * (KEYS / loops).max(1);
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                state = call(state, i).await;
                let took = started.elapsed();
                if measuring.load(Ordering::Relaxed) {
                    latencies.push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
                }
                i += 1;
            }
            latencies
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = watched.sample();
    let started = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(options.seconds)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let after = watched.sample();
    stop.store(true, Ordering::Relaxed);
    let mut latencies_us = Vec::new();
    for task in tasks {
        latencies_us.extend(task.await.expect("a load loop failed"));
    }
    latencies_us.sort_unstable();
    Run {
        calls: latencies_us.len() as u64,
        elapsed,
        latencies_us,
        cpu: [0, 1, 2].map(|k| after[k].saturating_sub(before[k])),
    }
}

/// The request of index `i`: `descriptors` descriptors of one entry each.
fn request(i: usize, descriptors: usize) -> RateLimitRequest {
    RateLimitRequest {
        domain: DOMAIN.into(),
        descriptors: (0..descriptors)
            .map(|d| RateLimitDescriptor {
                entries: vec![Entry {
                    key: DESCRIPTOR_KEYS[d].into(),
                    value: value(d, i),
                }],
                ..Default::default()
            })
            .collect(),
        hits_addend: 1,
    }
}

/// The value of descriptor `d` in request `i`.
fn value(d: usize, i: usize) -> String {
    match d {
        0 => format!("u{}", i % KEYS),
        1 => format!("/p{}", (i / 7) % KEYS),
        _ => format!("t{}", i % TENANTS),
    }
}

/// `ShouldRateLimit` on the service, every answer checked to be `OK`.
async fn load(service: &Service, options: &Options, in_flight: usize, watched: &Watched) -> Run {
    if options.tonic_client {
        load_tonic(service, options, in_flight, watched).await
    } else {
        load_h2(service, options, in_flight, watched).await
    }
}

/// Every answer admitted, and every descriptor under a limit (the config loaded).
fn check_answer(answer: &RateLimitResponse) {
    assert_eq!(answer.overall_code, Code::Ok as i32, "{answer:?}");
    assert!(answer.statuses[0].current_limit.is_some(), "{answer:?}");
}

/// The calls from tonic's generated client.
async fn load_tonic(
    service: &Service,
    options: &Options,
    in_flight: usize,
    watched: &Watched,
) -> Run {
    let mut channels = Vec::new();
    for _ in 0..options.connections {
        let channel = Channel::from_shared(format!("http://{}", service.grpc))
            .expect("uri")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect");
        channels.push(channel);
    }
    let clients = (0..in_flight)
        .map(|t| RateLimitServiceClient::new(channels[t % channels.len()].clone()))
        .collect();
    let descriptors = options.descriptors;
    drive(
        options,
        clients,
        move |mut client: RateLimitServiceClient<Channel>, i| async move {
            let answer = client
                .should_rate_limit(request(i, descriptors))
                .await
                .expect("ShouldRateLimit")
                .into_inner();
            check_answer(&answer);
            client
        },
        watched,
    )
    .await
}

/// The path of `ShouldRateLimit`, as gRPC names a method.
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The requests of one period of [`request`]'s pattern (`user` repeats every
/// `KEYS`, `path` every `7 × KEYS`, `tenant` every `TENANTS`), each encoded once as a
/// gRPC message: an uncompressed flag, the length, the protobuf.
fn encoded_requests(descriptors: usize) -> Vec<Bytes> {
    (0..7 * KEYS)
        .map(|i| {
            let message = request(i, descriptors).encode_to_vec();
            let mut framed = Vec::with_capacity(5 + message.len());
            framed.push(0);
            framed.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
            framed.extend_from_slice(&message);
            Bytes::from(framed)
        })
        .collect()
}

/// One load loop's share of an `h2` connection.
struct H2Loop {
    send: h2::client::SendRequest<Bytes>,
    uri: Arc<http::Uri>,
    requests: Arc<Vec<Bytes>>,
}

/// The calls over the `h2` crate: each a gRPC unary call made by hand.
async fn load_h2(service: &Service, options: &Options, in_flight: usize, watched: &Watched) -> Run {
    let uri: Arc<http::Uri> = Arc::new(
        format!("http://{}{SHOULD_RATE_LIMIT}", service.grpc)
            .parse()
            .expect("uri"),
    );
    let requests = Arc::new(encoded_requests(options.descriptors));
    let mut connections = Vec::new();
    for _ in 0..options.connections {
        let tcp = tokio::net::TcpStream::connect(&service.grpc)
            .await
            .expect("connect");
        tcp.set_nodelay(true).expect("TCP_NODELAY");
        let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
        tokio::spawn(async move {
            // Ends when the last loop drops its handle.
            let _ = connection.await;
        });
        connections.push(send);
    }
    let loops = (0..in_flight)
        .map(|t| H2Loop {
            send: connections[t % connections.len()].clone(),
            uri: uri.clone(),
            requests: requests.clone(),
        })
        .collect();
    drop(connections);
    drive(
        options,
        loops,
        |state: H2Loop, i| async move {
            let body = state.requests[i % state.requests.len()].clone();
            let (state, answer) = h2_call(state, body).await;
            check_answer(&answer);
            state
        },
        watched,
    )
    .await
}

/// One unary call: the request's headers and message, then the answer's headers,
/// message and trailers, with `grpc-status` 0.
async fn h2_call(state: H2Loop, body: Bytes) -> (H2Loop, RateLimitResponse) {
    let H2Loop {
        send,
        uri,
        requests,
    } = state;
    let mut send = send.ready().await.expect("h2 stream");
    let request = http::Request::post(uri.as_ref().clone())
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(())
        .expect("request");
    let (response, mut stream) = send.send_request(request, false).expect("send headers");
    stream.send_data(body, true).expect("send message");
    let response = response.await.expect("response headers");
    assert_eq!(response.status(), http::StatusCode::OK);
    let early_status = response.headers().get("grpc-status").cloned();
    let mut body = response.into_body();
    let mut message = Bytes::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("response message");
        let _ = body.flow_control().release_capacity(chunk.len());
        if message.is_empty() {
            message = chunk;
        } else {
            let mut joined = message.to_vec();
            joined.extend_from_slice(&chunk);
            message = Bytes::from(joined);
        }
    }
    let trailers = body.trailers().await.expect("response trailers");
    let status = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status").cloned())
        .or(early_status);
    assert_eq!(
        status.as_ref().map(|s| s.as_bytes()),
        Some(&b"0"[..]),
        "grpc-status {status:?}, trailers {trailers:?}"
    );
    assert!(message.len() >= 5 && message[0] == 0, "a gRPC message");
    let answer = RateLimitResponse::decode(&message[5..]).expect("RateLimitResponse");
    (
        H2Loop {
            send,
            uri,
            requests,
        },
        answer,
    )
}

/// The same store calls from `RedisStore` directly: what Redis alone allows here.
///
/// As the engine makes them: all-or-nothing, one request of every descriptor's check;
/// `each`, one request per descriptor, concurrently, of the rule counting denied hits.
async fn ceiling(
    store: Arc<dyn Store>,
    options: &Options,
    in_flight: usize,
    watched: &Watched,
) -> Run {
    let window = FixedWindow::new(LIMIT, Duration::from_secs(1)).expect("rule");
    let rule = if options.each() {
        Rule::from(window.counting_denied().expect("rule"))
    } else {
        Rule::from(window)
    };
    let rule = Arc::new(rule);
    let (descriptors, each) = (options.descriptors, options.each());
    drive(
        options,
        vec![(); in_flight],
        move |(), i| {
            let (store, rule) = (store.clone(), rule.clone());
            async move {
                let keys: Vec<String> = (0..descriptors)
                    .map(|d| format!("fixed_window:1|{}={}", DESCRIPTOR_KEYS[d], value(d, i)))
                    .collect();
                if each {
                    let calls = keys.iter().map(|key| {
                        let (store, rule) = (&store, &rule);
                        async move {
                            let checks = [Check::new(key, rule)];
                            store
                                .execute_each(&Request::new(DOMAIN, &checks, Op::Acquire(1)))
                                .await
                        }
                    });
                    for answers in futures_util::future::join_all(calls).await {
                        assert!(answers.expect("execute_each").reply().is_admitted());
                    }
                } else {
                    let checks: Vec<Check<'_>> =
                        keys.iter().map(|key| Check::new(key, &rule)).collect();
                    let answers = store
                        .execute_each(&Request::new(DOMAIN, &checks, Op::Acquire(1)))
                        .await
                        .expect("execute_each");
                    assert!(answers.reply().is_admitted());
                }
            }
        },
        watched,
    )
    .await
}

/// A Redis (or Cluster) with the service over it and the ceiling's store.
struct RedisSetup {
    name: &'static str,
    service: Service,
    store: Arc<dyn Store>,
    watched: Watched,
    // The servers, killed on drop (after the service: fields drop in order).
    _redis: Box<dyn std::any::Any>,
}

/// The runs of one name over the rounds.
struct Series {
    name: String,
    runs: Vec<Run>,
}

fn record(series: &mut Vec<Series>, name: &str, run: Run) {
    print_row(name, &run.figures());
    match series.iter_mut().find(|s| s.name == name) {
        Some(s) => s.runs.push(run),
        None => series.push(Series {
            name: name.to_owned(),
            runs: vec![run],
        }),
    }
}

fn rates(series: &[Series], name: &str) -> Vec<f64> {
    series
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.runs.iter().map(Run::rate).collect())
        .unwrap_or_default()
}

/// CPU affinity by role, set with `taskset` (util-linux): Redis on the last core, the
/// rest on the others.
struct Pinning {
    redis: String,
    others: String,
    all: String,
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
            all: format!("{all:x}"),
        }
    }

    fn set(mask: &str, pid: u32) {
        let done = Command::new("taskset")
            .args(["-a", "-p", mask, &pid.to_string()])
            .stdout(Stdio::null())
            .status();
        if !done.is_ok_and(|s| s.success()) {
            eprintln!("taskset -a -p {mask} {pid} failed: process {pid} is not pinned");
        }
    }

    fn redis(&self, pid: u32) {
        Pinning::set(&self.redis, pid);
    }

    fn others(&self, pid: u32) {
        Pinning::set(&self.others, pid);
    }

    fn all(&self, pid: u32) {
        Pinning::set(&self.all, pid);
    }
}

fn main() {
    let options = Options::parse();
    // One thread: tokio's current-thread runtime, which runs every woken task before
    // a connection's task flushes, so that one write carries many calls.
    let runtime = if options.client_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.client_threads)
            .enable_all()
            .build()
    }
    .expect("runtime");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Redis on the last core; the client (this process) and the services on the rest.
    let pinning = (options.pin && cores >= 2).then(|| Pinning::new(cores));
    println!(
        "ShouldRateLimit load: {} round(s) of {} s, {} (Redis {}) in flight over {} \
         connection(s), {} client thread(s), {} server thread(s), {} descriptor(s) a \
         request, counting {}, {} cores, Redis {}",
        options.rounds,
        options.seconds,
        options.concurrency("memory"),
        options.concurrency("redis"),
        options.connections,
        options.client_threads,
        options
            .server_threads
            .map_or_else(|| "default".to_owned(), |n| n.to_string()),
        options.descriptors,
        options.counting,
        cores,
        if pinning.is_some() {
            "on a core of its own"
        } else {
            "not pinned"
        },
    );

    let memory = options
        .runs("memory")
        .then(|| Service::start(&options, &[("BACKEND_TYPE", "memory".into())]));
    let wants_redis = options.runs("redis") || options.runs("cluster");
    if wants_redis && redis_harness::require_redis().is_none() {
        println!("Redis runs skipped: no redis-server");
    }
    let have_redis = wants_redis && redis_harness::require_redis().is_some();

    // Redis, its service and the ceiling's store, for `redis` and for `cluster`.
    let mut redis_setups: Vec<RedisSetup> = Vec::new();
    if have_redis && options.runs("redis") {
        let redis = redis_harness::RedisServer::start();
        let store = runtime
            .block_on(RedisStore::connect(&redis.url(), PREFIX))
            .expect("RedisStore::connect");
        let service = Service::start(
            &options,
            &[
                ("BACKEND_TYPE", "redis".into()),
                ("REDIS_TYPE", "SINGLE".into()),
                ("REDIS_URL", redis.url()),
            ],
        );
        let watched = Watched {
            server: None,
            redis: redis_pid(redis.port()).into_iter().collect(),
        };
        redis_setups.push(RedisSetup {
            name: "redis",
            service,
            store: Arc::new(store),
            watched,
            _redis: Box::new(redis),
        });
    }
    if have_redis && options.runs("cluster") {
        let cluster = redis_harness::RedisCluster::start(3);
        let urls = cluster.urls();
        let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
        let store = runtime
            .block_on(RedisStore::connect_cluster(&refs, PREFIX))
            .expect("RedisStore::connect_cluster");
        let service = Service::start(
            &options,
            &[
                ("BACKEND_TYPE", "redis".into()),
                ("REDIS_TYPE", "CLUSTER".into()),
                ("REDIS_URL", urls.join(",")),
            ],
        );
        let watched = Watched {
            server: None,
            redis: urls
                .iter()
                .filter_map(|u| u.rsplit(':').next()?.trim_end_matches('/').parse().ok())
                .filter_map(redis_pid)
                .collect(),
        };
        redis_setups.push(RedisSetup {
            name: "cluster",
            service,
            store: Arc::new(store),
            watched,
            _redis: Box::new(cluster),
        });
    }

    if let Some(pinning) = &pinning {
        for setup in &redis_setups {
            setup
                .watched
                .redis
                .iter()
                .for_each(|&pid| pinning.redis(pid));
            pinning.others(setup.service.child.id());
        }
    }

    let mut series: Vec<Series> = Vec::new();
    for round in 1..=options.rounds {
        println!("round {round}");
        if let Some(service) = &memory {
            let watched = Watched {
                server: Some(service.child.id()),
                redis: Vec::new(),
            };
            if let Some(pinning) = &pinning {
                pinning.all(std::process::id());
            }
            let run = runtime.block_on(load(
                service,
                &options,
                options.concurrency("memory"),
                &watched,
            ));
            record(&mut series, "memory backend", run);
        }
        for RedisSetup {
            name,
            service,
            store,
            watched,
            ..
        } in &redis_setups
        {
            if let Some(pinning) = &pinning {
                pinning.others(std::process::id());
            }
            let in_flight = options.concurrency(name);
            let run = runtime.block_on(ceiling(store.clone(), &options, in_flight, watched));
            record(&mut series, &format!("{name} ceiling (RedisStore)"), run);
            let watched = Watched {
                server: Some(service.child.id()),
                ..watched.clone()
            };
            let run = runtime.block_on(load(service, &options, in_flight, &watched));
            record(&mut series, &format!("{name} backend"), run);
        }
    }

    println!();
    println!(
        "median of {} round(s): | run | {} |",
        options.rounds,
        COLUMNS.join(" | ")
    );
    for s in &series {
        let figures: [f64; 7] =
            std::array::from_fn(|k| median(s.runs.iter().map(|r| r.figures()[k]).collect()));
        print_row(&s.name, &figures);
    }
    for RedisSetup { name, .. } in &redis_setups {
        let service = rates(&series, &format!("{name} backend"));
        let ceiling = rates(&series, &format!("{name} ceiling (RedisStore)"));
        let ratios: Vec<f64> = service
            .iter()
            .zip(&ceiling)
            .map(|(s, c)| s / c.max(1.0))
            .collect();
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{name} backend / ceiling: median {:.2} (rounds {})",
            median(ratios.clone()),
            shown.join(", ")
        );
    }
}
