//! [`UtilisationShedder`]: Stripe's worker-utilisation load shedder, shedding the
//! lowest classes first, one more at a time, with hysteresis.

use std::fmt;
use std::time::Duration;

use super::class::{Class, Classes};
use super::decision::{Shed, ShedDecision, ShedReason, Shedder};
use super::escalation::Escalation;
use super::mode::{Mode, ModeSwitch};
#[cfg(feature = "adaptive")]
use crate::adaptive::{AdaptiveLimiter, LimitAlgorithm};
use crate::error::ConfigError;
use crate::observe::Events;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::time::{Clock, MonotonicClock};

/// Where a [`UtilisationShedder`] reads utilisation from.
///
/// # Examples
///
/// ```
/// use tollgate::shed::Measure;
///
/// let counted = Measure::InFlight { capacity: 64 };
/// let fed = Measure::Reported; // from `UtilisationShedder::report`
/// assert_ne!(counted, fed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// The requests the shedder admitted that are still in flight, over `capacity`
    /// (busy workers over workers).
    InFlight {
        /// The requests the service runs at once.
        capacity: u64,
    },
    /// What the caller last [reported](UtilisationShedder::report): for example an
    /// adaptive limit's in-flight count over its current limit
    /// (`report_adaptive`, feature `adaptive`).
    Reported,
}

/// Stripe's worker-utilisation load shedder.
///
/// While utilisation stays at or above [`shed_above`](UtilisationBuilder::shed_above)
/// for [`escalate_after`](UtilisationBuilder::escalate_after), the shedder sheds one
/// more class, starting from the least critical; while it stays at or below
/// [`recover_below`](UtilisationBuilder::recover_below) for the (longer)
/// [`deescalate_after`](UtilisationBuilder::deescalate_after), it sheds one class
/// fewer. Between the two thresholds it holds its level. So the level `k` sheds
/// exactly the `k` least critical classes: a class is never shed before every less
/// critical one is. The most critical class is never shed. A class of another set
/// is read by its name ([`Classes::resolve`]): as the class of that name in this
/// set, or as its default class.
///
/// The level moves only when the shedder reads utilisation: on every
/// [`decide`](Shedder::decide), and on every [`report`](UtilisationShedder::report)
/// with [`Measure::Reported`]; at most one step per reading. All time comes from
/// the clock. The de-escalation hold is never shorter than the escalation hold
/// (the builder checks it), so that the shedder recovers more slowly than it
/// escalates, and the gap between the two thresholds keeps the level from flapping
/// around one value.
///
/// Clones share the level and the count in flight.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::{Classes, Measure, Shedder, UtilisationShedder};
/// use tollgate::time::ManualClock;
///
/// let classes = Classes::google();
/// let clock = ManualClock::new();
/// let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
///     .shed_above(0.9)
///     .recover_below(0.5)
///     .escalate_after(Duration::from_secs(1))
///     .build_with_clock(clock.clone())?;
///
/// shedder.report(95, 100)?; // busy: the hold starts
/// clock.advance(Duration::from_secs(1));
/// shedder.report(95, 100)?; // still busy a second later: shed `sheddable`
/// assert_eq!(shedder.level(), 1);
/// assert!(!shedder.decide(&classes.parse("sheddable")).is_admitted());
/// assert!(shedder.decide(&classes.parse("sheddable_plus")).is_admitted());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct UtilisationShedder<C: Clock = MonotonicClock> {
    classes: Classes,
    measure: Measure,
    clock: C,
    state: Arc<State>,
    retry_after: Duration,
    mode: ModeSwitch,
    events: Option<Events>,
}

struct State {
    escalation: Mutex<Escalation>,
    /// Requests admitted and not yet finished.
    in_flight: Arc<AtomicU64>,
    /// The last reported utilisation, as `f64` bits.
    reported: AtomicU64,
}

impl UtilisationShedder {
    /// A builder for a shedder over `classes`, reading utilisation from `measure`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    ///
    /// let shedder = UtilisationShedder::builder(Classes::google(), Measure::InFlight { capacity: 100 })
    ///     .build()?;
    /// assert_eq!(shedder.level(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder(classes: Classes, measure: Measure) -> UtilisationBuilder {
        UtilisationBuilder {
            classes,
            measure,
            high: 0.9,
            low: 0.7,
            up_after: Duration::from_secs(1),
            down_after: Duration::from_secs(10),
        }
    }
}

impl<C: Clock> UtilisationShedder<C> {
    /// The same shedder, following `mode` (shadow mode, kill switch).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, Mode, ModeSwitch, UtilisationShedder};
    ///
    /// let switch = ModeSwitch::new(Mode::Shadow);
    /// let shedder = UtilisationShedder::builder(Classes::google(), Measure::Reported)
    ///     .build()?
    ///     .with_mode(switch.clone());
    /// assert_eq!(shedder.mode().get(), Mode::Shadow);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_mode(self, mode: ModeSwitch) -> UtilisationShedder<C> {
        UtilisationShedder { mode, ..self }
    }

    /// The same shedder, emitting one event per decision into `events`, keyed by
    /// the class name, with the [`ShedReason`] as the detail of a refusal.
    ///
    /// The hub is a setting of this copy, as the mode is: clones made after this
    /// call share it, and a later call replaces it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tollgate::observe::{Event, EventKind, Events};
    /// use tollgate::shed::{Classes, Measure, Shedder, UtilisationShedder};
    ///
    /// let events = Events::new("utilisation");
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// let _subscription = events.subscribe(move |event: &Event<'_>| {
    ///     sink.lock().unwrap().push((event.key.map(str::to_owned), event.kind));
    /// });
    /// let classes = Classes::google();
    /// let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
    ///     .build()?
    ///     .with_events(events);
    /// let _slot = shedder.decide(&classes.lowest());
    /// assert_eq!(*seen.lock().unwrap(), [(Some("sheddable".to_owned()), EventKind::Admitted)]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_events(self, events: Events) -> UtilisationShedder<C> {
        UtilisationShedder {
            events: Some(events),
            ..self
        }
    }

    /// Reports utilisation as `busy` out of `capacity` (for example an adaptive
    /// limit's requests in flight and its limit), at the clock's time, and moves the
    /// level if a hold has passed.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `capacity`; [`ConfigError::OutOfRange`] when
    /// the shedder measures [`Measure::InFlight`] (it counts for itself).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    ///
    /// let shedder = UtilisationShedder::builder(Classes::google(), Measure::Reported).build()?;
    /// shedder.report(30, 40)?;
    /// assert_eq!(shedder.utilisation(), 0.75);
    /// assert!(shedder.report(1, 0).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn report(&self, busy: u64, capacity: u64) -> Result<(), ConfigError> {
        if self.measure != Measure::Reported {
            return Err(ConfigError::OutOfRange {
                parameter: "measure",
                expected: "Measure::Reported to take reports",
            });
        }
        if capacity == 0 {
            return Err(ConfigError::Zero {
                parameter: "capacity",
            });
        }
        let utilisation = busy as f64 / capacity as f64;
        self.state
            .reported
            .store(utilisation.to_bits(), Ordering::Relaxed);
        self.observe(utilisation);
        Ok(())
    }

    /// Reports an adaptive limiter's utilisation: its requests in flight
    /// ([`inflight`](AdaptiveLimiter::inflight)) out of its current
    /// [`limit`](AdaptiveLimiter::limit). Call it as often as the shedder should
    /// see the load (on each request, or from a timer); the shedder then sheds the
    /// least critical classes first while the adaptive limit is nearly used up,
    /// before the limiter starts refusing every class alike. Feature `adaptive`.
    ///
    /// # Errors
    ///
    /// As [`report`](UtilisationShedder::report).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::shed::{Classes, Measure, Shedder, UtilisationShedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).max_limit(100).build()?;
    /// let limiter = Arc::new(AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone())?);
    /// let classes = Classes::google();
    /// let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
    ///     .escalate_after(Duration::from_millis(100))
    ///     .build_with_clock(clock.clone())?;
    ///
    /// let permits: Vec<_> = (0..9).map(|_| limiter.try_acquire()).collect::<Result<_, _>>()?;
    /// shedder.report_adaptive(&limiter)?; // 9 of 10: at the 0.9 threshold
    /// clock.advance(Duration::from_millis(100));
    /// shedder.report_adaptive(&limiter)?;
    /// assert_eq!(shedder.utilisation(), 0.9);
    /// assert!(!shedder.decide(&classes.lowest()).is_admitted());
    /// # drop(permits);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "adaptive")]
    pub fn report_adaptive<L: LimitAlgorithm, A: Clock>(
        &self,
        limiter: &AdaptiveLimiter<L, A>,
    ) -> Result<(), ConfigError> {
        self.report(limiter.inflight(), limiter.limit())
    }

    /// Utilisation now: in flight over capacity, or the last report (0 before any).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, Shedder, UtilisationShedder};
    ///
    /// let classes = Classes::google();
    /// let shedder = UtilisationShedder::builder(classes.clone(), Measure::InFlight { capacity: 4 }).build()?;
    /// let _slot = shedder.decide(&classes.highest());
    /// assert_eq!(shedder.utilisation(), 0.25);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn utilisation(&self) -> f64 {
        match self.measure {
            Measure::InFlight { capacity } => self.in_flight() as f64 / capacity as f64,
            Measure::Reported => f64::from_bits(self.state.reported.load(Ordering::Relaxed)),
        }
    }

    /// How many of the least critical classes are shed now (0 when none).
    pub fn level(&self) -> usize {
        self.state.escalation.lock().level()
    }

    /// The requests admitted and not yet finished.
    pub fn in_flight(&self) -> u64 {
        self.state.in_flight.load(Ordering::Relaxed)
    }

    /// The mode switch this shedder follows.
    pub fn mode(&self) -> &ModeSwitch {
        &self.mode
    }

    /// The clock the holds are timed on.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    fn observe(&self, utilisation: f64) -> usize {
        let now = self.clock.now();
        self.state.escalation.lock().observe(now, utilisation)
    }

    fn slot(&self) -> UtilisationSlot {
        self.state.in_flight.fetch_add(1, Ordering::Relaxed);
        UtilisationSlot {
            in_flight: Arc::clone(&self.state.in_flight),
        }
    }
}

impl<C: Clock> Shedder for UtilisationShedder<C> {
    type Slot = UtilisationSlot;

    /// Reads utilisation, moves the level if a hold has passed, and sheds `class`
    /// if it is among the `level` least critical. A refusal hints the
    /// de-escalation hold as `retry_after`: the class comes back no sooner.
    fn decide(&self, class: &Class) -> ShedDecision<UtilisationSlot> {
        let class = self.classes.own(class);
        let class = &*class;
        let level = self.observe(self.utilisation());
        let mode = self.mode.get();
        let shed = class.index() >= self.classes.len() - level;
        let decision = if !shed || mode == Mode::Off {
            ShedDecision::Admit(self.slot())
        } else {
            let shed = Shed::new(
                class.clone(),
                ShedReason::Utilisation,
                Some(self.retry_after),
            );
            if mode == Mode::Shadow {
                ShedDecision::WouldShed {
                    slot: self.slot(),
                    shed,
                }
            } else {
                ShedDecision::Shed(shed)
            }
        };
        decision.report(self.events.as_ref(), class)
    }

    fn classes(&self) -> &Classes {
        &self.classes
    }
}

impl<C: Clock> Clone for UtilisationShedder<C> {
    fn clone(&self) -> UtilisationShedder<C> {
        UtilisationShedder {
            classes: self.classes.clone(),
            measure: self.measure,
            clock: self.clock.clone(),
            state: Arc::clone(&self.state),
            retry_after: self.retry_after,
            mode: self.mode.clone(),
            events: self.events.clone(),
        }
    }
}

impl<C: Clock> fmt::Debug for UtilisationShedder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UtilisationShedder")
            .field("classes", &self.classes)
            .field("measure", &self.measure)
            .field("level", &self.level())
            .field("in_flight", &self.in_flight())
            .field("mode", &self.mode)
            .finish()
    }
}

/// Settings of a [`UtilisationShedder`], checked by
/// [`build`](UtilisationBuilder::build).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::{Classes, Measure, UtilisationShedder};
///
/// let shedder = UtilisationShedder::builder(Classes::google(), Measure::InFlight { capacity: 32 })
///     .shed_above(0.8)
///     .recover_below(0.6)
///     .escalate_after(Duration::from_millis(500))
///     .deescalate_after(Duration::from_secs(30))
///     .build()?;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct UtilisationBuilder {
    classes: Classes,
    measure: Measure,
    high: f64,
    low: f64,
    up_after: Duration,
    down_after: Duration,
}

impl UtilisationBuilder {
    /// The longest hold accepted, for [`escalate_after`](UtilisationBuilder::escalate_after)
    /// and [`deescalate_after`](UtilisationBuilder::deescalate_after): an hour, as
    /// every other wait in the crate. A longer hold would leave a shedder that, in
    /// practice, never sheds or never recovers.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::ConfigError;
    /// use tollgate::shed::{Classes, Measure, UtilisationBuilder, UtilisationShedder};
    ///
    /// let builder = UtilisationShedder::builder(Classes::google(), Measure::Reported);
    /// let hour = UtilisationBuilder::MAX_HOLD;
    /// assert!(builder.clone().escalate_after(hour).deescalate_after(hour).build().is_ok());
    /// assert_eq!(
    ///     builder.escalate_after(Duration::MAX).build().unwrap_err(),
    ///     ConfigError::TooLong { parameter: "escalate_after", max: hour, within: "a shedder's hold" }
    /// );
    /// ```
    pub const MAX_HOLD: Duration = Duration::from_secs(3600);

    /// The utilisation at or above which the shedder escalates (default 0.9), in
    /// `(0, 1]`: above 1 the shedder would shed only once more is in flight than
    /// the service runs, which a [`Measure::InFlight`] never reaches before the
    /// overload.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    ///
    /// let shedder = UtilisationShedder::builder(Classes::google(), Measure::Reported)
    ///     .shed_above(0.8)
    ///     .build()?;
    /// shedder.report(80, 100)?; // at the threshold: the escalation hold starts
    /// assert!(UtilisationShedder::builder(Classes::google(), Measure::Reported)
    ///     .shed_above(f64::MAX)
    ///     .build()
    ///     .is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn shed_above(self, high: f64) -> UtilisationBuilder {
        UtilisationBuilder { high, ..self }
    }

    /// The utilisation at or below which it de-escalates, below `shed_above`
    /// (default 0.7): the gap between the two is the hysteresis, in which the
    /// level holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    ///
    /// let builder = UtilisationShedder::builder(Classes::google(), Measure::Reported);
    /// assert!(builder.clone().shed_above(0.9).recover_below(0.5).build().is_ok());
    /// assert!(builder.shed_above(0.9).recover_below(0.95).build().is_err());
    /// ```
    pub fn recover_below(self, low: f64) -> UtilisationBuilder {
        UtilisationBuilder { low, ..self }
    }

    /// How long utilisation stays high before each step up (default 1 s), at most
    /// [`MAX_HOLD`](UtilisationBuilder::MAX_HOLD).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let shedder = UtilisationShedder::builder(Classes::google(), Measure::Reported)
    ///     .escalate_after(Duration::from_millis(200))
    ///     .build_with_clock(clock.clone())?;
    /// shedder.report(95, 100)?;
    /// clock.advance(Duration::from_millis(200));
    /// shedder.report(95, 100)?;
    /// assert_eq!(shedder.level(), 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn escalate_after(self, hold: Duration) -> UtilisationBuilder {
        UtilisationBuilder {
            up_after: hold,
            ..self
        }
    }

    /// How long utilisation stays low before each step down (default 10 s), at
    /// most [`MAX_HOLD`](UtilisationBuilder::MAX_HOLD); also the `retry_after` hint
    /// of a refusal.
    ///
    /// It may not be shorter than [`escalate_after`](UtilisationBuilder::escalate_after):
    /// the shedder recovers slowly. Shedding a class lowers utilisation at once, so
    /// a quicker recovery would admit the class again while the overload lasts, and
    /// shed it again a hold later: the level would flap, one class in and out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::ConfigError;
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    ///
    /// let builder = UtilisationShedder::builder(Classes::google(), Measure::Reported)
    ///     .escalate_after(Duration::from_secs(2));
    /// assert!(builder.clone().deescalate_after(Duration::from_secs(20)).build().is_ok());
    /// assert_eq!(
    ///     builder.deescalate_after(Duration::from_secs(1)).build().unwrap_err(),
    ///     ConfigError::OutOfRange { parameter: "deescalate_after", expected: "at least escalate_after" }
    /// );
    /// ```
    pub fn deescalate_after(self, hold: Duration) -> UtilisationBuilder {
        UtilisationBuilder {
            down_after: hold,
            ..self
        }
    }

    /// Checks the settings; the shedder reads the [`MonotonicClock`].
    ///
    /// # Errors
    ///
    /// As [`build_with_clock`](UtilisationBuilder::build_with_clock).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    ///
    /// assert!(UtilisationShedder::builder(Classes::google(), Measure::Reported).build().is_ok());
    /// ```
    pub fn build(self) -> Result<UtilisationShedder, ConfigError> {
        self.build_with_clock(MonotonicClock::default())
    }

    /// Checks the settings; the shedder reads `clock`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] for fewer than two classes (one could never be
    /// shed), a `shed_above` outside `(0, 1]`, a negative `recover_below`, one not
    /// below `shed_above`, or a `deescalate_after` shorter than `escalate_after`;
    /// [`ConfigError::NotANumber`] / [`ConfigError::Infinite`] for such thresholds;
    /// [`ConfigError::Zero`] for a zero hold or a zero in-flight capacity;
    /// [`ConfigError::TooLong`] for a hold beyond
    /// [`MAX_HOLD`](UtilisationBuilder::MAX_HOLD).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::shed::{Classes, Measure, UtilisationShedder};
    /// use tollgate::time::ManualClock;
    ///
    /// let builder = UtilisationShedder::builder(Classes::google(), Measure::Reported);
    /// assert_eq!(
    ///     builder.shed_above(0.5).recover_below(0.5).build_with_clock(ManualClock::new()).unwrap_err(),
    ///     ConfigError::OutOfRange { parameter: "recover_below", expected: "below shed_above" }
    /// );
    /// ```
    pub fn build_with_clock<C: Clock>(
        self,
        clock: C,
    ) -> Result<UtilisationShedder<C>, ConfigError> {
        if self.classes.len() < 2 {
            return Err(ConfigError::OutOfRange {
                parameter: "classes",
                expected: "at least two classes",
            });
        }
        finite("shed_above", self.high)?;
        // Above 1 (f64::MAX, say) the shedder would never shed.
        if !(self.high > 0.0 && self.high <= 1.0) {
            return Err(ConfigError::OutOfRange {
                parameter: "shed_above",
                expected: "within (0, 1]",
            });
        }
        finite("recover_below", self.low)?;
        if self.low < 0.0 {
            return Err(ConfigError::OutOfRange {
                parameter: "recover_below",
                expected: "at least 0",
            });
        }
        if self.low >= self.high {
            return Err(ConfigError::OutOfRange {
                parameter: "recover_below",
                expected: "below shed_above",
            });
        }
        for (parameter, hold) in [
            ("escalate_after", self.up_after),
            ("deescalate_after", self.down_after),
        ] {
            if hold.is_zero() {
                return Err(ConfigError::Zero { parameter });
            }
            // A hold of Duration::MAX never ends: the shedder would never shed.
            if hold > UtilisationBuilder::MAX_HOLD {
                return Err(ConfigError::TooLong {
                    parameter,
                    max: UtilisationBuilder::MAX_HOLD,
                    within: "a shedder's hold",
                });
            }
        }
        if self.down_after < self.up_after {
            return Err(ConfigError::OutOfRange {
                parameter: "deescalate_after",
                expected: "at least escalate_after",
            });
        }
        if self.measure == (Measure::InFlight { capacity: 0 }) {
            return Err(ConfigError::Zero {
                parameter: "capacity",
            });
        }
        let escalation = Escalation::new(
            self.classes.len() - 1,
            self.high,
            self.low,
            self.up_after,
            self.down_after,
        );
        Ok(UtilisationShedder {
            classes: self.classes,
            measure: self.measure,
            clock,
            state: Arc::new(State {
                escalation: Mutex::new(escalation),
                in_flight: Arc::new(AtomicU64::new(0)),
                reported: AtomicU64::new(0f64.to_bits()),
            }),
            retry_after: self.down_after,
            mode: ModeSwitch::default(),
            events: None,
        })
    }
}

fn finite(parameter: &'static str, value: f64) -> Result<(), ConfigError> {
    if value.is_nan() {
        Err(ConfigError::NotANumber { parameter })
    } else if value.is_infinite() {
        Err(ConfigError::Infinite { parameter })
    } else {
        Ok(())
    }
}

/// A request's place in a [`UtilisationShedder`]'s count in flight, given back when
/// dropped.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, Measure, Shedder, UtilisationShedder};
///
/// let classes = Classes::google();
/// let shedder = UtilisationShedder::builder(classes.clone(), Measure::InFlight { capacity: 10 }).build()?;
/// let slot = shedder.decide(&classes.lowest()).into_slot().unwrap();
/// assert_eq!(shedder.in_flight(), 1);
/// drop(slot);
/// assert_eq!(shedder.in_flight(), 0);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "the slot is given back as soon as it is dropped"]
pub struct UtilisationSlot {
    in_flight: Arc<AtomicU64>,
}

impl Drop for UtilisationSlot {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for UtilisationSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UtilisationSlot")
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::ManualClock;

    fn builder() -> UtilisationBuilder {
        UtilisationShedder::builder(Classes::google(), Measure::InFlight { capacity: 10 })
    }

    #[test]
    fn bad_settings_are_typed_errors() {
        let clock = ManualClock::new();
        let err = |b: UtilisationBuilder| b.build_with_clock(clock.clone()).unwrap_err();
        assert_eq!(
            err(builder().shed_above(f64::NAN)),
            ConfigError::NotANumber {
                parameter: "shed_above"
            }
        );
        assert_eq!(
            err(builder().recover_below(f64::NAN)),
            ConfigError::NotANumber {
                parameter: "recover_below"
            }
        );
        assert_eq!(
            err(builder().shed_above(f64::INFINITY)),
            ConfigError::Infinite {
                parameter: "shed_above"
            }
        );
        assert_eq!(
            err(builder().recover_below(-0.1)).parameter(),
            "recover_below"
        );
        assert_eq!(
            err(builder().shed_above(0.7).recover_below(0.8)).parameter(),
            "recover_below"
        );
        assert_eq!(
            err(builder().escalate_after(Duration::ZERO)),
            ConfigError::Zero {
                parameter: "escalate_after"
            }
        );
        assert_eq!(
            err(builder().deescalate_after(Duration::ZERO)),
            ConfigError::Zero {
                parameter: "deescalate_after"
            }
        );
        assert_eq!(
            err(UtilisationShedder::builder(
                Classes::google(),
                Measure::InFlight { capacity: 0 }
            )),
            ConfigError::Zero {
                parameter: "capacity"
            }
        );
        assert_eq!(
            err(UtilisationShedder::builder(
                Classes::new(["one"]).unwrap(),
                Measure::Reported
            ))
            .parameter(),
            "classes"
        );
    }

    #[test]
    fn extremes_decide_without_panicking() {
        let classes = Classes::google();
        let clock = ManualClock::starting_at(crate::time::Nanos::MAX - Duration::from_secs(1));
        let shedder =
            UtilisationShedder::builder(classes.clone(), Measure::InFlight { capacity: u64::MAX })
                .escalate_after(UtilisationBuilder::MAX_HOLD)
                .deescalate_after(UtilisationBuilder::MAX_HOLD)
                .build_with_clock(clock.clone())
                .unwrap();
        let slot = shedder.decide(&classes.lowest());
        assert!(slot.is_admitted());
        clock.advance(Duration::MAX);
        assert!(shedder.decide(&classes.lowest()).is_admitted());
        assert_eq!(shedder.level(), 0);
    }

    #[test]
    fn reports_are_refused_when_counting_in_flight() {
        let shedder = builder().build_with_clock(ManualClock::new()).unwrap();
        assert_eq!(shedder.report(1, 2).unwrap_err().parameter(), "measure");
    }
}
