//! tollgate in real time: a few limiters fed by a steady stream of requests.
//!
//! Run with `cargo run --example quickstart`. It takes about a second and a half.

use std::time::{Duration, Instant};

use tollgate::algorithm::{AllOf, Gcra};
use tollgate::{Limiter, Quota};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("Token bucket (GCRA): 5 per second, bursts of 3; a request every 50 ms for 1 s");
    let bucket = Limiter::new(Gcra::new(Quota::per_second(5)?.burst(3)?));
    drive(Duration::from_millis(50), Duration::from_secs(1), |_| {
        bucket.try_acquire(1)
    });

    println!(
        "\nTwo rules at once: 10 per second AND 3 per 100 ms; a request every 25 ms for 0.5 s"
    );
    let rules = Limiter::new(AllOf::new(vec![
        Gcra::new(Quota::per_second(10)?),
        Gcra::new(Quota::new(3, Duration::from_millis(100))?),
    ])?);
    drive(
        Duration::from_millis(25),
        Duration::from_millis(500),
        |_| rules.try_acquire(1),
    );

    println!("\nAsking for more than a limiter can ever grant is an error, not a wait:");
    match bucket.try_acquire(4) {
        Err(denied) if denied.is_never() => println!("  try_acquire(4) -> {denied}"),
        other => println!("  unexpected: {other:?}"),
    }
    Ok(())
}

/// Sends a request every `every` for `total`, printing each decision with its time.
fn drive(every: Duration, total: Duration, mut decide: impl FnMut(u32) -> tollgate::Decision) {
    let start = Instant::now();
    let mut admitted = 0;
    let mut denied = 0;
    let mut i = 0;
    while start.elapsed() < total {
        let t = start.elapsed().as_secs_f64();
        match decide(i) {
            Ok(a) => {
                admitted += 1;
                println!("  t={t:5.3}s  admitted  (remaining {})", a.remaining());
            }
            Err(d) => {
                denied += 1;
                let retry = d.retry_after().unwrap_or_default();
                println!("  t={t:5.3}s  denied    (retry after {retry:.0?})");
            }
        }
        i += 1;
        let next = every * i;
        if let Some(pause) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(pause);
        }
    }
    println!("  => {admitted} admitted, {denied} denied");
}
