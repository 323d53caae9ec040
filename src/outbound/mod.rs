//! Outbound rates that learn the partner's limit: for a client calling a service
//! that refuses calls beyond a limit it does not publish, or publishes in its
//! answers.
//!
//! - [`LearnedRate`]: the AWS SDKs' adaptive retry mode, to the number. A throttled
//!   answer cuts the rate, [`Cubic`] grows it back; calls wait in a token bucket at
//!   the learned rate. The partner's `RateLimit` / `RateLimit-Policy` fields cap the
//!   rate and `Retry-After` pauses it, so that the caller slows down *before* being
//!   refused.
//! - [`SreThrottle`]: the Google SRE book's client-side throttling. Over a sliding
//!   window, a call is refused locally with probability
//!   `max(0, (requests − K·accepts) / (requests + 1))`.
//!
//! Both are [`PermitSource`](crate::PermitSource)s, so they work under the client
//! layer (`tollgate::http::client::ThrottleLayer`, feature `http`, whose `feedback`
//! option reports each answer to them) and as plain limiters: take a permit before a
//! call, then [`record`](LearnedRate::record) the partner's [`Answer`]. An answer
//! is built by hand, or read from an HTTP response by `Answer::from_response`
//! (feature `http`), which reads the fields with the parsers of
//! `tollgate::http::wire`.
//!
//! Time comes from the [`Clock`](crate::time::Clock) given; tests use a
//! [`ManualClock`](crate::time::ManualClock).
//!
//! # Examples
//!
//! A plain limiter that learns from a partner refusing calls:
//!
//! ```
//! use std::time::Duration;
//! use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
//! use tollgate::time::ManualClock;
//!
//! let clock = ManualClock::new();
//! let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
//! for i in 0..100 {
//!     clock.advance(Duration::from_millis(100));
//!     if rate.try_acquire(1).is_ok() {
//!         // Call the partner; every 20th call is refused.
//!         let answer = if i % 20 == 19 { Answer::throttled() } else { Answer::accepted() };
//!         rate.record(&answer);
//!     }
//! }
//! let learned = rate.rate().expect("throttled, so limiting");
//! assert!(learned > 0.5 && learned < 20.0, "{learned}");
//! ```

mod answer;
mod bucket;
mod config;
mod cubic;
mod learner;
mod rate;
mod rng;
mod send_rate;
mod sre;
mod window;

pub use answer::{Answer, Feedback, FeedbackHandle};
pub use config::LearningConfig;
pub use cubic::Cubic;
pub use rate::LearnedRate;
pub use sre::{SreConfig, SreThrottle};
