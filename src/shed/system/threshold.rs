//! [`Threshold`]: which threshold of the system rule shed a request.

use std::fmt;

/// A threshold of the [`SystemRule`](super::SystemRule), in the order Sentinel checks
/// them.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::Threshold;
///
/// assert_eq!(Threshold::Bbr.as_str(), "bbr");
/// assert_eq!(Threshold::ALL.len(), 6);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Threshold {
    /// The window's passed QPS, with this request, would exceed the QPS threshold.
    Qps,
    /// More requests are in flight than the in-flight threshold.
    InFlight,
    /// The window's average RT is above the RT threshold.
    Rt,
    /// The load average is above its threshold ([`LoadCheck::Alone`](super::LoadCheck::Alone)).
    Load,
    /// The load average is above its threshold and in-flight exceeds max passed QPS ×
    /// min RT ([`LoadCheck::Bbr`](super::LoadCheck::Bbr), Sentinel's "load").
    Bbr,
    /// CPU usage is above its threshold.
    Cpu,
}

impl Threshold {
    /// Every threshold, in the order they are checked.
    pub const ALL: [Threshold; 6] = [
        Threshold::Qps,
        Threshold::InFlight,
        Threshold::Rt,
        Threshold::Load,
        Threshold::Bbr,
        Threshold::Cpu,
    ];

    /// The threshold in `snake_case`, as a metric label or event key.
    pub const fn as_str(self) -> &'static str {
        match self {
            Threshold::Qps => "qps",
            Threshold::InFlight => "in_flight",
            Threshold::Rt => "rt",
            Threshold::Load => "load",
            Threshold::Bbr => "bbr",
            Threshold::Cpu => "cpu",
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
