//! What a shedder answers: [`ShedDecision`], with the [`Shed`] refusal and its
//! [`ShedReason`], and the [`Shedder`] trait every shedder implements.

use std::fmt;
use std::time::Duration;

use super::class::{Class, Classes};
use super::system::Threshold;
use crate::observe::{DenyReason, Event, EventKind, Events};

/// One shedder's answer for one request.
///
/// Being shed is an outcome, not an error: configuration errors are
/// [`ConfigError`](crate::ConfigError)s, returned when a shedder is built.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, ShedDecision, Shedder};
///
/// let classes = Classes::google();
/// let fleet = FleetShedder::new(classes.clone(), 1, 0.0)?;
/// let held = fleet.decide(&classes.lowest());
/// assert!(held.is_admitted());
/// match fleet.decide(&classes.lowest()) {
///     ShedDecision::Shed(shed) => assert_eq!(shed.class().name(), "sheddable"),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "an admitted request holds its slot until the decision is dropped"]
#[derive(Debug)]
pub enum ShedDecision<S> {
    /// Admitted: hold the slot for as long as the request runs.
    Admit(S),
    /// Admitted because the shedder runs in [shadow mode](super::Mode::Shadow),
    /// although it would have shed the request: hold the slot as for `Admit`.
    WouldShed {
        /// The slot to hold.
        slot: S,
        /// What the shedder would have answered.
        shed: Shed,
    },
    /// Refused: answer at once (a 503), with the hint.
    Shed(Shed),
}

impl<S> ShedDecision<S> {
    /// Whether the request may run (`Admit` or `WouldShed`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder, Mode, ModeSwitch, Shedder};
    ///
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 1, 1.0)?
    ///     .with_mode(ModeSwitch::new(Mode::Shadow));
    /// let decision = fleet.decide(&classes.lowest()); // all reserved: would shed
    /// assert!(decision.is_admitted() && decision.would_shed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn is_admitted(&self) -> bool {
        !matches!(self, ShedDecision::Shed(_))
    }

    /// Whether the shedder refused, or would have refused, the request.
    pub fn would_shed(&self) -> bool {
        !matches!(self, ShedDecision::Admit(_))
    }

    /// The slot, or the refusal.
    ///
    /// # Errors
    ///
    /// The [`Shed`] when the request was refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder, Shedder};
    ///
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 10, 0.5)?;
    /// let slot = fleet.decide(&classes.highest()).into_slot().expect("room");
    /// drop(slot); // released
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn into_slot(self) -> Result<S, Shed> {
        match self {
            ShedDecision::Admit(slot) | ShedDecision::WouldShed { slot, .. } => Ok(slot),
            ShedDecision::Shed(shed) => Err(shed),
        }
    }

    /// The refusal, real or (in shadow mode) would-be.
    pub fn shed(&self) -> Option<&Shed> {
        match self {
            ShedDecision::Admit(_) => None,
            ShedDecision::WouldShed { shed, .. } | ShedDecision::Shed(shed) => Some(shed),
        }
    }

    /// The event a listener sees for this decision.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{DenyReason, EventKind};
    /// use tollgate::shed::{Classes, FleetShedder, Shedder};
    ///
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 1, 1.0)?;
    /// assert_eq!(
    ///     fleet.decide(&classes.lowest()).event_kind(),
    ///     EventKind::Denied { reason: DenyReason::Shed, retry_after: None },
    /// );
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn event_kind(&self) -> EventKind {
        match self {
            ShedDecision::Admit(_) => EventKind::Admitted,
            ShedDecision::WouldShed { .. } => EventKind::WouldShed,
            ShedDecision::Shed(shed) => EventKind::Denied {
                reason: DenyReason::Shed,
                retry_after: shed.retry_after,
            },
        }
    }

    #[cfg(feature = "redis")]
    /// The same decision, with its slot mapped by `f`.
    pub(crate) fn map_slot<T>(self, f: impl FnOnce(S) -> T) -> ShedDecision<T> {
        match self {
            ShedDecision::Admit(slot) => ShedDecision::Admit(f(slot)),
            ShedDecision::WouldShed { slot, shed } => ShedDecision::WouldShed {
                slot: f(slot),
                shed,
            },
            ShedDecision::Shed(shed) => ShedDecision::Shed(shed),
        }
    }

    /// The event's [`detail`](crate::observe::Event::detail): the reason of the
    /// refusal, real or would-be, as a metric label.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Classes, FleetShedder, Shedder};
    ///
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::new(classes.clone(), 1, 1.0)?;
    /// assert_eq!(fleet.decide(&classes.lowest()).event_detail(), Some("reserved"));
    /// assert_eq!(fleet.decide(&classes.highest()).event_detail(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn event_detail(&self) -> Option<&'static str> {
        self.shed().map(|shed| shed.reason().as_str())
    }

    /// Emits the decision into `events` (when attached), keyed by `class`, with the
    /// shed reason as the event's detail.
    pub(crate) fn report(self, events: Option<&Events>, class: &Class) -> Self {
        if let Some(events) = events {
            emit(events, class, self.event_kind(), self.event_detail());
        }
        self
    }
}

/// Emits one shedder event for `class`, with `detail` when there is one.
pub(crate) fn emit(events: &Events, class: &Class, kind: EventKind, detail: Option<&'static str>) {
    if events.is_observed() {
        let event = Event::new(events.name(), 1, kind).with_key(class.name());
        events.emit_event(&match detail {
            Some(detail) => event.with_detail(detail),
            None => event,
        });
    }
}

/// A refusal by a shedder: which class, why, and when to try again.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, ShedReason, Shedder};
///
/// let classes = Classes::google();
/// let fleet = FleetShedder::new(classes.clone(), 10, 1.0)?; // all reserved
/// let shed = fleet.decide(&classes.lowest()).into_slot().unwrap_err();
/// assert_eq!(shed.reason(), ShedReason::Reserved);
/// assert_eq!(shed.retry_after(), None);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shed {
    class: Class,
    reason: ShedReason,
    retry_after: Option<Duration>,
}

impl Shed {
    /// A refusal of `class` for `reason`, with a `retry_after` hint: for shedders
    /// written outside this crate.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, Shed, ShedReason};
    ///
    /// let shed = Shed::new(Classes::google().lowest(), ShedReason::Utilisation, Some(Duration::from_secs(5)));
    /// assert_eq!(shed.to_string(), "class sheddable shed (utilisation), retry after 5s");
    /// ```
    pub fn new(class: Class, reason: ShedReason, retry_after: Option<Duration>) -> Shed {
        Shed {
            class,
            reason,
            retry_after,
        }
    }

    /// The class refused.
    pub fn class(&self) -> &Class {
        &self.class
    }

    /// Why.
    pub fn reason(&self) -> ShedReason {
        self.reason
    }

    /// A hint for `Retry-After`: how long before the class is likely to be admitted
    /// again; `None` when the shedder cannot tell.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for Shed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "class {} shed ({})", self.class, self.reason)?;
        if let Some(retry) = self.retry_after {
            write!(f, ", retry after {retry:?}")?;
        }
        Ok(())
    }
}

/// Lets `?` carry a refusal out of [`ShedDecision::into_slot`].
impl std::error::Error for Shed {}

/// Why a class was shed: a small, fixed set, usable as a metric label.
///
/// # Examples
///
/// ```
/// use tollgate::shed::ShedReason;
///
/// assert_eq!(ShedReason::Reserved.as_str(), "reserved");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShedReason {
    /// A non-critical class met the share of capacity left after the reserve for
    /// critical classes ([`FleetShedder`](super::FleetShedder)).
    Reserved,
    /// The whole capacity is in use ([`FleetShedder`](super::FleetShedder)).
    Full,
    /// Utilisation is high enough that the class's level is shed
    /// ([`UtilisationShedder`](super::UtilisationShedder)).
    Utilisation,
    /// A threshold of Sentinel's system rule is exceeded
    /// ([`SystemProtection`](super::system::SystemProtection)): the one named, the
    /// first in Sentinel's order.
    System(Threshold),
    /// The shedder could not decide (its store, such as Redis, did not answer) and
    /// fails closed ([`OnFailure::Closed`](super::OnFailure::Closed)).
    Unavailable,
}

impl ShedReason {
    /// Every reason, in declaration order, the system thresholds in Sentinel's
    /// order: the values of the `reason` label of `tollgate_shed_total` (feature
    /// `metrics`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::ShedReason;
    ///
    /// assert_eq!(ShedReason::ALL.len(), 10);
    /// assert!(ShedReason::ALL.iter().any(|r| r.as_str() == "system_cpu"));
    /// ```
    pub const ALL: [ShedReason; 10] = [
        ShedReason::Reserved,
        ShedReason::Full,
        ShedReason::Utilisation,
        ShedReason::System(Threshold::Qps),
        ShedReason::System(Threshold::InFlight),
        ShedReason::System(Threshold::Rt),
        ShedReason::System(Threshold::Load),
        ShedReason::System(Threshold::Bbr),
        ShedReason::System(Threshold::Cpu),
        ShedReason::Unavailable,
    ];

    /// The reason in `snake_case`; a system threshold is `system_` and the
    /// threshold's [name](Threshold::as_str).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{system::Threshold, ShedReason};
    ///
    /// assert_eq!(ShedReason::System(Threshold::InFlight).as_str(), "system_in_flight");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            ShedReason::Reserved => "reserved",
            ShedReason::Full => "full",
            ShedReason::Utilisation => "utilisation",
            ShedReason::System(threshold) => match threshold {
                Threshold::Qps => "system_qps",
                Threshold::InFlight => "system_in_flight",
                Threshold::Rt => "system_rt",
                Threshold::Load => "system_load",
                Threshold::Bbr => "system_bbr",
                Threshold::Cpu => "system_cpu",
            },
            ShedReason::Unavailable => "unavailable",
        }
    }

    /// The system rule's threshold, for [`ShedReason::System`].
    pub const fn threshold(self) -> Option<Threshold> {
        match self {
            ShedReason::System(threshold) => Some(threshold),
            _ => None,
        }
    }
}

impl fmt::Display for ShedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A load shedder: decides, per request and without waiting, whether its class runs.
///
/// The admitted request holds the [`Slot`](Shedder::Slot) until it finishes;
/// dropping the slot releases whatever the shedder counts. A layer takes any
/// shedder through this trait.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, Shedder};
///
/// fn run<S: Shedder>(shedder: &S, label: &str) -> bool {
///     let class = shedder.classes().parse(label);
///     match shedder.decide(&class).into_slot() {
///         Ok(_slot) => true, // the request runs while `_slot` lives
///         Err(_shed) => false,
///     }
/// }
///
/// let fleet = FleetShedder::new(Classes::google(), 100, 0.2)?;
/// assert!(run(&fleet, "critical"));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub trait Shedder: Send + Sync {
    /// What an admitted request holds while it runs.
    type Slot: Send + 'static;

    /// Admits or sheds one request of `class` now. Never blocks.
    fn decide(&self, class: &Class) -> ShedDecision<Self::Slot>;

    /// The classes this shedder ranks requests by, to parse a request's label with.
    fn classes(&self) -> &Classes;
}
