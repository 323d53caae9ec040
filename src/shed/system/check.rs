//! The decision itself, Sentinel's `checkSystem` and `checkBbr`: a pure function of
//! the rule and what the statistics and readings say.

use std::time::Duration;

use super::{LoadCheck, SystemRule, Threshold};

/// What the system rule is checked against: the window's statistics, the requests
/// in flight and the latest system reading, with counts of what was shed.
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
/// let rule = SystemRule::builder().max_in_flight(10).build()?;
/// let protection = SystemProtection::with_clock(classes.clone(), rule, ManualReadings::new(), ManualClock::new());
/// let _permit = protection.decide(&classes.lowest()).into_slot()?;
/// let status = protection.status();
/// assert_eq!(status.in_flight, 1);
/// assert_eq!(status.pass_qps, 1.0);
/// assert_eq!(status.min_rt, Duration::from_secs(5)); // nothing finished yet
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct SystemStatus {
    /// Requests admitted and not yet finished (Sentinel's `curThreadNum`).
    pub in_flight: u64,
    /// Requests admitted per second over the window (`passQps`).
    pub pass_qps: f64,
    /// Requests shed per second over the window (`blockQps`).
    pub block_qps: f64,
    /// The busiest bucket's completions as a rate (`maxSuccessQps`).
    pub max_success_qps: f64,
    /// The least RT in the window (`minRt`).
    pub min_rt: Duration,
    /// The mean RT in the window (`avgRt`).
    pub avg_rt: Duration,
    /// The latest CPU usage read, if any.
    pub cpu_usage: Option<f64>,
    /// The latest load average read, if any.
    pub load_average: Option<f64>,
    /// Requests shed since creation.
    pub shed: u64,
    /// Requests that shadow mode admitted but would have shed, since creation.
    pub would_shed: u64,
    /// Failed system readings since creation (the last good one is kept).
    pub read_errors: u64,
}

/// The first threshold `status` exceeds, in Sentinel's order (QPS, in-flight, RT,
/// load, CPU), for a request asking to enter; `None` to admit it.
pub(crate) fn check(rule: &SystemRule, status: &SystemStatus) -> Option<Threshold> {
    // `currentQps + count > qps`, for one request.
    if let Some(qps) = rule.qps {
        if status.pass_qps + 1.0 > qps {
            return Some(Threshold::Qps);
        }
    }
    if let Some(max) = rule.max_in_flight {
        if status.in_flight > max {
            return Some(Threshold::InFlight);
        }
    }
    if let Some(max) = rule.avg_rt {
        if status.avg_rt > max {
            return Some(Threshold::Rt);
        }
    }
    if let (Some(highest), Some(load)) = (rule.highest_system_load, status.load_average) {
        if load > highest {
            match rule.load_check {
                LoadCheck::Bbr if !bbr_allows(status) => return Some(Threshold::Bbr),
                LoadCheck::Bbr => {}
                LoadCheck::Alone => return Some(Threshold::Load),
            }
        }
    }
    if let (Some(highest), Some(usage)) = (rule.highest_cpu_usage, status.cpu_usage) {
        if usage > highest {
            return Some(Threshold::Cpu);
        }
    }
    None
}

/// Sentinel's `checkBbr`: refuse when more than one request is in flight and more
/// than the window has shown it can finish, `maxSuccessQps × minRt`. Sentinel's RTs
/// are whole milliseconds (`minRt / 1000`); these are nanoseconds, the same product.
pub(crate) fn bbr_allows(status: &SystemStatus) -> bool {
    let in_flight = status.in_flight as f64;
    !(status.in_flight > 1 && in_flight > status.max_success_qps * status.min_rt.as_secs_f64())
}
