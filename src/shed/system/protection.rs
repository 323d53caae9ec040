//! [`SystemProtection`]: the system rule enforced on a process's inbound requests,
//! with its statistics, cached readings, exempt classes, shadow mode and kill
//! switch.

use std::fmt;
use std::time::Duration;

use super::check::{SystemStatus, check};
use super::window::Window;
use super::{Reading, ReadingError, SystemReadings, SystemRule};
use crate::error::ConfigError;
use crate::observe::Events;
use crate::shed::{Class, Classes, Mode, ModeSwitch, Shed, ShedDecision, ShedReason, Shedder};
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::time::{Clock, MonotonicClock, Nanos};

/// Sentinel's system adaptive protection for a whole process, as a [`Shedder`]:
/// each inbound request is [`decide`](Shedder::decide)d, and shed while a threshold
/// of the [`SystemRule`] is exceeded; the admitted request's [`SystemPermit`] records
/// its completion and RT when dropped.
///
/// # Classes
///
/// Sentinel's system rule is class-agnostic: it guards the process itself, so by
/// default **every class is shed** while a threshold trips, the most critical
/// included. Nothing is exempt by default because an exempt class skips every check,
/// in-flight and QPS caps included: were the most critical class exempt, a surge of it
/// alone could take the process past the point the rule exists to prevent. Ranking
/// classes is the other shedders' work ([`FleetShedder`](crate::shed::FleetShedder),
/// [`UtilisationShedder`](crate::shed::UtilisationShedder)), which can run in front of
/// this one. [`with_exempt`](SystemProtection::with_exempt) names classes that are
/// never shed (a health check, say); their requests still count in the statistics,
/// since they load the process too.
///
/// # Readings and time
///
/// CPU usage and load average come from `R` at most once per
/// [`sample_every`](SystemRule::sample_every), on the request that finds the last
/// reading due (Sentinel reads them on a timer thread instead); a failed reading keeps
/// the previous one. Until a first reading succeeds, the CPU and load checks do not
/// trip, as in Sentinel. All time comes from the clock `C`.
///
/// Clones share the statistics, the mode switch and the events.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule, Threshold};
/// use tollgate::shed::{Classes, ShedReason, Shedder};
/// use tollgate::time::ManualClock;
///
/// let readings = ManualReadings::new();
/// let clock = ManualClock::new();
/// let classes = Classes::google();
/// let rule = SystemRule::builder().highest_cpu_usage(0.8).build()?;
/// let protection = SystemProtection::with_clock(classes.clone(), rule, readings.clone(), clock.clone());
/// let critical = classes.parse("critical");
///
/// readings.set_cpu_usage(0.5);
/// let permit = protection.decide(&critical).into_slot()?;
/// clock.advance(Duration::from_millis(20));
/// permit.exit(); // records a 20 ms RT
///
/// readings.set_cpu_usage(0.95);
/// clock.advance(Duration::from_secs(1)); // the next reading is due
/// let shed = protection.decide(&critical).into_slot().unwrap_err();
/// assert_eq!(shed.reason(), ShedReason::System(Threshold::Cpu));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SystemProtection<R: SystemReadings, C: Clock = MonotonicClock> {
    shared: Arc<Shared<R, C>>,
    classes: Classes,
    exempt: Arc<[bool]>,
    mode: ModeSwitch,
    events: Option<Events>,
    retry_after: Option<Duration>,
}

struct Shared<R, C> {
    rule: SystemRule,
    readings: R,
    clock: C,
    window: Mutex<Window>,
    in_flight: AtomicU64,
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
    /// Protection under `rule` for requests ranked by `classes`, reading the
    /// machine from `readings`, on the monotonic clock. No class is exempt.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ProcReadings, SystemProtection, SystemRule};
    /// use tollgate::shed::{Classes, Shedder};
    ///
    /// if let Ok(readings) = ProcReadings::new() {
    ///     let rule = SystemRule::builder().highest_system_load(64.0).build()?;
    ///     let protection = SystemProtection::new(Classes::google(), rule, readings);
    ///     let _permit = protection.decide(&Classes::google().lowest());
    /// }
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(classes: Classes, rule: SystemRule, readings: R) -> SystemProtection<R> {
        SystemProtection::with_clock(classes, rule, readings, MonotonicClock::new())
    }
}

impl<R: SystemReadings, C: Clock> SystemProtection<R, C> {
    /// As [`new`](SystemProtection::new), on `clock`: a
    /// [`ManualClock`](crate::time::ManualClock) in tests, with
    /// [`ManualReadings`](super::ManualReadings).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule, Threshold};
    /// use tollgate::shed::{Classes, ShedReason, Shedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let readings = ManualReadings::new();
    /// let clock = ManualClock::new();
    /// let rule = SystemRule::builder().highest_cpu_usage(0.8).build()?;
    /// let protection = SystemProtection::with_clock(Classes::google(), rule, readings.clone(), clock.clone());
    /// readings.set_cpu_usage(0.95);
    /// let shed = protection.decide(&Classes::google().lowest()).into_slot().unwrap_err();
    /// assert_eq!(shed.reason(), ShedReason::System(Threshold::Cpu));
    /// readings.set_cpu_usage(0.2);
    /// clock.advance(Duration::from_secs(1)); // the next reading is due
    /// assert!(protection.decide(&Classes::google().lowest()).is_admitted());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_clock(
        classes: Classes,
        rule: SystemRule,
        readings: R,
        clock: C,
    ) -> SystemProtection<R, C> {
        let unknown = f64::NAN.to_bits();
        SystemProtection {
            exempt: (0..classes.len()).map(|_| false).collect(),
            classes,
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
                sampled: AtomicBool::new(false),
                last_sample: AtomicU64::new(0),
                cpu_usage: AtomicU64::new(unknown),
                load_average: AtomicU64::new(unknown),
                read_errors: AtomicU64::new(0),
                last_read_error: Mutex::new(None),
                shed: AtomicU64::new(0),
                would_shed: AtomicU64::new(0),
            }),
            mode: ModeSwitch::default(),
            events: None,
            retry_after: None,
        }
    }

    /// The same protection with `names` as its exempt classes, never shed (ASCII case
    /// ignored); an empty list exempts none, the default.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] for a name not in the set.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
    /// use tollgate::shed::{Classes, Shedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let classes = Classes::google();
    /// let rule = SystemRule::builder().max_in_flight(0).build()?;
    /// let protection = SystemProtection::with_clock(classes.clone(), rule, ManualReadings::new(), ManualClock::new())
    ///     .with_exempt(["critical_plus"])?;
    /// let _held = protection.decide(&classes.lowest());
    /// assert!(!protection.decide(&classes.parse("critical")).is_admitted());
    /// assert!(protection.decide(&classes.parse("critical_plus")).is_admitted());
    /// assert!(protection.clone().with_exempt(["gold"]).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_exempt<I, S>(self, names: I) -> Result<SystemProtection<R, C>, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut exempt = vec![false; self.classes.len()];
        for name in names {
            let class = self
                .classes
                .get(name.as_ref())
                .ok_or(ConfigError::OutOfRange {
                    parameter: "exempt",
                    expected: "names of classes in the set",
                })?;
            exempt[class.index()] = true;
        }
        Ok(SystemProtection {
            exempt: Arc::from(exempt),
            ..self
        })
    }

    /// The same protection, following `mode`: [`Mode::Shadow`] decides, counts and
    /// reports what it would shed ([`ShedDecision::WouldShed`]) and sheds nothing;
    /// [`Mode::Off`], the kill switch, checks and reads nothing, but still keeps the
    /// statistics, so switching back decides on fresh numbers.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule, Threshold};
    /// use tollgate::shed::{Classes, Mode, ModeSwitch, ShedDecision, ShedReason, Shedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let classes = Classes::google();
    /// let switch = ModeSwitch::new(Mode::Shadow);
    /// let rule = SystemRule::builder().max_in_flight(0).build()?;
    /// let protection = SystemProtection::with_clock(classes.clone(), rule, ManualReadings::new(), ManualClock::new())
    ///     .with_mode(switch.clone());
    /// let _held = protection.decide(&classes.lowest());
    /// match protection.decide(&classes.lowest()) {
    ///     ShedDecision::WouldShed { shed, .. } => {
    ///         assert_eq!(shed.reason(), ShedReason::System(Threshold::InFlight))
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// switch.set(Mode::Off);
    /// assert!(matches!(protection.decide(&classes.lowest()), ShedDecision::Admit(_)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_mode(self, mode: ModeSwitch) -> SystemProtection<R, C> {
        SystemProtection { mode, ..self }
    }

    /// The same protection, emitting one event per decision into `events`, keyed by
    /// the class name: `Admitted` (also for exempt classes and with the kill switch
    /// on), `WouldShed` in shadow mode, or `Denied` with
    /// [`DenyReason::Shed`](crate::observe::DenyReason::Shed). The threshold is in
    /// the decision's [`Shed::reason`] and counted in [`status`](Self::status).
    ///
    /// The hub is a setting of this copy, as the mode is: clones made after this
    /// call share it, and a later call replaces it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tollgate::observe::{DenyReason, Event, EventKind, Events};
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
    /// use tollgate::shed::{Classes, Shedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let events = Events::new("system");
    /// let _subscription = events.subscribe({
    ///     let seen = Arc::clone(&seen);
    ///     move |e: &Event<'_>| seen.lock().unwrap().push((e.key.map(str::to_owned), e.kind))
    /// });
    /// let classes = Classes::google();
    /// let rule = SystemRule::builder().max_in_flight(0).build()?;
    /// let protection = SystemProtection::with_clock(classes.clone(), rule, ManualReadings::new(), ManualClock::new())
    ///     .with_events(events);
    /// let _first = protection.decide(&classes.lowest()); // admitted: none was in flight
    /// let _second = protection.decide(&classes.lowest()); // shed
    /// let shed = EventKind::Denied { reason: DenyReason::Shed, retry_after: None };
    /// assert_eq!(
    ///     *seen.lock().unwrap(),
    ///     [(Some("sheddable".to_owned()), EventKind::Admitted), (Some("sheddable".to_owned()), shed)]
    /// );
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_events(self, events: Events) -> SystemProtection<R, C> {
        SystemProtection {
            events: Some(events),
            ..self
        }
    }

    /// The same protection, hinting `retry_after` in its refusals (`None` by default:
    /// a threshold clears when load falls, which the rule cannot foresee;
    /// [`sample_every`](SystemRule::sample_every) is a fair hint for CPU and load).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
    /// use tollgate::shed::{Classes, Shedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let classes = Classes::google();
    /// let rule = SystemRule::builder().max_in_flight(0).build()?;
    /// let protection = SystemProtection::with_clock(classes.clone(), rule, ManualReadings::new(), ManualClock::new())
    ///     .with_retry_after(Some(Duration::from_secs(1)));
    /// let _held = protection.decide(&classes.lowest());
    /// let shed = protection.decide(&classes.lowest()).into_slot().unwrap_err();
    /// assert_eq!(shed.retry_after(), Some(Duration::from_secs(1)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_retry_after(self, retry_after: Option<Duration>) -> SystemProtection<R, C> {
        SystemProtection {
            retry_after,
            ..self
        }
    }

    /// Whether `class` is never shed. A class of another set is read by its name
    /// ([`Classes::resolve`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
    /// use tollgate::shed::Classes;
    /// use tollgate::time::ManualClock;
    ///
    /// let rule = SystemRule::builder().max_in_flight(10).build()?;
    /// let protection = SystemProtection::with_clock(Classes::google(), rule, ManualReadings::new(), ManualClock::new())
    ///     .with_exempt(["critical_plus"])?;
    /// let other = Classes::new(["bulk", "critical_plus"])?;
    /// // By name, not by position: `bulk` sits where `critical_plus` does in Google's set.
    /// assert!(!protection.is_exempt(&other.highest()));
    /// assert!(protection.is_exempt(&other.lowest()));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn is_exempt(&self, class: &Class) -> bool {
        self.exempt[self.classes.index_of(class)]
    }

    /// The mode switch this protection follows.
    pub fn mode(&self) -> &ModeSwitch {
        &self.mode
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

impl<R: SystemReadings, C: Clock> Shedder for SystemProtection<R, C> {
    type Slot = SystemPermit<R, C>;

    /// Admits `class` unless a threshold is exceeded and the class is not exempt;
    /// the refusal's reason is [`ShedReason::System`] naming the first threshold
    /// exceeded, in Sentinel's order. A shed request is counted in the window's
    /// block QPS and never as in flight.
    fn decide(&self, class: &Class) -> ShedDecision<SystemPermit<R, C>> {
        let class = self.classes.own(class);
        let class = &*class;
        let shared = &self.shared;
        let now = shared.clock.now();
        let mode = self.mode.get();
        let mut would_shed = None;
        if mode == Mode::Off || self.is_exempt(class) {
            shared.window.lock().add_pass(now.as_u64());
        } else {
            shared.refresh(now);
            let mut window = shared.window.lock();
            let status = shared.status_at(&window, now);
            if let Some(threshold) = check(&shared.rule, &status) {
                let shed = Shed::new(
                    class.clone(),
                    ShedReason::System(threshold),
                    self.retry_after,
                );
                if mode == Mode::Enforce {
                    window.add_block(now.as_u64());
                    drop(window);
                    shared.shed.fetch_add(1, Ordering::Relaxed);
                    return ShedDecision::Shed(shed).report(self.events.as_ref(), class);
                }
                shared.would_shed.fetch_add(1, Ordering::Relaxed);
                would_shed = Some(shed);
            }
            window.add_pass(now.as_u64());
        }
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = SystemPermit {
            shared: Arc::clone(shared),
            started: now,
        };
        let decision = match would_shed {
            Some(shed) => ShedDecision::WouldShed { slot, shed },
            None => ShedDecision::Admit(slot),
        };
        decision.report(self.events.as_ref(), class)
    }

    fn classes(&self) -> &Classes {
        &self.classes
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
                // A source without a usable value keeps the previous one, as a
                // failure does: a NaN stored would read as "never read" and turn the
                // check off, an infinite or negative one is no measurement.
                if let Some(usage) = usable(cpu_usage) {
                    self.cpu_usage.store(usage.to_bits(), Ordering::Release);
                }
                if let Some(load) = usable(load_average) {
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

/// A value a reading may replace the last one with: finite and not negative.
fn usable(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

/// A reading stored as bits; NaN (never read) is unknown.
fn known(bits: u64) -> Option<f64> {
    let value = f64::from_bits(bits);
    (!value.is_nan()).then_some(value)
}

impl<R: SystemReadings, C: Clock> Clone for SystemProtection<R, C> {
    fn clone(&self) -> Self {
        SystemProtection {
            shared: Arc::clone(&self.shared),
            classes: self.classes.clone(),
            exempt: Arc::clone(&self.exempt),
            mode: self.mode.clone(),
            events: self.events.clone(),
            retry_after: self.retry_after,
        }
    }
}

impl<R: SystemReadings, C: Clock> fmt::Debug for SystemProtection<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemProtection")
            .field("rule", &self.shared.rule)
            .field("classes", &self.classes)
            .field("exempt", &self.exempt)
            .field("mode", &self.mode)
            .field("readings", &self.shared.readings)
            .field("clock", &self.shared.clock)
            .finish_non_exhaustive()
    }
}

/// A request admitted by a [`SystemProtection`] (its [`Shedder::Slot`]), in flight
/// until dropped (or [`exit`](SystemPermit::exit)ed): then its RT, from entry to now
/// on the protection's clock, goes into the statistics.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
/// use tollgate::shed::{Classes, Shedder};
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let classes = Classes::google();
/// let rule = SystemRule::builder().avg_rt(Duration::from_millis(100)).build()?;
/// let protection = SystemProtection::with_clock(classes.clone(), rule, ManualReadings::new(), clock.clone());
/// let permit = protection.decide(&classes.lowest()).into_slot()?;
/// clock.advance(Duration::from_millis(40));
/// permit.exit();
/// assert_eq!(protection.status().avg_rt, Duration::from_millis(40));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the request counts as finished when the permit is dropped"]
pub struct SystemPermit<R: SystemReadings, C: Clock = MonotonicClock> {
    shared: Arc<Shared<R, C>>,
    started: Nanos,
}

impl<R: SystemReadings, C: Clock> SystemPermit<R, C> {
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
            .finish_non_exhaustive()
    }
}
