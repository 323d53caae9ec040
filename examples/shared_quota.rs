//! Two processes share one quota through Redis: each admits only its share, and
//! together they admit what one process alone would.
//!
//! Run with `cargo run --release --features redis --example shared_quota`. It uses the
//! Redis at `REDIS_URL` if set; otherwise it starts a private `redis-server` on a free
//! loopback port (killed at exit). It takes about four seconds.
//!
//! The parent starts itself twice as workers (`--worker A`, `--worker B`). Each worker
//! runs several tasks that call `check` on one key of a `SharedLimiter` (GCRA,
//! 100 per second, bursts of 10) for three seconds, waiting a denial's `retry_after`
//! before trying again, as a polite client does. The workers print their counts; the
//! parent prints them side by side against the quota.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tollgate::Quota;
use tollgate::algorithm::Gcra;
use tollgate::store::{RedisStore, SharedLimiter};

const RATE_PER_SECOND: u64 = 100;
const BURST: u64 = 10;
const RUN: Duration = Duration::from_secs(3);
const TASKS_PER_WORKER: usize = 4;
/// Lets both workers start and connect before the common start instant.
const START_DELAY: Duration = Duration::from_millis(700);
const WORKERS: [&str; 2] = ["A", "B"];

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--worker") => worker(&args[1..]),
        None => parent(),
        Some(other) => Err(format!("unknown argument {other:?}").into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shared_quota: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a worker reports: its counts, and when its first request left and its last
/// answer came (µs since the epoch), which bound the span the quota applies to.
#[derive(Debug, Default, Clone, Copy)]
struct Report {
    admitted: u64,
    denied: u64,
    errors: u64,
    first_sent: u64,
    last_answered: u64,
}

impl Report {
    fn to_line(self) -> String {
        format!(
            "admitted={} denied={} errors={} first_sent={} last_answered={}",
            self.admitted, self.denied, self.errors, self.first_sent, self.last_answered
        )
    }

    fn parse(line: &str) -> Result<Report, Error> {
        let mut report = Report::default();
        for field in line.split_whitespace() {
            let (name, value) = field
                .split_once('=')
                .ok_or_else(|| format!("bad field {field:?}"))?;
            let value: u64 = value.parse()?;
            match name {
                "admitted" => report.admitted = value,
                "denied" => report.denied = value,
                "errors" => report.errors = value,
                "first_sent" => report.first_sent = value,
                "last_answered" => report.last_answered = value,
                _ => return Err(format!("unknown field {name:?}").into()),
            }
        }
        Ok(report)
    }
}

fn parent() -> Result<(), Error> {
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = PrivateRedis::start()?;
            (server.url(), Some(server))
        }
    };
    // A fresh prefix per run: earlier runs on a shared Redis leave no state in the way.
    let prefix = format!("shared-quota-{}", std::process::id());
    let start_at = unix_micros() + START_DELAY.as_micros() as u64;

    println!(
        "One key, GCRA {RATE_PER_SECOND}/s with bursts of {BURST}, in Redis at {url}\n\
         {} worker processes x {TASKS_PER_WORKER} tasks, {:.1} s each, from the same instant\n",
        WORKERS.len(),
        RUN.as_secs_f64()
    );
    let exe = std::env::current_exe()?;
    let children: Vec<(&str, Child)> = WORKERS
        .iter()
        .map(|name| {
            let child = Command::new(&exe)
                .args(["--worker", name, &url, &prefix, &start_at.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()?;
            Ok((*name, child))
        })
        .collect::<Result<_, std::io::Error>>()?;

    // Wait for both before judging either, so that neither outlives us.
    let outputs: Vec<_> = children
        .into_iter()
        .map(|(name, child)| (name, child.wait_with_output()))
        .collect();
    let mut reports = Vec::new();
    for (name, output) in outputs {
        let output = output?;
        if !output.status.success() {
            return Err(format!("worker {name} failed: {}", output.status).into());
        }
        let stdout = String::from_utf8(output.stdout)?;
        reports.push((name, Report::parse(stdout.trim())?));
    }

    let total = reports
        .iter()
        .fold(Report::default(), |sum, (_, r)| Report {
            admitted: sum.admitted + r.admitted,
            denied: sum.denied + r.denied,
            errors: sum.errors + r.errors,
            first_sent: 0,
            last_answered: 0,
        });
    let row = |label: &str, value: fn(&Report) -> u64| {
        let mut line = format!("{label:<10}");
        for (_, report) in &reports {
            line += &format!("{:>10}", value(report));
        }
        line += &format!("{:>10}", value(&total));
        println!("{line}");
    };
    let mut header = format!("{:<10}", "");
    for (name, _) in &reports {
        header += &format!("{:>10}", format!("worker {name}"));
    }
    println!("{header}{:>10}", "total");
    row("admitted", |r| r.admitted);
    row("denied", |r| r.denied);
    row("errors", |r| r.errors);

    // Every admission was decided between the first request and the last answer: in a
    // span of s seconds GCRA admits at most the burst plus s × rate (one more at the
    // edge of an interval).
    let first = reports.iter().map(|(_, r)| r.first_sent).min().unwrap_or(0);
    let last = reports
        .iter()
        .map(|(_, r)| r.last_answered)
        .max()
        .unwrap_or(0);
    let span = Duration::from_micros(last.saturating_sub(first));
    let quota = BURST + (span.as_secs_f64() * RATE_PER_SECOND as f64).floor() as u64 + 1;
    println!(
        "\nquota over the {:.3} s the workers ran: {BURST} + {RATE_PER_SECOND}/s x {:.3} s = {quota}",
        span.as_secs_f64(),
        span.as_secs_f64()
    );
    println!(
        "total admitted: {} ({:.1}% of the quota; two unshared limiters would admit up to {})",
        total.admitted,
        100.0 * total.admitted as f64 / quota as f64,
        2 * quota
    );
    if total.errors > 0 {
        return Err(format!("{} requests failed", total.errors).into());
    }
    if total.admitted > quota {
        return Err(format!("the quota did not hold: {} > {quota}", total.admitted).into());
    }
    println!("the quota held across both processes");
    Ok(())
}

/// `--worker NAME URL PREFIX START_UNIX_MICROS`: runs the tasks and prints a report line.
fn worker(args: &[String]) -> Result<(), Error> {
    let [name, url, prefix, start_at] = args else {
        return Err("usage: --worker NAME URL PREFIX START_UNIX_MICROS".into());
    };
    let start_at: u64 = start_at.parse()?;
    run_worker(url, prefix, start_at).map_err(|e| format!("worker {name}: {e}").into())
}

fn run_worker(url: &str, prefix: &str, start_at: u64) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let store = RedisStore::connect(url, prefix).await?;
        let quota = Quota::per_second(RATE_PER_SECOND)?.burst(BURST)?;
        let limiter = SharedLimiter::new(store, Gcra::new(quota))?;
        tokio::time::sleep(Duration::from_micros(
            start_at.saturating_sub(unix_micros()),
        ))
        .await;
        let end = Instant::now() + RUN;
        let tasks: Vec<_> = (0..TASKS_PER_WORKER)
            .map(|_| tokio::spawn(hammer(limiter.clone(), end)))
            .collect();
        let mut report = Report {
            first_sent: u64::MAX,
            ..Report::default()
        };
        for task in tasks {
            let r = task.await?;
            report.admitted += r.admitted;
            report.denied += r.denied;
            report.errors += r.errors;
            report.first_sent = report.first_sent.min(r.first_sent);
            report.last_answered = report.last_answered.max(r.last_answered);
        }
        Ok::<_, Error>(report)
    })?;
    println!("{}", report.to_line());
    Ok(())
}

/// One task: `check` until `end`, sleeping a denial's `retry_after`.
async fn hammer(limiter: SharedLimiter<RedisStore>, end: Instant) -> Report {
    let mut report = Report {
        first_sent: unix_micros(),
        ..Report::default()
    };
    while Instant::now() < end {
        let decision = limiter.check("shared", 1).await;
        report.last_answered = unix_micros();
        match decision {
            Ok(Ok(_)) => report.admitted += 1,
            Ok(Err(denied)) => {
                report.denied += 1;
                let wait = denied.retry_after().unwrap_or(Duration::from_millis(1));
                let wake = (Instant::now() + wait).min(end);
                tokio::time::sleep_until(wake.into()).await;
            }
            Err(e) => {
                report.errors += 1;
                eprintln!("request failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    report
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A `redis-server` on a free loopback port with a throwaway directory, killed and
/// removed on drop. It shares our process group, so Ctrl-C stops it too.
struct PrivateRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PrivateRedis {
    fn start() -> Result<PrivateRedis, Error> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Err("REDIS_URL is not set and redis-server is not on PATH: \
                        set REDIS_URL=redis://host:port/ or install redis-server \
                        (e.g. apt-get install -y redis-server)"
                .into());
        }
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!(
            "tollgate-shared-quota-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut server = PrivateRedis { child, port, dir };
        server.wait_ready(Duration::from_secs(5))?;
        Ok(server)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(format!("redis-server exited at start: {status}").into());
            }
            if self.pong() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server not ready within {timeout:?}").into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn pong(&self) -> bool {
        let probe = || -> std::io::Result<bool> {
            let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
            stream.set_read_timeout(Some(Duration::from_millis(200)))?;
            stream.write_all(b"PING\r\n")?;
            let mut line = String::new();
            BufReader::new(stream).read_line(&mut line)?;
            Ok(line.starts_with("+PONG"))
        };
        probe().unwrap_or(false)
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
