//! An axum server whose capacity has a knee, behind the adaptive tower layer
//! ([`AdaptiveLayer`]), and a load generator in the same process that ramps past
//! that capacity: once with the adaptive limit, once without.
//!
//! ```text
//! cargo run --example adaptive_server --features http,adaptive   # about 18 s
//! ```
//!
//! The handler stands for a backend that answers in 100 ms up to 10 requests at
//! once (the knee: 100 requests a second), and 20 ms slower for each request in
//! flight past the knee, so that past it the backend answers *fewer* requests a
//! second. The server listens on 127.0.0.1 (a free port, printed). The load generator opens
//! requests at a rate ramping from 25 to 300 a second over 8 s and gives up on each
//! after 1 s.
//!
//! With the limit, every request goes through an `AdaptiveLayer` over an
//! [`AdaptiveLimiter`] (Gradient2 fed windowed averages, fail fast): a request
//! takes a permit or is answered 503 at once without reaching the handler; a 200
//! is a success whose latency, measured by the layer to the end of the response
//! body, moves the limit; a request its client gives up on is dropped by the
//! server mid-way, and its permit comes back as ignored. Without it, the same
//! router serves every request.
//!
//! Each second it prints the limit, the requests offered, admitted (answered 200)
//! and refused (503) per second, the requests that timed out, and the p99 latency of
//! the admitted ones. Without the limit, in-flight requests pile up until most time
//! out; with it, the excess is refused at once and p99 stays a few times the
//! latency at the knee.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use tollgate::adaptive::limit::{Gradient2Limit, WindowedBuilder, WindowedLimit};
use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
use tollgate::http::adaptive::AdaptiveLayer;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Limiter = AdaptiveLimiter<WindowedLimit<Gradient2Limit>>;

const BASE: Duration = Duration::from_millis(100);
const KNEE: u64 = 10;
const GROWTH: f64 = 0.2;
const RAMP: (f64, f64) = (25.0, 300.0);
const RAMP_LENGTH: Duration = Duration::from_secs(8);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);

/// Requests the backend is working on: its latency grows with them.
#[derive(Default)]
struct Backend {
    working: AtomicU64,
}

/// Counts a request in the backend while it lives, and out when its connection is
/// dropped mid-way (a client timing out) as well as when it ends.
struct Working<'a>(&'a AtomicU64);

impl Drop for Working<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Backend {
    /// One request: 100 ms, plus 20 % for each request in flight past the knee.
    async fn serve(&self) -> StatusCode {
        let level = self.working.fetch_add(1, Ordering::Relaxed) + 1;
        let _working = Working(&self.working);
        let over = level.saturating_sub(KNEE) as f64;
        tokio::time::sleep(BASE.mul_f64(1.0 + GROWTH * over)).await;
        StatusCode::OK
    }
}

/// What the load generator saw of the requests it opened in one second.
#[derive(Default)]
struct Second {
    offered: u64,
    admitted: Vec<Duration>,
    refused: u64,
    timed_out: u64,
}

/// Serves on 127.0.0.1, behind `limiter` if there is one, and ramps the load.
async fn run(limiter: Option<Arc<Limiter>>) -> Result<(), Error> {
    let backend = Arc::new(Backend::default());
    let app = Router::new().route(
        "/",
        get({
            let backend = Arc::clone(&backend);
            move || async move { backend.serve().await }
        }),
    );
    // The adaptive layer is the only difference between the two runs.
    let app = match &limiter {
        Some(limiter) => app.layer(AdaptiveLayer::new(Arc::clone(limiter))),
        None => app,
    };
    // The error names the address: "Address already in use" alone does not say which.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    let uri: hyper::Uri = format!("http://{addr}/").parse()?;
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let seconds = RAMP_LENGTH.as_secs() as usize;
    let stats: Arc<Vec<Mutex<Second>>> = Arc::new((0..seconds).map(|_| Mutex::default()).collect());
    let start = Instant::now();
    let report = tokio::spawn(print_each_second(
        start,
        Arc::clone(&stats),
        limiter,
        Arc::clone(&backend),
    ));

    // Open-loop arrivals: the next one after 1 / rate, whatever the answers.
    let mut next = start;
    while next - start < RAMP_LENGTH {
        tokio::time::sleep_until(next.into()).await;
        let elapsed = next - start;
        let fraction = elapsed.as_secs_f64() / RAMP_LENGTH.as_secs_f64();
        let rate = RAMP.0 + (RAMP.1 - RAMP.0) * fraction;
        next += Duration::from_secs_f64(1.0 / rate);
        let (client, uri, stats) = (client.clone(), uri.clone(), Arc::clone(&stats));
        let second = (elapsed.as_secs() as usize).min(seconds - 1);
        tokio::spawn(async move {
            let sent = Instant::now();
            let answer = tokio::time::timeout(CLIENT_TIMEOUT, client.get(uri)).await;
            let mut second = stats[second].lock().unwrap();
            second.offered += 1;
            match answer {
                Ok(Ok(response)) if response.status() == StatusCode::OK => {
                    second.admitted.push(sent.elapsed())
                }
                Ok(_) => second.refused += 1,
                Err(_) => second.timed_out += 1,
            }
        });
    }
    // The last requests answer or time out before the last line is printed.
    report.await?;
    server.abort();
    Ok(())
}

/// Prints, a client timeout late (so that the second's requests have all ended),
/// what the requests opened in each second saw.
async fn print_each_second(
    start: Instant,
    stats: Arc<Vec<Mutex<Second>>>,
    limiter: Option<Arc<Limiter>>,
    backend: Arc<Backend>,
) {
    println!(
        " second  limit  in flight  offered/s  admitted/s  refused/s  timed out  p99 admitted"
    );
    for second in 0..RAMP_LENGTH.as_secs() {
        let end = start + Duration::from_secs(second + 1);
        tokio::time::sleep_until(end.into()).await;
        // Sampled at the end of the second.
        let limit = limiter
            .as_ref()
            .map_or("-".to_owned(), |l| l.limit().to_string());
        let working = backend.working.load(Ordering::Relaxed);
        tokio::time::sleep_until((end + CLIENT_TIMEOUT).into()).await;
        let mut s = stats[second as usize].lock().unwrap();
        s.admitted.sort_unstable();
        let p99 = match s.admitted.len() {
            0 => "-".to_owned(),
            n => format!("{:?}", s.admitted[(n * 99).div_ceil(100) - 1]),
        };
        println!(
            "{:>7}  {limit:>5}  {working:>9}  {:>9}  {:>10}  {:>9}  {:>9}  {p99:>12}",
            second + 1,
            s.offered,
            s.admitted.len(),
            s.refused,
            s.timed_out,
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Gradient2 from 10 within [1, 200], fed the average of windows of 100 to
    // 200 ms: a steadier limit than one sample at a time.
    let gradient2 = Gradient2Limit::builder()
        .min_limit(1)
        .initial_limit(10)
        .max_limit(200)
        .build()?;
    let windowed = WindowedBuilder::new()
        .min_window(Duration::from_millis(100))
        .max_window(Duration::from_millis(200))
        .build(gradient2)?;
    let limiter = Arc::new(AdaptiveLimiter::new(windowed, WhenLimited::FailFast)?);

    println!(
        "A backend with a knee at {KNEE} in flight ({} requests/s), load ramping {} -> {} requests/s.\n",
        (KNEE as f64 / BASE.as_secs_f64()) as u64,
        RAMP.0,
        RAMP.1
    );
    println!(
        "With the adaptive limit (AdaptiveLayer, Windowed Gradient2, fail fast: 503 when full):"
    );
    run(Some(limiter)).await?;
    println!("\nWithout a limit (the same router, no layer):");
    run(None).await?;
    Ok(())
}
