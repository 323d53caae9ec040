//! A client held to a third-party API's limit, with tollgate's client layer.
//!
//! A fake API on 127.0.0.1 serves at most 5 calls in any rolling second and refuses
//! the rest with `429 Too Many Requests` and a `Retry-After`. Two clients call it
//! through hyper-util's client wrapped in a `ThrottleLayer`:
//!
//! 1. One that knows the limit (5 per 1.05 s, a margin for the delay between a grant
//!    and the call reaching the API): bursts of calls wait their turn, and the API
//!    refuses none.
//! 2. One that thinks the limit is 10 per second: the API refuses its excess, the
//!    layer pauses every caller for the `Retry-After`, and the refused calls, retried
//!    by a loop outside the layer, wait out the pause and get through.
//!
//! Run with `cargo run --example api_client --features http`. It takes about three
//! seconds.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, ServiceExt};

use tollgate::algorithm::{Algorithm, Gcra, SlidingLog};
use tollgate::http::client::{Throttle, ThrottleLayer};
use tollgate::time::MonotonicClock;
use tollgate::{Limiter, PermitSource, Quota};

type Error = Box<dyn std::error::Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// The API's limit: calls in any rolling second.
const API_LIMIT: usize = 5;

/// The fake API: its record of the calls it served, and of those it refused.
#[derive(Default)]
struct Api {
    served: Mutex<VecDeque<Instant>>,
    all_served: Mutex<Vec<Instant>>,
    refused: Mutex<usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Api {
    /// Serves a call if fewer than 5 were served in the last second; otherwise refuses
    /// it, saying when the oldest of them leaves the window.
    fn answer(&self) -> axum::response::Response {
        let now = Instant::now();
        let mut served = lock(&self.served);
        while served
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            served.pop_front();
        }
        if served.len() >= API_LIMIT {
            *lock(&self.refused) += 1;
            let free_in = served.front().map_or(Duration::ZERO, |t| {
                Duration::from_secs(1) - now.duration_since(*t)
            });
            // Retry-After counts whole seconds: round up.
            let retry_after = free_in.as_secs() + u64::from(free_in.subsec_nanos() > 0);
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after.to_string())],
                "slow down",
            )
                .into_response();
        }
        served.push_back(now);
        lock(&self.all_served).push(now);
        (StatusCode::OK, "here you are").into_response()
    }

    /// The most calls served in any one-second window.
    fn busiest_second(&self) -> usize {
        let served = lock(&self.all_served);
        (0..served.len())
            .map(|i| {
                served[i..]
                    .iter()
                    .take_while(|t| t.duration_since(served[i]) < Duration::from_secs(1))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

async fn start_api() -> Result<(SocketAddr, Arc<Api>), Error> {
    let api = Arc::new(Api::default());
    // The error names the address: "Address already in use" alone does not say which.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?;
    let addr = listener.local_addr()?;
    let state = Arc::clone(&api);
    let app = Router::new().fallback(move || {
        let api = Arc::clone(&state);
        async move { api.answer() }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, api))
}

/// Calls `/items/{n}` until the API serves it; prints each answer.
async fn call<P: PermitSource<Error = std::convert::Infallible>>(
    client: Throttle<HttpClient, P>,
    addr: SocketAddr,
    n: u32,
    start: Instant,
) -> Result<u32, Error> {
    let mut refusals = 0;
    loop {
        let request = http::Request::get(format!("http://{addr}/items/{n}")).body(Empty::new())?;
        let response = client.clone().oneshot(request).await?;
        println!(
            "  t={:4.2}s  call {n:2}: {}",
            start.elapsed().as_secs_f64(),
            response.status()
        );
        if response.status() != StatusCode::TOO_MANY_REQUESTS {
            return Ok(refusals);
        }
        // The layer has paused every caller; the retry waits out the pause.
        refusals += 1;
    }
}

/// Sends `calls` calls through `layer`: `first` at once, the rest a second later.
async fn run<A: Algorithm>(
    layer: ThrottleLayer<Limiter<A, MonotonicClock>>,
    calls: u32,
    first: u32,
) -> Result<(), Error> {
    let (addr, api) = start_api().await?;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let service = layer.layer(client);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for n in 0..calls {
        if n == first {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tasks.push(tokio::spawn(call(service.clone(), addr, n, start)));
    }
    let mut retries = 0;
    for task in tasks {
        retries += task.await??;
    }
    println!(
        "  {calls} calls served in {:.2}s; the API refused {} and never served more than {} in a second ({} allowed).\n",
        start.elapsed().as_secs_f64(),
        retries,
        api.busiest_second(),
        API_LIMIT,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    println!("A client that knows the limit: 12 calls, 8 at once and 4 a second later.");
    let knows = Limiter::new(SlidingLog::new(
        API_LIMIT as u64,
        Duration::from_millis(1050),
    )?);
    run(ThrottleLayer::new(knows), 12, 8).await?;

    println!("A client that thinks the limit is 10 a second: 10 calls at once.");
    let wrong = Limiter::new(Gcra::new(Quota::per_second(10)?.burst(10)?));
    run(ThrottleLayer::new(wrong), 10, 10).await?;
    Ok(())
}
