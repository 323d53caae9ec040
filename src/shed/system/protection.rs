//! [`SystemProtection`]: the system rule enforced on a process's inbound requests,
//! with its statistics, cached readings, shadow mode and kill switch.

use std::fmt;
use std::time::Duration;

use super::check::{check, SystemStatus};
use super::window::Window;
use super::{Reading, ReadingError, Shed, SystemReadings, SystemRule, Threshold};
use crate::observe::{DenyReason, EventKind, Events};
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicU8, Mutex, Ordering};
use crate::time::{Clock, MonotonicClock, Nanos};

/// What [`SystemProtection::enter`] does with its decision; switchable at run time.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::Mode;
///
/// assert_eq!(Mode::default(), Mode::Enforce);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Shed what the rule refuses.
    #[default]
    Enforce,
    /// Dark launch: decide, count and report what would be shed
    /// ([`SystemPermit::would_shed`], [`SystemStatus::would_shed`]), admit everything.
    Shadow,
    /// The kill switch: check nothing and read nothing, admit everything. The
    /// statistics are still kept, so switching back decides on fresh numbers.
    Disabled,
}

impl Mode {
    const fn to_u8(self) -> u8 {
        match self {
            Mode::Enforce => 0,
            Mode::Shadow => 1,
            Mode::Disabled => 2,
        }
    }

    const fn from_u8(value: u8) -> Mode {
        match value {
            0 => Mode::Enforce,
            1 => Mode::Shadow,
            _ => Mode::Disabled,
        }
    }
}

/// Sentinel's system adaptive protection for a whole process: each inbound request
/// [`enter`](SystemProtection::enter)s, and is shed while a threshold of the
/// [`SystemRule`] is exceeded; the returned [`SystemPermit`] records its completion
/// and RT when dropped.
///
/// CPU usage and load average come from `R` at most once per
/// [`sample_every`](SystemRule::sample_every), on the request that finds the last
/// reading due (Sentinel reads them on a timer thread instead); a failed reading keeps
/// the previous one. Until a first reading succeeds, the CPU and load checks do not
/// trip, as in Sentinel. All time comes from the clock `C`.
///
/// Clones share everything.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule, Threshold};
/// use tollgate::time::ManualClock;
///
/// let readings = ManualReadings::new();
/// let clock = ManualClock::new();
/// let rule = SystemRule::builder().highest_cpu_usage(0.8).build()?;
/// let protection = SystemProtection::with_clock(rule, readings.clone(), clock.clone());
///
/// readings.set_cpu_usage(0.5);
/// let permit = protection.enter()?;
/// clock.advance(Duration::from_millis(20));
/// permit.exit(); // records a 20 ms RT
///
/// readings.set_cpu_usage(0.95);
/// clock.advance(Duration::from_secs(1)); // the next reading is due
/// assert_eq!(protection.enter().unwrap_err().threshold(), Threshold::Cpu);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SystemProtection<R: SystemReadings, C: Clock = MonotonicClock> {
    shared: Arc<Shared<R, C>>,
    events: Option<Events>,
}

struct Shared<R, C> {
    rule: SystemRule,
    readings: R,
    clock: C,
    window: Mutex<Window>,
    in_flight: AtomicU64,
    mode: AtomicU8,
    /// Whether a reading was ever started; `last_sample` is its time.
    sampled: AtomicBool,
    last_sample: AtomicU64,
    /// The latest reading, as `f64` bits; NaN for "unknown".
    cpu_usage: AtomicU64,
    load_average: AtomicU64,
    read_errors: AtomicU64,
    last_read_error: Mutex<Option<ReadingError>>,
    shed: AtomicU64,
    would_shed: AtomicU64,
}

impl<R: SystemReadings> SystemProtection<R> {
    /// Protection under `rule`, reading the machine from `readings`, on the
    /// monotonic clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ProcReadings, SystemProtection, SystemRule};
    ///
    /// if let Ok(readings) = ProcReadings::new() {
    ///     let rule = SystemRule::builder().highest_system_load(64.0).build()?;
    ///     let protection = SystemProtection::new(rule, readings);
    ///     let _permit = protection.enter();
    /// }
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(rule: SystemRule, readings: R) -> SystemProtection<R> {
        SystemProtection::with_clock(rule, readings, MonotonicClock::new())
    }
}

impl<R: SystemReadings, C: Clock> SystemProtection<R, C> {
    /// As [`new`](SystemProtection::new), on `clock`.
    pub fn with_clock(rule: SystemRule, readings: R, clock: C) -> SystemProtection<R, C> {
        let unknown = f64::NAN.to_bits();
        SystemProtection {
            shared: Arc::new(Shared {
                window: Mutex::new(Window::new(
                    rule.window,
                    rule.buckets,
                    rule.statistic_max_rt,
                )),
                rule,
                readings,
                clock,
                in_flight: AtomicU64::new(0),
                mode: AtomicU8::new(Mode::Enforce.to_u8()),
                sampled: AtomicBool::new(false),
                last_sample: AtomicU64::new(0),
                cpu_usage: AtomicU64::new(unknown),
                load_average: AtomicU64::new(unknown),
                read_errors: AtomicU64::new(0),
                last_read_error: Mutex::new(None),
                shed: AtomicU64::new(0),
                would_shed: AtomicU64::new(0),
            }),
            events: None,
        }
    }

    /// Emits every decision to `events`: `Admitted` (also in shadow mode), or
    /// `Denied` with [`DenyReason::Limited`] keyed by the
    /// [`Threshold`]'s name.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
    /// use tollgate::time::ManualClock;
    ///
    /// let keys = Arc::new(Mutex::new(Vec::new()));
    /// let events = Events::new("system");
    /// let _subscription = events.subscribe({
    ///     let keys = Arc::clone(&keys);
    ///     move |event: &Event<'_>| keys.lock().unwrap().push(event.key.map(str::to_owned))
    /// });
    /// let rule = SystemRule::builder().max_in_flight(0).build()?;
    /// let protection = SystemProtection::with_clock(rule, ManualReadings::new(), ManualClock::new())
    ///     .with_events(events);
    /// let _first = protection.enter(); // admitted: none was in flight
    /// let _second = protection.enter(); // shed
    /// assert_eq!(*keys.lock().unwrap(), [None, Some("in_flight".to_owned())]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_events(mut self, events: Events) -> SystemProtection<R, C> {
        self.events = Some(events);
        self
    }

    /// Asks to start one request: a permit to hold while it runs, or the threshold
    /// that sheds it.
    ///
    /// # Errors
    ///
    /// [`Shed`] naming the first threshold exceeded, in [`Mode::Enforce`] only.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule, Threshold};
    /// use tollgate::time::ManualClock;
    ///
    /// let rule = SystemRule::builder().max_in_flight(1).build()?;
    /// let protection = SystemProtection::with_clock(rule, ManualReadings::new(), ManualClock::new());
    /// let a = protection.enter()?;
    /// let b = protection.enter()?; // one was in flight: not more than 1
    /// assert_eq!(protection.enter().unwrap_err().threshold(), Threshold::InFlight);
    /// drop(a);
    /// assert!(protection.enter().is_ok());
    /// # drop(b);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enter(&self) -> Result<SystemPermit<R, C>, Shed> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let mode = self.mode();
        let mut would_shed = None;
        if mode != Mode::Disabled {
            shared.refresh(now);
            let mut window = shared.window.lock();
            let status = shared.status_at(&window, now);
            if let Some(threshold) = check(&shared.rule, &status) {
                if mode == Mode::Enforce {
                    window.add_block(now.as_u64());
                    drop(window);
                    shared.shed.fetch_add(1, Ordering::Relaxed);
                    if let Some(events) = &self.events {
                        events.emit_keyed(
                            threshold.as_str(),
                            1,
                            EventKind::Denied {
                                reason: DenyReason::Limited,
                                retry_after: None,
                            },
                        );
                    }
                    return Err(Shed::new(threshold));
                }
                shared.would_shed.fetch_add(1, Ordering::Relaxed);
                would_shed = Some(threshold);
            }
            window.add_pass(now.as_u64());
        } else {
            shared.window.lock().add_pass(now.as_u64());
        }
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        if let Some(events) = &self.events {
            events.emit(1, EventKind::Admitted);
        }
        Ok(SystemPermit {
            shared: Arc::clone(shared),
            started: now,
            would_shed,
        })
    }

    /// Switches between enforcing, shadow mode and off (the kill switch); takes
    /// effect from the next [`enter`](SystemProtection::enter), on every clone.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ManualReadings, Mode, SystemProtection, SystemRule, Threshold};
    /// use tollgate::time::ManualClock;
    ///
    /// let rule = SystemRule::builder().max_in_flight(0).build()?;
    /// let protection = SystemProtection::with_clock(rule, ManualReadings::new(), ManualClock::new());
    /// let _held = protection.enter()?;
    ///
    /// protection.set_mode(Mode::Shadow);
    /// let permit = protection.enter()?; // admitted, but reported
    /// assert_eq!(permit.would_shed(), Some(Threshold::InFlight));
    ///
    /// protection.set_mode(Mode::Disabled);
    /// assert_eq!(protection.enter()?.would_shed(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_mode(&self, mode: Mode) {
        self.shared.mode.store(mode.to_u8(), Ordering::Release);
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        Mode::from_u8(self.shared.mode.load(Ordering::Acquire))
    }

    /// The rule enforced.
    pub fn rule(&self) -> &SystemRule {
        &self.shared.rule
    }

    /// What the checks see now: statistics on the clock's current time, the latest
    /// reading (this takes none), and the counts.
    pub fn status(&self) -> SystemStatus {
        let shared = &self.shared;
        let now = shared.clock.now();
        let window = shared.window.lock();
        shared.status_at(&window, now)
    }

    /// The error of the last failed reading, if any failed.
    pub fn last_read_error(&self) -> Option<ReadingError> {
        *self.shared.last_read_error.lock()
    }
}

impl<R: SystemReadings, C: Clock> Shared<R, C> {
    /// Takes a reading when none was taken or the last is `sample_every` old; one
    /// caller takes it, the others go on with the previous one.
    fn refresh(&self, now: Nanos) {
        let now = now.as_u64();
        if !self.sampled.load(Ordering::Acquire) {
            if self.sampled.swap(true, Ordering::AcqRel) {
                return;
            }
            self.last_sample.store(now, Ordering::Release);
            self.read();
            return;
        }
        let last = self.last_sample.load(Ordering::Acquire);
        let due = u64::try_from(self.rule.sample_every.as_nanos()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) < due {
            return;
        }
        if self
            .last_sample
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.read();
        }
    }

    fn read(&self) {
        match self.readings.read() {
            Ok(Reading {
                cpu_usage,
                load_average,
            }) => {
                // A source without a value keeps the previous one, as a failure does.
                if let Some(usage) = cpu_usage {
                    self.cpu_usage.store(usage.to_bits(), Ordering::Release);
                }
                if let Some(load) = load_average {
                    self.load_average.store(load.to_bits(), Ordering::Release);
                }
            }
            Err(error) => {
                self.read_errors.fetch_add(1, Ordering::Relaxed);
                *self.last_read_error.lock() = Some(error);
            }
        }
    }

    fn status_at(&self, window: &Window, now: Nanos) -> SystemStatus {
        let now = now.as_u64();
        SystemStatus {
            in_flight: self.in_flight.load(Ordering::Acquire),
            pass_qps: window.pass_qps(now),
            block_qps: window.block_qps(now),
            max_success_qps: window.max_success_qps(now),
            min_rt: window.min_rt(now),
            avg_rt: window.avg_rt(now),
            cpu_usage: known(self.cpu_usage.load(Ordering::Acquire)),
            load_average: known(self.load_average.load(Ordering::Acquire)),
            shed: self.shed.load(Ordering::Relaxed),
            would_shed: self.would_shed.load(Ordering::Relaxed),
            read_errors: self.read_errors.load(Ordering::Relaxed),
        }
    }
}

/// A reading stored as bits; NaN (never read, or a source that gave NaN) is unknown.
fn known(bits: u64) -> Option<f64> {
    let value = f64::from_bits(bits);
    (!value.is_nan()).then_some(value)
}

impl<R: SystemReadings, C: Clock> Clone for SystemProtection<R, C> {
    fn clone(&self) -> Self {
        SystemProtection {
            shared: Arc::clone(&self.shared),
            events: self.events.clone(),
        }
    }
}

impl<R: SystemReadings, C: Clock> fmt::Debug for SystemProtection<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemProtection")
            .field("rule", &self.shared.rule)
            .field("mode", &self.mode())
            .field("readings", &self.shared.readings)
            .field("clock", &self.shared.clock)
            .finish_non_exhaustive()
    }
}

/// A request admitted by [`SystemProtection::enter`], in flight until dropped (or
/// [`exit`](SystemPermit::exit)ed): then its RT, from entry to now on the
/// protection's clock, goes into the statistics.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let rule = SystemRule::builder().avg_rt(Duration::from_millis(100)).build()?;
/// let protection = SystemProtection::with_clock(rule, ManualReadings::new(), clock.clone());
/// let permit = protection.enter()?;
/// clock.advance(Duration::from_millis(40));
/// permit.exit();
/// assert_eq!(protection.status().avg_rt, Duration::from_millis(40));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the request counts as finished when the permit is dropped"]
pub struct SystemPermit<R: SystemReadings, C: Clock = MonotonicClock> {
    shared: Arc<Shared<R, C>>,
    started: Nanos,
    would_shed: Option<Threshold>,
}

impl<R: SystemReadings, C: Clock> SystemPermit<R, C> {
    /// In [`Mode::Shadow`], the threshold that would have shed this request.
    pub fn would_shed(&self) -> Option<Threshold> {
        self.would_shed
    }

    /// When the request entered, on the protection's clock.
    pub fn started_at(&self) -> Nanos {
        self.started
    }

    /// Finishes the request now (as dropping the permit does).
    pub fn exit(self) {}

    fn elapsed(&self, now: Nanos) -> Duration {
        now.saturating_since(self.started)
    }
}

impl<R: SystemReadings, C: Clock> Drop for SystemPermit<R, C> {
    fn drop(&mut self) {
        let now = self.shared.clock.now();
        let rt = self.elapsed(now);
        self.shared.window.lock().add_completion(now.as_u64(), rt);
        self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<R: SystemReadings, C: Clock> fmt::Debug for SystemPermit<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemPermit")
            .field("started", &self.started)
            .field("would_shed", &self.would_shed)
            .finish_non_exhaustive()
    }
}
