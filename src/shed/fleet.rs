//! [`FleetShedder`]: Stripe's fleet-usage load shedder, a capacity with a share
//! reserved for critical classes.

use std::fmt;
use std::time::Duration;

use super::asynchronous::OnFailure;
use super::class::{Class, Classes};
use super::decision::{Shed, ShedDecision, ShedReason, Shedder};
use super::mode::{Mode, ModeSwitch};
use super::usage::{LocalUsage, UsageCounter};
use crate::error::ConfigError;
use crate::observe::Events;
use crate::sync::Arc;

/// Stripe's fleet-usage load shedder: of `capacity` requests in flight, a fraction
/// is reserved for critical classes.
///
/// A non-critical request is shed once `capacity × (1 − reserved)` requests are in
/// flight (of any class); a critical one once `capacity` are. So critical work
/// always finds the reserve free of non-critical work, and, when the service is
/// otherwise idle, may use the whole capacity.
///
/// The classes counted as critical are, by default, the more critical half of the
/// set (at least one): `critical_plus` and `critical` for [`Classes::google`];
/// [`with_critical`](FleetShedder::with_critical) names them. A class of another
/// set is read by its name ([`Classes::resolve`]): critical if its name is a critical
/// class of this set, otherwise as this set's default class.
///
/// Counting is one compare-and-swap on a [`UsageCounter`]: [`LocalUsage`] in
/// process, or any counter shared by a fleet. Clones share the counter. Across a
/// fleet through Redis (feature `redis`), the counter is a `RedisUsage` and
/// decisions are asynchronous: `decide_async`, or the
/// [`AsyncShedder`](super::AsyncShedder) implementation that a `ShedLayer` awaits
/// (`ShedLayer::new_async`), which answers a Redis failure by its
/// [`OnFailure`](super::OnFailure) policy (admit, by default).
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, Shedder};
///
/// let classes = Classes::google();
/// let fleet = FleetShedder::new(classes.clone(), 100, 0.2)?;
/// let sheddable = classes.parse("sheddable");
/// let critical = classes.parse("critical");
///
/// let mut held = Vec::new();
/// while let Ok(slot) = fleet.decide(&sheddable).into_slot() {
///     held.push(slot);
/// }
/// assert_eq!(held.len(), 80); // the other 20 are reserved
/// while let Ok(slot) = fleet.decide(&critical).into_slot() {
///     held.push(slot);
/// }
/// assert_eq!(held.len(), 100);
/// held.clear(); // every slot released
/// assert_eq!(fleet.in_flight(), 0);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct FleetShedder<U = LocalUsage> {
    classes: Classes,
    critical: Arc<[bool]>,
    capacity: u64,
    shared_limit: u64,
    counter: Arc<U>,
    mode: ModeSwitch,
    events: Option<Events>,
    retry_after: Option<Duration>,
    /// What a decision answers when the counter fails (Redis only).
    on_failure: OnFailure,
}

impl FleetShedder {
    /// A shedder counting in process, for `capacity` requests in flight with the
    /// fraction `reserved` of them kept for critical classes.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `capacity`; [`ConfigError::NotANumber`] for a
    /// NaN `reserved`, [`ConfigError::OutOfRange`] for one outside `[0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let fleet = FleetShedder::new(Classes::google(), 100, 0.2)?;
    /// assert_eq!(fleet.shared_limit(), 80);
    /// assert_eq!(
    ///     FleetShedder::new(Classes::google(), 100, 1.5).unwrap_err(),
    ///     ConfigError::OutOfRange { parameter: "reserved", expected: "within [0, 1]" }
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(
        classes: Classes,
        capacity: u64,
        reserved: f64,
    ) -> Result<FleetShedder, ConfigError> {
        FleetShedder::with_counter(classes, capacity, reserved, LocalUsage::new())
    }
}

impl<U> FleetShedder<U> {
    /// As [`new`](FleetShedder::new), counting with `counter` (one shared by a
    /// fleet, for example).
    ///
    /// # Errors
    ///
    /// As [`new`](FleetShedder::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder, LocalUsage};
    ///
    /// let fleet = FleetShedder::with_counter(Classes::google(), 10, 0.5, LocalUsage::new())?;
    /// assert_eq!(fleet.capacity(), 10);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_counter(
        classes: Classes,
        capacity: u64,
        reserved: f64,
        counter: U,
    ) -> Result<FleetShedder<U>, ConfigError> {
        if capacity == 0 {
            return Err(ConfigError::Zero {
                parameter: "capacity",
            });
        }
        let shared_limit = capacity - reserved_slots(capacity, reserved)?;
        let top = (classes.len() / 2).max(1);
        let critical = (0..classes.len()).map(|i| i < top).collect();
        Ok(FleetShedder {
            classes,
            critical,
            capacity,
            shared_limit,
            counter: Arc::new(counter),
            mode: ModeSwitch::default(),
            events: None,
            retry_after: None,
            on_failure: OnFailure::default(),
        })
    }

    /// The same shedder with `names` as its critical classes (ASCII case ignored).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for no name; [`ConfigError::OutOfRange`] for a name not
    /// in the set.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 10, 0.2)?.with_critical(["critical_plus"])?;
    /// assert!(fleet.is_critical(&classes.parse("critical_plus")));
    /// assert!(!fleet.is_critical(&classes.parse("critical")));
    /// assert!(FleetShedder::new(classes, 10, 0.2)?.with_critical(["gold"]).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_critical<I, S>(self, names: I) -> Result<FleetShedder<U>, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut critical = vec![false; self.classes.len()];
        let mut any = false;
        for name in names {
            let class = self
                .classes
                .get(name.as_ref())
                .ok_or(ConfigError::OutOfRange {
                    parameter: "critical",
                    expected: "names of classes in the set",
                })?;
            critical[class.index()] = true;
            any = true;
        }
        if !any {
            return Err(ConfigError::Zero {
                parameter: "critical",
            });
        }
        Ok(FleetShedder {
            critical: Arc::from(critical),
            ..self
        })
    }

    /// The same shedder, following `mode` (shadow mode, kill switch).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder, Mode, ModeSwitch, Shedder};
    ///
    /// let switch = ModeSwitch::new(Mode::Shadow);
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 1, 1.0)?.with_mode(switch.clone());
    /// let decision = fleet.decide(&classes.lowest()); // all reserved
    /// assert!(decision.is_admitted() && decision.would_shed());
    /// switch.set(Mode::Enforce);
    /// assert!(!fleet.decide(&classes.lowest()).is_admitted());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_mode(self, mode: ModeSwitch) -> FleetShedder<U> {
        FleetShedder { mode, ..self }
    }

    /// The same shedder, emitting one event per decision into `events`, keyed by
    /// the class name.
    ///
    /// The hub is a setting of this copy, as the mode is: clones made after this
    /// call share it, and a later call replaces it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tollgate::observe::{Event, EventKind, Events};
    /// use tollgate::shed::{Classes, FleetShedder, Shedder};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let events = Events::new("fleet");
    /// let _subscription = events.subscribe({
    ///     let seen = Arc::clone(&seen);
    ///     move |e: &Event<'_>| seen.lock().unwrap().push((e.key.unwrap().to_owned(), e.kind))
    /// });
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 10, 0.2)?.with_events(events);
    /// let _slot = fleet.decide(&classes.parse("critical"));
    /// assert_eq!(*seen.lock().unwrap(), [("critical".to_owned(), EventKind::Admitted)]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_events(self, events: Events) -> FleetShedder<U> {
        FleetShedder {
            events: Some(events),
            ..self
        }
    }

    /// The same shedder, hinting `retry_after` in its refusals (`None` by default:
    /// a slot comes back when a request ends, which the shedder cannot foresee).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, FleetShedder, Shedder};
    ///
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 1, 1.0)?
    ///     .with_retry_after(Some(Duration::from_secs(2)));
    /// let shed = fleet.decide(&classes.lowest()).into_slot().unwrap_err();
    /// assert_eq!(shed.retry_after(), Some(Duration::from_secs(2)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_retry_after(self, retry_after: Option<Duration>) -> FleetShedder<U> {
        FleetShedder {
            retry_after,
            ..self
        }
    }

    /// Whether `class` may use the reserve; a class of another set is read by its
    /// name ([`Classes::resolve`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let fleet = FleetShedder::new(Classes::new(["user", "critical", "batch"])?, 10, 0.2)?
    ///     .with_critical(["critical"])?;
    /// // `critical` is at index 1 in both sets; `critical_plus`, at 0 in Google's,
    /// // is no name of the fleet's: its default class, `batch`.
    /// assert!(fleet.is_critical(&Classes::google().parse("critical")));
    /// assert!(!fleet.is_critical(&Classes::google().highest()));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn is_critical(&self, class: &Class) -> bool {
        self.critical[self.classes.index_of(class)]
    }

    /// The requests in flight at most, critical ones included.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The requests in flight above which non-critical classes are shed:
    /// `capacity × (1 − reserved)`.
    pub fn shared_limit(&self) -> u64 {
        self.shared_limit
    }

    /// The mode switch this shedder follows.
    pub fn mode(&self) -> &ModeSwitch {
        &self.mode
    }

    /// The counter, shared by clones.
    pub fn counter(&self) -> &U {
        &self.counter
    }

    /// The counter, for a slot to keep.
    pub(super) fn shared_counter(&self) -> Arc<U> {
        Arc::clone(&self.counter)
    }

    #[cfg(feature = "redis")]
    /// The classes, for a counter that is not a [`UsageCounter`].
    pub(super) fn class_set(&self) -> &Classes {
        &self.classes
    }

    #[cfg(feature = "redis")]
    /// What a decision answers when the counter fails.
    pub(super) fn failure_policy(&self) -> OnFailure {
        self.on_failure
    }

    #[cfg(feature = "redis")]
    /// The same shedder, answering by `policy` when its counter fails.
    pub(super) fn set_failure_policy(self, policy: OnFailure) -> FleetShedder<U> {
        FleetShedder {
            on_failure: policy,
            ..self
        }
    }

    #[cfg(feature = "redis")]
    /// The decision for `class` when the counter could not answer: by the failure
    /// policy and the mode, holding no slot. Reported to the events with the detail
    /// `unavailable`.
    pub(super) fn unavailable<S>(&self, class: &Class) -> ShedDecision<Option<S>> {
        let class = &self.classes.resolve(class);
        let shed = || Shed::new(class.clone(), ShedReason::Unavailable, self.retry_after);
        let decision = match (self.on_failure, self.mode.get()) {
            (OnFailure::Open, _) | (OnFailure::Closed, Mode::Off) => ShedDecision::Admit(None),
            (OnFailure::Closed, Mode::Shadow) => ShedDecision::WouldShed {
                slot: None,
                shed: shed(),
            },
            (OnFailure::Closed, Mode::Enforce) => ShedDecision::Shed(shed()),
        };
        if let Some(events) = &self.events {
            let kind = decision.event_kind();
            let detail = ShedReason::Unavailable.as_str();
            super::decision::emit(events, class, kind, Some(detail));
        }
        decision
    }

    /// What `class`, of this set, asks of the counter now: its limit, and whether a
    /// slot is to be taken even past it (shadow mode, shedding off).
    pub(super) fn plan(&self, class: &Class) -> Plan {
        let critical = self.critical[class.index()];
        let limit = if critical {
            self.capacity
        } else {
            self.shared_limit
        };
        Plan {
            critical,
            limit,
            mode: self.mode.get(),
        }
    }

    /// The decision for `class` once the counter answered: `slot` if it took one,
    /// `within` if that was within the plan's limit. Reported to the events.
    pub(super) fn settle<S>(
        &self,
        class: &Class,
        plan: Plan,
        slot: Option<S>,
        within: bool,
    ) -> ShedDecision<S> {
        let refusal = || {
            let reason = if plan.critical || self.shared_limit == self.capacity {
                ShedReason::Full
            } else {
                ShedReason::Reserved
            };
            Shed::new(class.clone(), reason, self.retry_after)
        };
        let decision = match slot {
            Some(slot) if within || plan.mode == Mode::Off => ShedDecision::Admit(slot),
            Some(slot) => ShedDecision::WouldShed {
                slot,
                shed: refusal(),
            },
            None => ShedDecision::Shed(refusal()),
        };
        decision.report(self.events.as_ref(), class)
    }
}

/// What one decision asks of the counter.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    critical: bool,
    /// The most slots in use after taking one within the limit.
    pub(super) limit: u64,
    pub(super) mode: Mode,
}

impl Plan {
    /// Whether a slot is taken even past the limit: the request runs anyway.
    pub(super) fn takes_anyway(&self) -> bool {
        self.mode != Mode::Enforce
    }
}

impl<U: UsageCounter> FleetShedder<U> {
    /// The requests in flight now.
    pub fn in_flight(&self) -> u64 {
        self.counter.in_use()
    }

    fn slot(&self, lease: U::Lease) -> FleetSlot<U> {
        FleetSlot {
            counter: self.shared_counter(),
            lease: Some(lease),
        }
    }
}

impl<U: UsageCounter> Shedder for FleetShedder<U> {
    type Slot = FleetSlot<U>;

    /// Admits `class` if fewer than its limit are in flight (the whole capacity for
    /// a critical class, the shared limit for others), in one atomic step. A class
    /// of another set is read by its name ([`Classes::resolve`]).
    fn decide(&self, class: &Class) -> ShedDecision<FleetSlot<U>> {
        let class = self.classes.own(class);
        let class = &*class;
        let plan = self.plan(class);
        let (lease, within) = if plan.mode == Mode::Off {
            (Some(self.counter.take()), false)
        } else {
            match self.counter.try_take(plan.limit) {
                Some(lease) => (Some(lease), true),
                None if plan.takes_anyway() => (Some(self.counter.take()), false),
                None => (None, false),
            }
        };
        self.settle(class, plan, lease.map(|l| self.slot(l)), within)
    }

    fn classes(&self) -> &Classes {
        &self.classes
    }
}

impl<U> Clone for FleetShedder<U> {
    fn clone(&self) -> FleetShedder<U> {
        FleetShedder {
            classes: self.classes.clone(),
            critical: Arc::clone(&self.critical),
            capacity: self.capacity,
            shared_limit: self.shared_limit,
            counter: Arc::clone(&self.counter),
            mode: self.mode.clone(),
            events: self.events.clone(),
            retry_after: self.retry_after,
            on_failure: self.on_failure,
        }
    }
}

impl<U: fmt::Debug> fmt::Debug for FleetShedder<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetShedder")
            .field("classes", &self.classes)
            .field("critical", &self.critical)
            .field("capacity", &self.capacity)
            .field("shared_limit", &self.shared_limit)
            .field("counter", &self.counter)
            .field("mode", &self.mode)
            .field("on_failure", &self.on_failure)
            .finish()
    }
}

/// The slots kept for critical classes: `capacity × reserved`, rounded up (a
/// product within a rounding error of a whole number is taken as that number).
fn reserved_slots(capacity: u64, reserved: f64) -> Result<u64, ConfigError> {
    if reserved.is_nan() {
        return Err(ConfigError::NotANumber {
            parameter: "reserved",
        });
    }
    if !(0.0..=1.0).contains(&reserved) {
        return Err(ConfigError::OutOfRange {
            parameter: "reserved",
            expected: "within [0, 1]",
        });
    }
    let exact = capacity as f64 * reserved;
    let nearest = exact.round();
    let slots = if (exact - nearest).abs() <= exact * 1e-12 {
        nearest
    } else {
        exact.ceil()
    };
    // `as` saturates; u64::MAX as f64 rounds up past u64::MAX.
    Ok((slots as u64).min(capacity))
}

/// A request's place in a [`FleetShedder`]'s count, given back when dropped.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, Shedder};
///
/// let classes = Classes::google();
/// let fleet = FleetShedder::new(classes.clone(), 1, 0.0)?;
/// let slot = fleet.decide(&classes.highest()).into_slot().unwrap();
/// assert_eq!(fleet.in_flight(), 1);
/// drop(slot);
/// assert_eq!(fleet.in_flight(), 0);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "the slot is given back as soon as it is dropped"]
pub struct FleetSlot<U: UsageCounter = LocalUsage> {
    counter: Arc<U>,
    lease: Option<U::Lease>,
}

impl<U: UsageCounter> Drop for FleetSlot<U> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.counter.give_back(lease);
        }
    }
}

impl<U: UsageCounter> fmt::Debug for FleetSlot<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetSlot")
            .field("in_flight", &self.counter.in_use())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_rounded_up_and_exact_products_are_kept() {
        assert_eq!(reserved_slots(100, 0.2), Ok(20));
        assert_eq!(reserved_slots(100, 0.3), Ok(30));
        assert_eq!(reserved_slots(10, 0.7), Ok(7));
        assert_eq!(reserved_slots(3, 0.5), Ok(2));
        assert_eq!(reserved_slots(100, 0.0), Ok(0));
        assert_eq!(reserved_slots(100, 1.0), Ok(100));
        assert_eq!(reserved_slots(u64::MAX, 1.0), Ok(u64::MAX));
        assert_eq!(reserved_slots(u64::MAX, 0.0), Ok(0));
    }

    #[test]
    fn bad_reserves_are_typed_errors() {
        let classes = Classes::google();
        for bad in [-0.1, 1.0001, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                FleetShedder::new(classes.clone(), 10, bad).unwrap_err(),
                ConfigError::OutOfRange {
                    parameter: "reserved",
                    expected: "within [0, 1]"
                },
                "{bad}"
            );
        }
        assert_eq!(
            FleetShedder::new(classes.clone(), 10, f64::NAN).unwrap_err(),
            ConfigError::NotANumber {
                parameter: "reserved"
            }
        );
        assert_eq!(
            FleetShedder::new(classes.clone(), 0, 0.2).unwrap_err(),
            ConfigError::Zero {
                parameter: "capacity"
            }
        );
        assert_eq!(
            FleetShedder::new(classes, 10, 0.2)
                .unwrap()
                .with_critical(Vec::<&str>::new())
                .unwrap_err(),
            ConfigError::Zero {
                parameter: "critical"
            }
        );
    }

    #[test]
    fn default_critical_classes_are_the_top_half() {
        let google = FleetShedder::new(Classes::google(), 10, 0.2).unwrap();
        let flags: Vec<bool> = Classes::google()
            .iter()
            .map(|c| google.is_critical(&c))
            .collect();
        assert_eq!(flags, [true, true, false, false]);
        let one = Classes::new(["only"]).unwrap();
        let fleet = FleetShedder::new(one.clone(), 10, 0.2).unwrap();
        assert!(fleet.is_critical(&one.highest()));
        let three = Classes::new(["a", "b", "c"]).unwrap();
        let fleet = FleetShedder::new(three.clone(), 10, 0.2).unwrap();
        assert_eq!(three.iter().filter(|c| fleet.is_critical(c)).count(), 1);
    }

    #[test]
    fn a_huge_capacity_decides_without_overflow() {
        let classes = Classes::google();
        let fleet = FleetShedder::new(classes.clone(), u64::MAX, 0.5).unwrap();
        let low = fleet.decide(&classes.lowest());
        let high = fleet.decide(&classes.highest());
        assert!(low.is_admitted() && high.is_admitted());
        assert_eq!(fleet.shared_limit(), u64::MAX / 2);
        assert_eq!(fleet.in_flight(), 2);
    }

    #[test]
    fn shadow_mode_counts_what_it_would_have_shed() {
        let classes = Classes::google();
        let switch = ModeSwitch::new(Mode::Shadow);
        let fleet = FleetShedder::new(classes.clone(), 2, 0.5)
            .unwrap()
            .with_mode(switch.clone());
        let low = classes.lowest();
        let a = fleet.decide(&low);
        assert!(matches!(a, ShedDecision::Admit(_)));
        let b = fleet.decide(&low);
        assert!(b.is_admitted() && b.would_shed());
        assert_eq!(b.shed().map(Shed::reason), Some(ShedReason::Reserved));
        assert_eq!(fleet.in_flight(), 2);
        // Enforcing again, the true load counts: both slots are held.
        switch.set(Mode::Enforce);
        assert!(!fleet.decide(&classes.highest()).is_admitted());
        drop((a, b));
        assert_eq!(fleet.in_flight(), 0);
    }
}
