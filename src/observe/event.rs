//! What a limiter reports: one [`Event`] per decision, wait or drain.

use std::fmt;
use std::time::Duration;

use crate::decision::{Decision, Denied, Reservation};
use crate::error::AcquireError;

/// One thing a limiter did, as its listeners see it.
///
/// Events borrow their strings from the emitter, so emitting allocates nothing; a
/// listener that keeps an event past the call copies what it needs.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::observe::{Event, EventKind, Events};
/// use tollgate::{Limiter, Quota};
///
/// let events = Events::new("api");
/// let _subscription = events.subscribe(|event: &Event<'_>| {
///     assert_eq!(event.source, "api");
///     assert_eq!(event.kind, EventKind::Admitted);
/// });
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), ManualClock::new())
///     .with_events(events);
/// limiter.try_acquire(1)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Event<'a> {
    /// The name of the [`Events`](super::Events) the event went through: which
    /// limiter (or layer) it comes from.
    pub source: &'a str,
    /// The key the permits were asked for, for keyed limiters; `None` otherwise.
    /// Unbounded in number: fine in a log line, never as a metric label.
    pub key: Option<&'a str>,
    /// The permits asked for.
    pub permits: u64,
    /// What happened to them.
    pub kind: EventKind,
    /// A finer reason than the kind's, from a small fixed set, so usable as a metric
    /// label; `None` when the emitter has none. A load shedder
    /// (`shed`) sets it on its refusals (`Denied { reason: Shed, .. }`)
    /// and would-be refusals (`WouldShed`) to the
    /// `ShedReason` (`reserved`, `full`, `utilisation`,
    /// `system_cpu`, ...), and on an admission made without a decision, because its
    /// store failed and it fails open, to `unavailable`.
    pub detail: Option<&'static str>,
}

impl<'a> Event<'a> {
    /// An event from `source` for `permits` permits, with no key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{Event, EventKind};
    ///
    /// let event = Event::new("api", 1, EventKind::Admitted).with_key("user-42");
    /// assert_eq!(event.key, Some("user-42"));
    /// ```
    pub fn new(source: &'a str, permits: u64, kind: EventKind) -> Event<'a> {
        Event {
            source,
            key: None,
            permits,
            kind,
            detail: None,
        }
    }

    /// The same event, for `key`.
    pub fn with_key(self, key: &'a str) -> Event<'a> {
        Event {
            key: Some(key),
            ..self
        }
    }

    /// The same event, with a finer reason (see [`detail`](Event::detail)).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{DenyReason, Event, EventKind};
    ///
    /// let kind = EventKind::Denied { reason: DenyReason::Shed, retry_after: None };
    /// let event = Event::new("api", 1, kind).with_key("sheddable").with_detail("reserved");
    /// assert_eq!(event.detail, Some("reserved"));
    /// assert_eq!(event.to_string(), "api: 1 permits for \"sheddable\" denied (shed: reserved)");
    /// ```
    pub fn with_detail(self, detail: &'static str) -> Event<'a> {
        Event {
            detail: Some(detail),
            ..self
        }
    }
}

impl fmt::Display for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let EventKind::LimitChanged { previous, limit } = self.kind {
            // A limit is the limiter's, not a request's: no permits, no key.
            return write!(f, "{}: limit {previous} -> {limit}", self.source);
        }
        if let EventKind::RateChanged { previous, interval } = self.kind {
            // So is an outbound rate.
            let (previous, rate) = (Rate(previous), Rate(interval));
            return write!(f, "{}: rate {previous} -> {rate}", self.source);
        }
        write!(f, "{}: {} permits ", self.source, self.permits)?;
        if let Some(key) = self.key {
            write!(f, "for {key:?} ")?;
        }
        // The detail, after the reason it refines.
        let detail = |f: &mut fmt::Formatter<'_>| match self.detail {
            Some(detail) => write!(f, ": {detail}"),
            None => Ok(()),
        };
        match self.kind {
            EventKind::Admitted => {
                f.write_str("admitted")?;
                match self.detail {
                    Some(detail) => write!(f, " ({detail})"),
                    None => Ok(()),
                }
            }
            EventKind::Waited { wait } => write!(f, "admitted after {wait:?}"),
            EventKind::Denied {
                reason,
                retry_after,
            } => {
                write!(f, "denied ({reason}")?;
                detail(f)?;
                f.write_str(")")?;
                match retry_after {
                    Some(retry) => write!(f, ", retry after {retry:?}"),
                    None => Ok(()),
                }
            }
            EventKind::Drained => f.write_str("drained"),
            EventKind::LimitChanged { previous, limit } => {
                write!(f, "limit {previous} -> {limit}")
            }
            EventKind::Started { inflight } => write!(f, "started, {inflight} in flight"),
            EventKind::Finished {
                outcome,
                rtt,
                inflight,
            } => write!(
                f,
                "finished ({outcome}) after {rtt:?}, {inflight} in flight"
            ),
            EventKind::WouldShed => {
                f.write_str("admitted, would have been shed")?;
                match self.detail {
                    Some(detail) => write!(f, " ({detail})"),
                    None => Ok(()),
                }
            }
            EventKind::RateChanged { previous, interval } => {
                write!(f, "rate {} -> {}", Rate(previous), Rate(interval))
            }
        }
    }
}

/// What happened to the permits of an [`Event`]; the names follow Resilience4j's
/// rate limiter events (successful acquire, failed acquire, drained).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::observe::{DenyReason, EventKind};
///
/// let kind = EventKind::Denied { reason: DenyReason::Limited, retry_after: Some(Duration::from_secs(1)) };
/// assert!(kind.is_denied());
/// assert_eq!(EventKind::Waited { wait: Duration::from_millis(5) }.wait(), Some(Duration::from_millis(5)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// Granted at once: an admitting `try_acquire`, an immediate reservation, or an
    /// `acquire` that did not queue.
    Admitted,
    /// Granted after waiting `wait` on the limiter's clock: an `acquire` that queued,
    /// or a reservation booked `wait` ahead (the caller is to sleep it out).
    Waited {
        /// The time waited, or booked ahead.
        wait: Duration,
    },
    /// Refused; nothing was taken.
    Denied {
        /// Why.
        reason: DenyReason,
        /// When the same request may succeed; `None` when it never can, when it
        /// waits for permits to be released, or when the limiter does not know (a
        /// wait that timed out).
        retry_after: Option<Duration>,
    },
    /// Every permit left was taken at once, so that the next ones come with time
    /// (Resilience4j's `drainPermissions`, [`Limiter::drain`](crate::Limiter::drain));
    /// `permits` is how many were left.
    Drained,
    /// An adaptive limit moved, from `previous` to `limit` requests in flight
    /// (`AdaptiveLimiter`); `permits` is 0.
    /// A lowered limit takes effect as permits come back.
    LimitChanged {
        /// The limit before.
        previous: u64,
        /// The limit now.
        limit: u64,
    },
    /// A request admitted by an adaptive limiter took its permit; reported right
    /// after its `Admitted` or `Waited`.
    Started {
        /// Requests in flight now, itself included.
        inflight: u64,
    },
    /// A request admitted by an adaptive limiter ended and gave its permit back.
    Finished {
        /// How it ended, as its guard recorded it.
        outcome: Outcome,
        /// How long it held the permit, on the limiter's clock.
        rtt: Duration,
        /// Requests still in flight once it gave its permit back.
        inflight: u64,
    },
    /// Admitted by a load shedder in shadow mode that would have shed it
    /// (`Mode::Shadow`); the event's key is the
    /// request's criticality class.
    WouldShed,
    /// An outbound rate learned from a partner's answers moved
    /// (`LearnedRate`); `permits` is 0.
    /// A rate is given as the time between calls at that rate (one second divided
    /// by the calls a second, to the nanosecond), `None` while every call goes.
    RateChanged {
        /// The time between calls before; `None` if calls were not limited.
        previous: Option<Duration>,
        /// The time between calls now; `None` if calls are not limited.
        interval: Option<Duration>,
    },
}

impl EventKind {
    /// The event of a decision: `Admitted`, or `Denied` with its reason and
    /// `retry_after`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{DenyReason, EventKind};
    /// use tollgate::Denied;
    ///
    /// let closed: Result<tollgate::Admitted, Denied> = Err(Denied::Closed);
    /// assert_eq!(
    ///     EventKind::of_decision(&closed),
    ///     EventKind::Denied { reason: DenyReason::Closed, retry_after: None },
    /// );
    /// ```
    pub fn of_decision(decision: &Decision) -> EventKind {
        match decision {
            Ok(_) => EventKind::Admitted,
            Err(denied) => EventKind::of_denied(denied),
        }
    }

    /// The event of a denial.
    pub fn of_denied(denied: &Denied) -> EventKind {
        let reason = match denied {
            Denied::Limited(_) => DenyReason::Limited,
            Denied::Insufficient(_) => DenyReason::Insufficient,
            Denied::Closed => DenyReason::Closed,
        };
        EventKind::Denied {
            reason,
            retry_after: denied.retry_after(),
        }
    }

    /// The event of a reservation: `Admitted` when immediate, `Waited` with the
    /// wait booked ahead otherwise, or the denial's.
    pub(crate) fn of_reservation(reservation: &Result<Reservation, Denied>) -> EventKind {
        match reservation {
            Ok(r) if r.is_immediate() => EventKind::Admitted,
            Ok(r) => EventKind::Waited { wait: r.wait() },
            Err(denied) => EventKind::of_denied(denied),
        }
    }

    /// The event of a wait: `Admitted` when it took no queueing (`queued` false),
    /// `Waited` when it did, or `Denied` with the reason it failed.
    pub fn of_wait<E>(outcome: &Result<Duration, AcquireError<E>>, queued: bool) -> EventKind {
        match outcome {
            Ok(_) if !queued => EventKind::Admitted,
            Ok(wait) => EventKind::Waited { wait: *wait },
            Err(error) => EventKind::Denied {
                reason: match error {
                    AcquireError::Closed => DenyReason::Closed,
                    // Never, as a request too large is.
                    AcquireError::Insufficient(_) | AcquireError::PastClockEnd => {
                        DenyReason::Insufficient
                    }
                    AcquireError::QueueFull { .. } => DenyReason::QueueFull,
                    // `AcquireError` is non-exhaustive: anything new is a wait that
                    // ended without permits, as a timeout does.
                    _ => DenyReason::TimedOut,
                },
                retry_after: None,
            },
        }
    }

    /// Whether the permits were granted (at once or after a wait).
    pub fn is_admitted(&self) -> bool {
        matches!(
            self,
            EventKind::Admitted | EventKind::Waited { .. } | EventKind::WouldShed
        )
    }

    /// Whether the permits were refused.
    pub fn is_denied(&self) -> bool {
        matches!(self, EventKind::Denied { .. })
    }

    /// The time waited, for [`Waited`](EventKind::Waited).
    pub fn wait(&self) -> Option<Duration> {
        match self {
            EventKind::Waited { wait } => Some(*wait),
            _ => None,
        }
    }
}

/// A rate in an event's text: calls a second, from the time between calls.
struct Rate(Option<Duration>);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("unlimited"),
            Some(interval) => write!(f, "{:.3}/s", 1.0 / interval.as_secs_f64()),
        }
    }
}

/// How a request admitted by an adaptive limiter ended: a small, fixed set, usable
/// as a metric label. Netflix's listener callbacks `onSuccess`, `onDropped` and
/// `onIgnore`.
///
/// # Examples
///
/// ```
/// use tollgate::observe::Outcome;
///
/// assert_eq!(Outcome::Dropped.as_str(), "dropped");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// It succeeded: its latency is a sample for the limit.
    Success,
    /// It was dropped (timed out, refused or overloaded downstream): a sample that
    /// says the limit is too high.
    Dropped,
    /// It says nothing about the limit (it failed for its own reasons): no sample.
    Ignored,
}

impl Outcome {
    /// Every outcome, in declaration order.
    pub const ALL: [Outcome; 3] = [Outcome::Success, Outcome::Dropped, Outcome::Ignored];

    /// The outcome in `snake_case`, as metrics label it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Dropped => "dropped",
            Outcome::Ignored => "ignored",
        }
    }

    /// The position in [`ALL`](Outcome::ALL).
    #[cfg(feature = "metrics")]
    pub(crate) const fn index(self) -> usize {
        match self {
            Outcome::Success => 0,
            Outcome::Dropped => 1,
            Outcome::Ignored => 2,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The [`detail`](Event::detail)s a load shedder gives its refusals: the
/// `ShedReason`s' names, in the order of `ShedReason::ALL` (a test in `shed` checks
/// it). Here, so that metrics can label by them without importing `shed`, a layer
/// above.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) const SHED_REASONS: [&str; 10] = [
    "reserved",
    "full",
    "utilisation",
    "system_qps",
    "system_in_flight",
    "system_rt",
    "system_load",
    "system_bbr",
    "system_cpu",
    "unavailable",
];

/// Why permits were refused: a small, fixed set, usable as a metric label.
///
/// # Examples
///
/// ```
/// use tollgate::observe::DenyReason;
///
/// assert_eq!(DenyReason::TimedOut.as_str(), "timed_out");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DenyReason {
    /// Not now: the limit is reached ([`Denied::Limited`]).
    Limited,
    /// Never: more than the limiter can grant at once, or a wait due past the clock's
    /// end ([`AcquireError::PastClockEnd`]).
    Insufficient,
    /// The limiter is closed.
    Closed,
    /// A wait gave up at its timeout, or knew at once it would exceed it.
    TimedOut,
    /// A bounded queue was full.
    QueueFull,
    /// A load shedder (`shed`) refused the request's criticality class.
    Shed,
}

impl DenyReason {
    /// Every reason, in declaration order.
    pub const ALL: [DenyReason; 6] = [
        DenyReason::Limited,
        DenyReason::Insufficient,
        DenyReason::Closed,
        DenyReason::TimedOut,
        DenyReason::QueueFull,
        DenyReason::Shed,
    ];

    /// The reason in `snake_case`, as metrics label it.
    pub const fn as_str(self) -> &'static str {
        match self {
            DenyReason::Limited => "limited",
            DenyReason::Insufficient => "insufficient",
            DenyReason::Closed => "closed",
            DenyReason::TimedOut => "timed_out",
            DenyReason::QueueFull => "queue_full",
            DenyReason::Shed => "shed",
        }
    }

    /// The position in [`ALL`](DenyReason::ALL).
    #[cfg(feature = "metrics")]
    pub(crate) const fn index(self) -> usize {
        match self {
            DenyReason::Limited => 0,
            DenyReason::Insufficient => 1,
            DenyReason::Closed => 2,
            DenyReason::TimedOut => 3,
            DenyReason::QueueFull => 4,
            DenyReason::Shed => 5,
        }
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
#[cfg(feature = "shed")]
mod tests {
    use super::SHED_REASONS;
    use crate::shed::ShedReason;

    #[test]
    fn the_shed_reasons_are_the_shedders_own() {
        assert_eq!(SHED_REASONS, ShedReason::ALL.map(ShedReason::as_str));
    }
}
