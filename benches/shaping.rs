//! Shaping a writer to a byte rate, in real time: tollgate's `Shaped` writer next to
//! async-speed-limit's `Resource`, both as futures-io `AsyncWrite`s over the same
//! in-memory sink, at 1 MiB/s with a 64 KiB bucket, fed the same `write_all` calls
//! for 10 s. The sink logs the wall time and length of every write it receives.
//! Reports, per peer and write size:
//!
//! - **in T / allowed**: the bytes the sink received within the run's T seconds, over
//!   what a token bucket allows in T: `rate × T + bucket` (the bucket starts full).
//!   A write due just after T counts for nothing, so this reads a little under 1.
//! - **sustained**: the bytes of the writes after the first one at or past T/10,
//!   over the time from that write to the last, over the rate: the rate kept once
//!   the start is over (whatever each peer's start looks like).
//! - **largest excess**: over every interval between two writes the sink received,
//!   the bytes in it minus `rate × its length`: the smallest bucket a token bucket at
//!   this rate would need to let the flow through. A shaper true to a 64 KiB bucket
//!   stays at or below 64 KiB.
//! - **busiest window**: the most bytes in any window of `bucket / rate` (62.5 ms). A
//!   token bucket allows up to twice the bucket there (a full bucket, then what
//!   refills during the window).
//! - **largest write**: the largest single write the sink received.
//!
//! Run `cargo bench -p tollgate-benches --bench shaping --features futures-io` (about
//! 40 s; without the feature it says so and stops). Under
//! `cargo test -p tollgate-benches --benches` (no `--bench` argument) every case runs
//! for 0.3 s. Options after `--`: `--secs S`.

#[cfg(feature = "futures-io")]
fn main() {
    run::main();
}

#[cfg(not(feature = "futures-io"))]
fn main() {
    eprintln!(
        "the shaping benchmark drives futures-io writers: \
         cargo bench -p tollgate-benches --bench shaping --features futures-io"
    );
}

#[cfg(feature = "futures-io")]
mod run {
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};

    use futures::io::{AsyncWrite, AsyncWriteExt};
    use tollgate::algorithm::Gcra;
    use tollgate::shape::Shaped;
    use tollgate::{Limiter, Quota};

    const RATE: u64 = 1 << 20;
    const BUCKET: u64 = 64 << 10;
    const WRITES: [usize; 2] = [16 << 10, 256 << 10];

    /// When each write reached the sink, and its length.
    type Log = Vec<(Duration, usize)>;

    /// One peer's run: the write size and the time to run for, and the sink's log.
    type Run = fn(usize, Duration) -> Log;

    /// Logs the time and length of every write, and takes it all.
    struct Sink {
        origin: Instant,
        log: Log,
    }

    impl AsyncWrite for Sink {
        fn poll_write(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            this.log.push((this.origin.elapsed(), buf.len()));
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Writes `size` bytes at a time until `secs` have passed.
    async fn feed<W: AsyncWrite + Unpin>(writer: &mut W, size: usize, secs: Duration) {
        let buf = vec![0u8; size];
        let end = Instant::now() + secs;
        while Instant::now() < end {
            writer
                .write_all(&buf)
                .await
                .expect("the sink takes everything");
        }
    }

    fn tollgate(size: usize, secs: Duration) -> Log {
        let quota = Quota::per_second(RATE).unwrap().burst(BUCKET).unwrap();
        let limiter = Limiter::new(Gcra::new(quota));
        let sink = Sink {
            origin: Instant::now(),
            log: Vec::new(),
        };
        let mut writer = Shaped::new(sink, limiter);
        futures::executor::block_on(feed(&mut writer, size, secs));
        writer.into_inner().log
    }

    fn async_speed_limit(size: usize, secs: Duration) -> Log {
        // Its bucket holds `rate × refill`: 64 KiB at 62.5 ms.
        let limiter = <async_speed_limit::Limiter>::builder(RATE as f64)
            .refill(Duration::from_secs_f64(BUCKET as f64 / RATE as f64))
            .build();
        let sink = Sink {
            origin: Instant::now(),
            log: Vec::new(),
        };
        let mut writer = limiter.limit(sink);
        futures::executor::block_on(feed(&mut writer, size, secs));
        writer.into_inner().log
    }

    struct Figures {
        passed: u64,
        sustained: f64,
        writes: usize,
        excess: f64,
        window: u64,
        largest: usize,
    }

    fn figures(log: &[(Duration, usize)], secs: Duration) -> Figures {
        let log: Vec<(f64, u64)> = log
            .iter()
            .filter(|(at, _)| *at <= secs)
            .map(|&(at, n)| (at.as_secs_f64(), n as u64))
            .collect();
        let rate = RATE as f64;
        // Bytes in writes i..=j less rate × (t_j − t_i), maximised over i ≤ j in one
        // pass: (S_j − rate·t_j) + max over i of (rate·t_i − S_{i−1}).
        let (mut before, mut best_start, mut excess) = (0u64, f64::MIN, 0f64);
        for &(at, n) in &log {
            best_start = best_start.max(rate * at - before as f64);
            before += n;
            excess = excess.max(before as f64 - rate * at + best_start);
        }
        let width = BUCKET as f64 / rate;
        let (mut start, mut inside, mut window) = (0, 0u64, 0u64);
        for &(at, n) in &log {
            inside += n;
            while log[start].0 <= at - width {
                inside -= log[start].1;
                start += 1;
            }
            window = window.max(inside);
        }
        let from = log
            .iter()
            .position(|&(at, _)| at >= secs.as_secs_f64() / 10.0)
            .unwrap_or(0);
        let sustained = match (log.get(from), log.last()) {
            (Some(first), Some(last)) if last.0 > first.0 => {
                let bytes: u64 = log[from + 1..].iter().map(|&(_, n)| n).sum();
                bytes as f64 / (last.0 - first.0) / rate
            }
            _ => 0.0,
        };
        Figures {
            passed: before,
            sustained,
            writes: log.len(),
            excess,
            window,
            largest: log.iter().map(|&(_, n)| n as usize).max().unwrap_or(0),
        }
    }

    pub(super) fn main() {
        let args: Vec<String> = std::env::args().collect();
        let mut secs = if args.iter().any(|a| a == "--bench") {
            Duration::from_secs(10)
        } else {
            Duration::from_millis(300)
        };
        if let Some(i) = args.iter().position(|a| a == "--secs") {
            let s = args
                .get(i + 1)
                .and_then(|s| s.parse::<f64>().ok())
                .and_then(|s| Duration::try_from_secs_f64(s).ok());
            secs = s.expect("--secs takes a number of seconds");
        }
        println!(
            "shaping: {} KiB/s, bucket {} KiB, {:.1} s per case",
            RATE >> 10,
            BUCKET >> 10,
            secs.as_secs_f64()
        );
        println!(
            "| peer | write | sink writes | in T / allowed | sustained | largest excess | busiest {:.1} ms | largest write |",
            BUCKET as f64 / RATE as f64 * 1e3
        );
        println!("|---|---|---|---|---|---|---|---|");
        let allowed = RATE as f64 * secs.as_secs_f64() + BUCKET as f64;
        for size in WRITES {
            let peers: [(&str, Run); 2] = [
                ("tollgate", tollgate),
                ("async-speed-limit", async_speed_limit),
            ];
            for (name, run) in peers {
                let f = figures(&run(size, secs), secs);
                println!(
                    "| {name} | {} KiB | {} | {:.4} | {:.4} | {:.1} KiB | {} KiB | {} KiB |",
                    size >> 10,
                    f.writes,
                    f.passed as f64 / allowed,
                    f.sustained,
                    f.excess / 1024.0,
                    f.window >> 10,
                    f.largest >> 10,
                );
            }
        }
    }
}
