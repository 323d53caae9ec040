//! The cost of idle limiters: 100,000 limiters of every algorithm on the default
//! clock, some of which served waiters (so the global scheduler thread ran), left
//! alone for 3 s. Reports what the global scheduler did meanwhile (its counters, and
//! its thread's CPU time and context switches from `/proc`) and the process's RSS.
//!
//! A limiter with no waiter sets no alarm, so the target is no wake-up and no CPU
//! while idle: the thread should exit after its one-second linger.
//!
//! Linux only (reads `/proc/self`). Run `cargo bench -p tollgate-benches --bench idle`
//! (about 6 s).

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use futures::future::join_all;
use tollgate::algorithm::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter, SlidingLog,
    SmoothBursty,
};
use tollgate::time::{Scheduler, SchedulerStats};
use tollgate::{LeakyQueue, Limiter, Quota, Semaphore};

const IDLE: usize = 100_000;
/// Limiters of each waiting kind that serve a few waiters before going idle.
const SERVED: usize = 100;
/// Waiters per served limiter; all but the first wait.
const WAITERS: usize = 3;
const QUIET: Duration = Duration::from_secs(3);
/// The thread's name as `/proc` shows it: truncated to 15 bytes.
const THREAD_COMM: &str = "tollgate-schedu";

/// Every limiter the run keeps alive.
#[derive(Default)]
struct Limiters {
    gcra: Vec<Limiter<Gcra>>,
    leaky_bucket: Vec<Limiter<LeakyBucket>>,
    fixed_window: Vec<Limiter<FixedWindow>>,
    sliding_log: Vec<Limiter<SlidingLog>>,
    sliding_counter: Vec<Limiter<SlidingCounter>>,
    smooth: Vec<Limiter<SmoothBursty>>,
    refresh: Vec<Limiter<RefreshPeriod>>,
    semaphores: Vec<Semaphore>,
    queues: Vec<LeakyQueue>,
}

impl Limiters {
    fn len(&self) -> usize {
        self.gcra.len()
            + self.leaky_bucket.len()
            + self.fixed_window.len()
            + self.sliding_log.len()
            + self.sliding_counter.len()
            + self.smooth.len()
            + self.refresh.len()
            + self.semaphores.len()
            + self.queues.len()
    }
}

/// `count` limiters of `algorithm`; every other one takes a permit, as a limiter
/// that was used once and then left alone.
fn limiters<A: Algorithm>(count: usize, algorithm: impl Fn() -> A) -> Vec<Limiter<A>> {
    (0..count)
        .map(|i| {
            let limiter = Limiter::new(algorithm());
            if i % 2 == 0 {
                let _ = limiter.try_acquire(1);
            }
            limiter
        })
        .collect()
}

fn build_idle() -> Limiters {
    let kinds = 9;
    let each = IDLE / kinds;
    let ms = Duration::from_millis;
    let quota = || Quota::per_second(100).expect("valid");
    let mut all = Limiters {
        gcra: limiters(each, || Gcra::new(quota())),
        leaky_bucket: limiters(each, || LeakyBucket::new(10, quota()).expect("valid")),
        fixed_window: limiters(each, || FixedWindow::new(100, ms(1000)).expect("valid")),
        sliding_log: limiters(each, || SlidingLog::new(10, ms(1000)).expect("valid")),
        sliding_counter: limiters(each, || SlidingCounter::new(100, ms(1000)).expect("valid")),
        smooth: limiters(each, || SmoothBursty::new(100.0).expect("valid")),
        refresh: limiters(each, || {
            RefreshPeriod::new(100, ms(1000), Duration::ZERO).expect("valid")
        }),
        semaphores: (0..each)
            .map(|_| Semaphore::new(10).expect("valid"))
            .collect(),
        queues: Vec::new(),
    };
    let rest = IDLE - all.len();
    all.queues = (0..rest)
        .map(|_| LeakyQueue::new(100, quota()).expect("valid"))
        .collect();
    all
}

/// Limiters that make their callers wait a few milliseconds, through the global
/// scheduler, and are then left idle. Returns them with the time the waits took.
fn serve_waiters() -> (Limiters, Duration) {
    let ms = Duration::from_millis;
    let fast = || {
        Quota::per_second(1_000)
            .and_then(|q| q.burst(1))
            .expect("valid")
    };
    let served = Limiters {
        gcra: (0..SERVED)
            .map(|_| Limiter::new(Gcra::new(fast())))
            .collect(),
        leaky_bucket: (0..SERVED)
            .map(|_| Limiter::new(LeakyBucket::new(10, fast()).expect("valid")))
            .collect(),
        fixed_window: (0..SERVED)
            .map(|_| Limiter::new(FixedWindow::new(1, ms(2)).expect("valid")))
            .collect(),
        sliding_log: (0..SERVED)
            .map(|_| Limiter::new(SlidingLog::new(1, ms(2)).expect("valid")))
            .collect(),
        refresh: (0..SERVED)
            .map(|_| Limiter::new(RefreshPeriod::new(1, ms(2), ms(100)).expect("valid")))
            .collect(),
        semaphores: (0..SERVED)
            .map(|_| Semaphore::new(1).expect("valid"))
            .collect(),
        queues: (0..SERVED)
            .map(|_| LeakyQueue::new(10, fast()).expect("valid"))
            .collect(),
        ..Limiters::default()
    };
    let start = Instant::now();
    block_on(async {
        let mut waits = Vec::new();
        for _ in 0..WAITERS {
            waits.extend(served.gcra.iter().map(|l| boxed(l.acquire(1))));
            waits.extend(served.leaky_bucket.iter().map(|l| boxed(l.acquire(1))));
            waits.extend(served.fixed_window.iter().map(|l| boxed(l.acquire(1))));
            waits.extend(served.sliding_log.iter().map(|l| boxed(l.acquire(1))));
            waits.extend(served.refresh.iter().map(|l| boxed(l.acquire(1))));
            waits.extend(served.queues.iter().map(|q| boxed(q.enqueue(1))));
        }
        for outcome in join_all(waits).await {
            outcome.expect("served");
        }
        // Semaphore waiters are woken by releases, not alarms.
        let held: Vec<_> = served
            .semaphores
            .iter()
            .map(|s| s.try_acquire(1).expect("free"))
            .collect();
        let waiting = join_all(served.semaphores.iter().map(|s| s.acquire(1)));
        let release = async move { drop(held) };
        let (granted, ()) = futures::join!(waiting, release);
        for permit in granted {
            drop(permit.expect("served"));
        }
    });
    (served, start.elapsed())
}

type Waited<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Duration, tollgate::AcquireError>> + 'a>,
>;

fn boxed<'a>(
    future: impl std::future::Future<Output = Result<Duration, tollgate::AcquireError>> + 'a,
) -> Waited<'a> {
    Box::pin(future)
}

/// The scheduler thread as `/proc` shows it.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadSample {
    /// utime + stime, in clock ticks.
    ticks: u64,
    /// Time on CPU in ns, from schedstat (finer than ticks), if the kernel keeps it.
    run_ns: Option<u64>,
    /// Times the thread blocked and was woken again.
    voluntary_switches: u64,
}

/// The scheduler thread, if it is running.
fn scheduler_thread() -> Option<ThreadSample> {
    for task in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != THREAD_COMM {
            continue;
        }
        let stat = fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        let ticks = field(14)? + field(15)?;
        let run_ns = fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        let voluntary_switches = fs::read_to_string(dir.join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0);
        return Some(ThreadSample {
            ticks,
            run_ns,
            voluntary_switches,
        });
    }
    None
}

fn rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100)
}

fn delta(before: SchedulerStats, after: SchedulerStats) -> String {
    format!(
        "wake-ups {}, alarms set {}, alarms rung {}, threads started {}, running at end {}",
        after.wakeups - before.wakeups,
        after.alarms_set - before.alarms_set,
        after.alarms_rung - before.alarms_rung,
        after.threads_started - before.threads_started,
        after.running
    )
}

fn main() {
    let scheduler = Scheduler::global();
    let tick_ms = 1000.0 / ticks_per_second() as f64;
    let rss_start = rss_kib();
    let stats_start = scheduler.stats();

    let building = Instant::now();
    let idle = build_idle();
    let built_in = building.elapsed();
    let rss_idle = rss_kib();
    let stats_built = scheduler.stats();
    println!(
        "built {} idle limiters (9 kinds, half used once) in {:.0} ms: RSS {} -> {} KiB ({:.0} B each); \
         scheduler: {}",
        idle.len(),
        built_in.as_secs_f64() * 1e3,
        rss_start,
        rss_idle,
        (rss_idle.saturating_sub(rss_start) * 1024) as f64 / idle.len() as f64,
        delta(stats_start, stats_built)
    );

    let (served, took) = serve_waiters();
    let stats_served = scheduler.stats();
    println!(
        "served {} limiters x {WAITERS} waiters in {:.1} ms; scheduler: {}",
        served.len(),
        took.as_secs_f64() * 1e3,
        delta(stats_built, stats_served)
    );

    // Idle from here on.
    let quiet_start = Instant::now();
    let at_start = scheduler_thread();
    let mut last_seen = at_start;
    let mut exited_after = None;
    while quiet_start.elapsed() < QUIET {
        thread::sleep(Duration::from_millis(20));
        match scheduler_thread() {
            Some(sample) => last_seen = Some(sample),
            None => {
                if exited_after.is_none() {
                    exited_after = Some((quiet_start.elapsed(), scheduler.stats()));
                }
            }
        }
    }
    let stats_end = scheduler.stats();
    let rss_end = rss_kib();

    println!(
        "idle {:.0} s with {} limiters ({} idle + {} that served waiters):",
        QUIET.as_secs_f64(),
        idle.len() + served.len(),
        idle.len(),
        served.len()
    );
    println!("  scheduler: {}", delta(stats_served, stats_end));
    match (at_start, last_seen) {
        (Some(first), Some(last)) => {
            let ticks = last.ticks - first.ticks;
            let run = match (first.run_ns, last.run_ns) {
                (Some(a), Some(b)) => format!(", {:.3} ms by schedstat", (b - a) as f64 / 1e6),
                _ => String::new(),
            };
            println!(
                "  scheduler thread while idle, until it exited: CPU {} ticks = {:.0} ms{run}; \
                 voluntary context switches {}",
                ticks,
                ticks as f64 * tick_ms,
                last.voluntary_switches - first.voluntary_switches
            );
        }
        _ => println!("  scheduler thread while idle: not running"),
    }
    match exited_after {
        Some((after, at_exit)) => println!(
            "  scheduler thread exited {:.2} s into the idle period (linger 1 s); \
             in the {:.2} s after: no thread, so no CPU; {}",
            after.as_secs_f64(),
            (QUIET - after).as_secs_f64(),
            delta(at_exit, stats_end)
        ),
        None => println!("  scheduler thread still running at the end"),
    }
    println!("  RSS at end: {rss_end} KiB");
    drop((idle, served));
}
