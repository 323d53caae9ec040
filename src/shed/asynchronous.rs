//! [`AsyncShedder`]: a shedder whose decision is a future (one that asks a store,
//! such as Redis), and [`OnFailure`], what it answers when the store fails.

use std::future::Future;

use super::class::{Class, Classes};
use super::decision::ShedDecision;

/// A load shedder whose decision takes a round trip: it answers a future, which
/// the `http::shed::ShedLayer` awaits before calling its inner
/// service (see `ShedLayer::new_async`, feature `http`).
///
/// The decision is infallible: a shedder that asks a store decides by its
/// [`OnFailure`] policy when the store fails. The fleet-usage shedder across a
/// fleet, `FleetShedder<RedisUsage>` (feature `redis`), is one.
///
/// # Examples
///
/// A shedder of one's own, admitting everything after an asynchronous look-up:
///
/// ```
/// use std::future::{ready, Ready};
/// use tollgate::shed::{AsyncShedder, Class, Classes, ShedDecision};
///
/// struct Open(Classes);
///
/// impl AsyncShedder for Open {
///     type Slot = ();
///     type Decision = Ready<ShedDecision<()>>;
///     fn decision(&self, _: &Class) -> Self::Decision {
///         ready(ShedDecision::Admit(()))
///     }
///     fn classes(&self) -> &Classes {
///         &self.0
///     }
/// }
///
/// let open = Open(Classes::google());
/// let decision = futures::executor::block_on(open.decision(&open.classes().lowest()));
/// assert!(decision.is_admitted());
/// ```
pub trait AsyncShedder: Send + Sync {
    /// What an admitted request holds while it runs.
    type Slot: Send + 'static;
    /// The decision, once made. It owns what it needs: it outlives the borrow of
    /// the shedder and of the class.
    type Decision: Future<Output = ShedDecision<Self::Slot>> + Send + 'static;

    /// Admits or sheds one request of `class`, once the future is ready.
    ///
    /// # Cancel safety
    ///
    /// Whatever the implementation says: dropping the future must not leak what it
    /// counts for longer than the shedder documents (a Redis lease runs out).
    fn decision(&self, class: &Class) -> Self::Decision;

    /// The classes this shedder ranks requests by, to parse a request's label with.
    fn classes(&self) -> &Classes;
}

/// What a shedder that asks a store answers when the store fails (an error, a
/// timeout, a connection refused).
///
/// The default is [`Open`](OnFailure::Open): a shedder protects the service from
/// overload, and a store that does not answer is no sign of overload. Failing
/// closed would turn an outage of the store into an outage of the whole service,
/// critical work included, while the process's own protections
/// ([`UtilisationShedder`](super::UtilisationShedder),
/// [`SystemProtection`](super::system::SystemProtection)) still watch its load.
/// This is also Stripe's advice for its rate limiters and load shedders: let
/// requests through when the limiter itself fails. Choose `Closed` when the
/// capacity protects something that must never see more than it (a licence, a
/// downstream quota).
///
/// Either way the decision is reported as an event with the
/// [detail](crate::observe::Event::detail) `unavailable`: `Admitted` when open,
/// `Denied { reason: Shed, .. }` (the [`ShedReason::Unavailable`](super::ShedReason::Unavailable))
/// when closed. In shadow mode a closed shedder answers `WouldShed`, and with
/// shedding off it admits.
///
/// # Examples
///
/// ```
/// use tollgate::shed::OnFailure;
///
/// assert_eq!(OnFailure::default(), OnFailure::Open);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnFailure {
    /// Fail open: admit the request, holding no slot (nothing was counted).
    #[default]
    Open,
    /// Fail closed: shed the request, as [`ShedReason::Unavailable`](super::ShedReason::Unavailable).
    Closed,
}
