//! The scheduler thread: one timer heap, fed through a channel, serving the alarms of
//! every waiting limiter in the process.

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::fmt;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::Alarm;
// A real thread that loom never runs: std's primitives under every cfg.
use crate::sync::unmodeled::{Arc, AtomicU64, Mutex, OnceLock, Ordering, Weak};

/// How long the thread stays up with no alarm before it exits; the next alarm starts
/// a new one.
const LINGER: Duration = Duration::from_secs(1);

/// A thread that rings alarms at their deadlines, in real time.
///
/// Limiters never tick: they compute their permits from elapsed time, and only a
/// limiter with a waiter sets an alarm, for the moment its first waiter can go. So
/// the thread sleeps while nothing waits, and a million idle limiters cost it
/// nothing. It starts on the first alarm, is named after the scheduler, and exits after
/// a second with nothing to do; the next alarm starts it again.
///
/// The process has one [`global`](Scheduler::global) scheduler, which every
/// [`MonotonicClock`](super::MonotonicClock) uses unless given another.
/// Clones share one thread.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::Duration;
/// use tollgate::time::Alarm;
/// use tollgate::time::Scheduler;
///
/// struct Flag(AtomicBool);
/// impl Alarm for Flag {
///     fn ring(&self) {
///         self.0.store(true, Ordering::SeqCst);
///     }
/// }
///
/// let scheduler = Scheduler::new("doc-example");
/// let flag = Arc::new(Flag(AtomicBool::new(false)));
/// scheduler.set_alarm_after(Duration::ZERO, flag.clone());
/// while !flag.0.load(Ordering::SeqCst) {
///     std::thread::yield_now();
/// }
/// ```
#[derive(Clone)]
pub struct Scheduler {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    /// The running thread's channel; `None` while no thread runs. Sending under this
    /// lock is what lets the thread exit without losing an alarm.
    sender: Mutex<Option<Sender<Job>>>,
    stats: Stats,
}

#[derive(Default)]
struct Stats {
    threads_started: AtomicU64,
    wakeups: AtomicU64,
    alarms_rung: AtomicU64,
    alarms_set: AtomicU64,
}

/// What a [`Scheduler`] has done since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    /// Threads started: one, plus one for each restart after an idle exit.
    pub threads_started: u64,
    /// Times the thread woke up, for an alarm, a new alarm or its idle timeout.
    pub wakeups: u64,
    /// Alarms set.
    pub alarms_set: u64,
    /// Alarms rung.
    pub alarms_rung: u64,
    /// Whether a thread is running now.
    pub running: bool,
}

struct Job {
    at: Instant,
    seq: u64,
    /// Held weakly: an alarm outlived by its limiter (a served waiter's timeout) rings
    /// nothing and keeps nothing alive.
    alarm: Weak<dyn Alarm>,
}

impl PartialEq for Job {
    fn eq(&self, other: &Job) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Job {}

impl PartialOrd for Job {
    fn partial_cmp(&self, other: &Job) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Job {
    fn cmp(&self, other: &Job) -> CmpOrdering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl Scheduler {
    /// The process's scheduler, named `tollgate-scheduler`.
    pub fn global() -> &'static Scheduler {
        static GLOBAL: OnceLock<Scheduler> = OnceLock::new();
        GLOBAL.get_or_init(|| Scheduler::new("tollgate-scheduler"))
    }

    /// A scheduler of its own, whose thread is named `name`. No thread starts until
    /// the first alarm.
    pub fn new(name: impl Into<String>) -> Scheduler {
        Scheduler {
            shared: Arc::new(Shared {
                name: name.into(),
                sender: Mutex::new(None),
                stats: Stats::default(),
            }),
        }
    }

    /// Rings `alarm` after `delay`, on the scheduler's thread. A zero delay rings as
    /// soon as the thread gets to it.
    pub fn set_alarm_after(&self, delay: Duration, alarm: Arc<dyn Alarm>) {
        let at = Instant::now()
            .checked_add(delay)
            // Past what `Instant` can hold: a century will do as "never".
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 86_400));
        let stats = &self.shared.stats;
        let seq = stats.alarms_set.fetch_add(1, Ordering::Relaxed);
        let mut job = Job {
            at,
            seq,
            alarm: Arc::downgrade(&alarm),
        };
        let mut sender = self.shared.sender.lock();
        // A second try covers a thread that died (an alarm panicked); past that the
        // process cannot start threads, and saying so beats spinning.
        for _ in 0..2 {
            let tx = match &*sender {
                Some(tx) => tx.clone(),
                None => match self.start() {
                    Some(tx) => {
                        *sender = Some(tx.clone());
                        tx
                    }
                    None => break,
                },
            };
            match tx.send(job) {
                Ok(()) => return,
                Err(returned) => {
                    job = returned.0;
                    *sender = None;
                }
            }
        }
        eprintln!(
            "tollgate: scheduler {:?} cannot start its thread; an alarm is lost",
            self.shared.name
        );
    }

    /// Counters of what the scheduler has done.
    pub fn stats(&self) -> SchedulerStats {
        let stats = &self.shared.stats;
        SchedulerStats {
            threads_started: stats.threads_started.load(Ordering::Relaxed),
            wakeups: stats.wakeups.load(Ordering::Relaxed),
            alarms_set: stats.alarms_set.load(Ordering::Relaxed),
            alarms_rung: stats.alarms_rung.load(Ordering::Relaxed),
            running: self.shared.sender.lock().is_some(),
        }
    }

    /// The name its thread runs under.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    fn start(&self) -> Option<Sender<Job>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name(self.shared.name.clone())
            .spawn(move || run(&shared, &rx));
        match spawned {
            Ok(_) => {
                let started = &self.shared.stats.threads_started;
                started.fetch_add(1, Ordering::Relaxed);
                Some(tx)
            }
            Err(_) => None,
        }
    }
}

/// The thread: ring what is due, then sleep until the next deadline or a new alarm.
fn run(shared: &Shared, rx: &Receiver<Job>) {
    let mut heap: BinaryHeap<Reverse<Job>> = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|Reverse(job)| job.at <= now) {
            let Reverse(job) = heap.pop().expect("peeked");
            shared.stats.alarms_rung.fetch_add(1, Ordering::Relaxed);
            if let Some(alarm) = job.alarm.upgrade() {
                // A panicking alarm (a user's `Alarm`, or a waker it calls) must not
                // take the thread, and every other pending alarm, down with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| alarm.ring()));
            }
        }
        let received = match heap.peek() {
            Some(Reverse(next)) => rx.recv_deadline(next.at),
            None => rx.recv_timeout(LINGER),
        };
        shared.stats.wakeups.fetch_add(1, Ordering::Relaxed);
        match received {
            Ok(job) => {
                heap.push(Reverse(job));
                heap.extend(rx.try_iter().map(Reverse));
            }
            Err(RecvTimeoutError::Timeout) if heap.is_empty() => {
                // Idle: exit, unless an alarm arrived while the lock was free.
                let mut sender = shared.sender.lock();
                match rx.try_recv() {
                    Ok(job) => heap.push(Reverse(job)),
                    Err(_) => {
                        *sender = None;
                        return;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("name", &self.shared.name)
            .field("stats", &self.stats())
            .finish()
    }
}
