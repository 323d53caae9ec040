//! A job runner that caps work per second: every job awaits a permit first.
//!
//! Run with `cargo run --example job_runner --features tokio`. It takes about two seconds.
//!
//! 40 small jobs and one large one (10 permits) share 20 permits per second with
//! bursts of 10. Waiters are served first come, first served, so the large job is not
//! starved by the small ones queued after it.

use std::time::{Duration, Instant};

use tollgate::algorithm::Gcra;
use tollgate::{Limiter, Quota};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = Limiter::new(Gcra::new(Quota::per_second(20)?.burst(10)?));
    let start = Instant::now();
    let mut jobs = Vec::new();
    for id in 0..41u64 {
        // Job 15 is large: it needs 10 permits at once.
        let permits = if id == 15 { 10 } else { 1 };
        let limiter = limiter.clone();
        jobs.push(tokio::spawn(async move {
            let waited = limiter.acquire(permits).await?;
            let at = start.elapsed();
            println!(
                "t={:5.2}s  job {id:2} ({permits:2} permit{}) started after waiting {:>7.1?}",
                at.as_secs_f64(),
                if permits == 1 { " " } else { "s" },
                waited
            );
            Ok::<Duration, tollgate::AcquireError>(at)
        }));
        // Jobs arrive a little apart, so the queue order is the arrival order.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut last = Duration::ZERO;
    for job in jobs {
        last = last.max(job.await??);
    }
    println!(
        "\n50 permits at 20/s with a burst of 10: all jobs started within {:.2}s (expected about {:.2}s)",
        last.as_secs_f64(),
        (50.0 - 10.0) / 20.0
    );
    Ok(())
}
