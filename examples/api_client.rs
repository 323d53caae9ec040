//! An outbound API client held to a hard limit: never more than 5 calls in any
//! second, however the calls bunch up, with each call's wait shown.
//!
//! Run with `cargo run --example api_client`. It takes about four seconds.
//!
//! A sliding-window log is exact: no rolling window ever holds a sixth *grant*. But a
//! call happens a little after its grant, and that delay varies (here, task
//! scheduling; for a real API, the network too), so two calls can land closer than
//! their grants were. The client therefore keeps a margin: 5 calls per 1.05 s. The
//! fake API below counts on the limiter's clock and panics on a sixth call within any
//! second.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tollgate::algorithm::SlidingLog;
use tollgate::clock::Nanos;
use tollgate::Limiter;

/// Stands in for a third-party API that bans clients going over 5 calls per second.
struct ThirdPartyApi {
    calls: Mutex<VecDeque<Nanos>>,
}

impl ThirdPartyApi {
    fn call(&self, request: u32, now: Nanos) -> String {
        let mut calls = self.calls.lock().unwrap();
        while calls
            .front()
            .is_some_and(|t| now.saturating_since(*t) >= Duration::from_secs(1))
        {
            calls.pop_front();
        }
        assert!(calls.len() < 5, "the API would have banned us");
        calls.push_back(now);
        format!("response to request {request}")
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 5% margin over the API's 5 per second, for the grant-to-call delay.
    let limiter = Limiter::new(SlidingLog::new(5, Duration::from_millis(1050))?);
    let api = Arc::new(ThirdPartyApi {
        calls: Mutex::new(VecDeque::new()),
    });
    let start = Instant::now();
    // 18 requests arrive in two bursts: 12 at once, then 6 more a second later.
    let mut calls = Vec::new();
    for request in 0..18u32 {
        if request == 12 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let (limiter, api) = (limiter.clone(), Arc::clone(&api));
        calls.push(tokio::spawn(async move {
            let waited = limiter.acquire(1).await?;
            let response = api.call(request, limiter.now());
            println!(
                "t={:5.2}s  request {request:2} waited {:>8.1?}  -> {response}",
                start.elapsed().as_secs_f64(),
                waited
            );
            Ok::<(), tollgate::wait::AcquireError>(())
        }));
    }
    for call in calls {
        call.await??;
    }
    println!(
        "\n18 calls in {:.2}s, never more than 5 in any second at the API.",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
