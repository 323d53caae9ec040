//! Load shedding: when the service is overloaded, refuse the least critical work
//! first.
//!
//! - **Classes** ([`Classes`], [`Class`]): ordered criticality names, by default
//!   Google's `critical_plus > critical > sheddable_plus > sheddable`, parsed from a
//!   request's label with a documented default for missing or unknown ones.
//! - **[`FleetShedder`]** (Stripe's fleet-usage shedder): a capacity with a share
//!   reserved for critical classes, counted by a lock-free [`UsageCounter`] in
//!   process, or across a fleet by `RedisUsage` (feature `redis`): leases in Redis
//!   that run out unless renewed, so a crashed process's slots come back.
//! - **[`UtilisationShedder`]** (Stripe's worker-utilisation shedder): sheds the
//!   least critical class first and one more after each hold while utilisation stays
//!   high; recovers one class at a time, more slowly, below a lower threshold.
//! - **[`system`]**: Sentinel's system rule, from CPU, load, RT and in-flight
//!   readings: [`system::SystemProtection`] sheds every class not made exempt.
//! - **Modes** ([`ModeSwitch`]): every shedder can run in shadow mode (reports what it
//!   would have shed, sheds nothing) and has a kill switch, both settable at run
//!   time.
//!
//! Every shedder in process implements [`Shedder`]: `decide(&class)` answers a
//! [`ShedDecision`] at once, without waiting, and an admitted request holds its slot
//! until it finishes. The fleet shedder through Redis implements [`AsyncShedder`]
//! instead: its decision is a future, and when Redis fails it admits or sheds by
//! its [`OnFailure`] policy (admits by default). Attach an [`Events`](crate::observe::Events) hub to see one
//! event per decision, keyed by the class name: `Admitted`,
//! `Denied { reason: Shed, .. }` or `WouldShed`, the last two with the
//! [`ShedReason`] as the event's [`detail`](crate::observe::Event::detail).
//!
//! # Examples
//!
//! ```
//! use tollgate::shed::{Classes, FleetShedder, ShedDecision, Shedder};
//!
//! let classes = Classes::google();
//! let fleet = FleetShedder::new(classes.clone(), 100, 0.2)?;
//! match fleet.decide(&classes.parse("sheddable")) {
//!     ShedDecision::Admit(_slot) => { /* run the request while `_slot` lives */ }
//!     ShedDecision::WouldShed { slot: _slot, .. } => { /* shadow mode: run it too */ }
//!     ShedDecision::Shed(shed) => println!("503: {shed}"),
//! }
//! # Ok::<(), tollgate::ConfigError>(())
//! ```
//!
//! # In a service
//!
//! [`FleetShedder`] keeps a fraction of capacity for the critical classes, in process
//! or fleet-wide on Redis with leases a crashed process cannot leak;
//! [`UtilisationShedder`] sheds the lowest class first and escalates one class at a
//! time; [`SystemProtection`](system::SystemProtection) is Sentinel's system rule
//! (CPU, load, in-flight, RT and its BBR check). Each has a shadow mode and a kill
//! switch. `tollgate::http::shed::ShedLayer` (feature `http`) answers 503 with
//! `Retry-After` (the shedder's hint, else a fallback of 1 s), and events and metrics
//! say why (`tollgate_shed_total{reason}`). The fleet-wide shedder decides by a round
//! trip, so it sits behind `ShedLayer::new_async`; when Redis fails it admits by
//! default ([`OnFailure::Open`]: a Redis outage is no sign of overload) or sheds with
//! reason `unavailable` ([`OnFailure::Closed`]).
//! `UtilisationShedder::report_adaptive` (feature `adaptive`) feeds the utilisation shedder an adaptive
//! limiter's in-flight over its limit.
//!
//! The reserve at work: of 100 slots, 20 % are kept for the critical classes.
//!
//! ```
//! use tollgate::shed::{Classes, FleetShedder, Shedder};
//!
//! let classes = Classes::google();
//! let fleet = FleetShedder::new(classes.clone(), 100, 0.2)?;
//! let sheddable = classes.parse("sheddable");
//! let held: Vec<_> = (0..80).map(|_| fleet.decide(&sheddable)).collect();
//! assert!(held.iter().all(|d| d.is_admitted()));
//! assert!(!fleet.decide(&sheddable).is_admitted()); // 80 used: the rest is reserved
//! assert!(fleet.decide(&classes.parse("critical")).is_admitted());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `cargo run --example shedding_server --features http,shed` runs a server with two
//! criticality classes under a 12× surge of the lower one, printing admitted and shed
//! counts per class each second.

mod asynchronous;
mod class;
mod decision;
mod escalation;
mod fleet;
mod mode;
#[cfg(feature = "redis")]
mod redis;
pub mod system;
mod usage;
mod utilisation;

#[cfg(feature = "redis")]
pub use self::redis::{RedisLease, RedisSlot, RedisUsage};
pub use asynchronous::{AsyncShedder, OnFailure};
pub use class::{Class, Classes};
pub use decision::{Shed, ShedDecision, ShedReason, Shedder};
pub use fleet::{FleetShedder, FleetSlot};
pub use mode::{Mode, ModeSwitch};
pub use usage::{LocalUsage, UsageCounter};
pub use utilisation::{Measure, UtilisationBuilder, UtilisationShedder, UtilisationSlot};
