//! System adaptive protection: Sentinel's system rule for a whole process.
//!
//! A [`SystemProtection`] is a [`Shedder`](super::Shedder): it sheds inbound
//! requests, of every class not made exempt, while any threshold of its
//! [`SystemRule`] is exceeded, refusing with [`ShedReason::System`](super::ShedReason::System)
//! and the [`Threshold`], checked in Sentinel's order (`SystemRuleManager.checkSystem`):
//!
//! 1. **QPS**: the window's passed requests per second, with this one, above `qps`;
//! 2. **in-flight**: more than `max_in_flight` requests running (Sentinel's `maxThread`);
//! 3. **RT**: the window's average RT above `avg_rt`;
//! 4. **load**: the 1-minute load average above `highest_system_load`, and then, by
//!    default, Sentinel's BBR-like check: shed only when more than one request is in
//!    flight and in-flight exceeds max passed QPS × min RT ([`LoadCheck::Bbr`],
//!    refusing with [`Threshold::Bbr`]); or shed on load alone ([`LoadCheck::Alone`]);
//! 5. **CPU**: CPU usage above `highest_cpu_usage`.
//!
//! The statistics are Sentinel's `StatisticNode` over 1 s in 2 buckets: max success
//! QPS is the busiest bucket's completions × buckets / window (at least one
//! completion), min RT the least RT in the window (5 s when empty, at least 1 ms),
//! average RT the RT sum over completions. System readings come through the
//! [`SystemReadings`] trait: [`ProcReadings`] reads Linux's `/proc`, by hand (two
//! one-line files; see its docs), [`ManualReadings`] is injected in tests. They are
//! read at most once per [`sample_every`](SystemRule::sample_every).
//!
//! It follows a [`ModeSwitch`](super::ModeSwitch), as every shedder does:
//! [`Mode::Shadow`](super::Mode::Shadow) decides and reports but sheds nothing;
//! [`Mode::Off`](super::Mode::Off) is the kill switch. Both switch at run time.
//!
//! # Where this differs from Sentinel
//!
//! - RTs are measured in nanoseconds on the [`Clock`](crate::time::Clock), not whole
//!   milliseconds, so averages and the BBR product are exact rather than truncated;
//!   min RT keeps Sentinel's 1 ms floor so BBR's capacity matches for fast services.
//! - Bad thresholds are a typed [`ConfigError`](crate::ConfigError) at build time
//!   (NaN, negative, infinite, CPU usage above 1, QPS 0, no threshold); Sentinel
//!   ignores a negative value as "unset" and a CPU usage above 1 with a warning.
//! - CPU usage is the system's; Sentinel takes the larger of the system's and the
//!   JVM process's.
//! - Readings are taken on the request that finds the last one due rather than on a
//!   timer thread, so idle processes read nothing.
//! - [`LoadCheck::Alone`] is an addition; Sentinel always gates load with BBR.
//! - Classes made exempt ([`SystemProtection::with_exempt`]) are never shed; Sentinel's
//!   rule knows no classes. None is exempt by default.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule, Threshold};
//! use tollgate::shed::{Classes, ShedReason, Shedder};
//! use tollgate::time::ManualClock;
//!
//! let readings = ManualReadings::new();
//! let clock = ManualClock::new();
//! let classes = Classes::google();
//! let rule = SystemRule::builder().highest_system_load(4.0).build()?;
//! let protection = SystemProtection::with_clock(classes.clone(), rule, readings.clone(), clock.clone());
//! let enter = || protection.decide(&classes.parse("critical")).into_slot();
//! readings.set_load_average(8.0);
//!
//! // Four requests finish in 10 ms: the window has seen 8 per second at best (4 in a
//! // 500 ms bucket) and 10 ms at least, so it can hold 8 × 0.01 = 0.08 in flight.
//! let batch = (0..4).map(|_| enter()).collect::<Result<Vec<_>, _>>()?;
//! clock.advance(Duration::from_millis(10));
//! drop(batch);
//!
//! let first = enter()?;
//! let second = enter()?; // one in flight is never refused
//! assert_eq!(enter().unwrap_err().reason(), ShedReason::System(Threshold::Bbr));
//! # drop((first, second));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod check;
mod protection;
mod readings;
mod rule;
mod threshold;
mod window;

#[cfg(test)]
mod tests;

pub use check::SystemStatus;
pub use protection::{SystemPermit, SystemProtection};
pub use readings::{ManualReadings, ProcReadings, Reading, ReadingError, SystemReadings};
pub use rule::{LoadCheck, MAX_BUCKETS, MAX_PERIOD, SystemRule, SystemRuleBuilder};
pub use threshold::Threshold;
