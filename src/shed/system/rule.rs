//! The thresholds of Sentinel's system rule, and how the statistics behind them are
//! kept, checked when built.

use std::time::Duration;

use crate::error::ConfigError;

/// How a load average above its threshold is acted on.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::{LoadCheck, SystemRule};
///
/// let rule = SystemRule::builder().highest_system_load(4.0).build()?;
/// assert_eq!(rule.load_check(), LoadCheck::Bbr);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LoadCheck {
    /// Sentinel's: while the load is above its threshold, shed only when more than
    /// one request is in flight and in-flight exceeds the window's max passed QPS ×
    /// min RT (what the service has shown it can finish, BBR-style).
    #[default]
    Bbr,
    /// Shed whenever the load is above its threshold (not Sentinel's; for machines
    /// where load alone should decide).
    Alone,
}

/// Sentinel's system rule: thresholds on the whole process's inbound traffic and on
/// the machine. Any threshold left unset is not checked; at least one must be set.
///
/// Built with [`SystemRule::builder`]. The defaults of the statistics match
/// Sentinel's: a 1 s window of 2 buckets, readings every second, an empty window's
/// min RT of 5 s.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::shed::system::SystemRule;
///
/// // Sentinel's SystemGuardDemo.
/// let rule = SystemRule::builder()
///     .highest_system_load(3.0)
///     .highest_cpu_usage(0.6)
///     .avg_rt(Duration::from_millis(10))
///     .qps(20.0)
///     .max_in_flight(10)
///     .build()?;
/// assert_eq!(rule.highest_cpu_usage(), Some(0.6));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SystemRule {
    pub(crate) highest_system_load: Option<f64>,
    pub(crate) highest_cpu_usage: Option<f64>,
    pub(crate) qps: Option<f64>,
    pub(crate) avg_rt: Option<Duration>,
    pub(crate) max_in_flight: Option<u64>,
    pub(crate) load_check: LoadCheck,
    pub(crate) window: Duration,
    pub(crate) buckets: u32,
    pub(crate) sample_every: Duration,
    pub(crate) statistic_max_rt: Duration,
}

/// The most buckets a window may have: each is a few words, read on every check.
pub const MAX_BUCKETS: u32 = 1000;

/// The longest RT accepted: about 292 years, what nanoseconds in a `u64` hold.
const LONGEST: Duration = Duration::from_nanos(u64::MAX);

/// The longest window or sampling interval accepted: an hour, as every other wait in
/// the crate. A longer one keeps stale statistics or a stale reading in charge.
pub const MAX_PERIOD: Duration = Duration::from_secs(3600);

impl SystemRule {
    /// A builder with no threshold set and Sentinel's statistics defaults.
    pub fn builder() -> SystemRuleBuilder {
        SystemRuleBuilder {
            rule: SystemRule {
                highest_system_load: None,
                highest_cpu_usage: None,
                qps: None,
                avg_rt: None,
                max_in_flight: None,
                load_check: LoadCheck::Bbr,
                window: Duration::from_secs(1),
                buckets: 2,
                sample_every: Duration::from_secs(1),
                statistic_max_rt: Duration::from_secs(5),
            },
        }
    }

    /// The strictest of two rules: for each threshold the lower of those set, as
    /// Sentinel's `loadRules` merges a list. The statistics settings are `self`'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::system::SystemRule;
    ///
    /// let a = SystemRule::builder().highest_system_load(1.2).build()?;
    /// let b = SystemRule::builder().highest_system_load(2.3).max_in_flight(17).build()?;
    /// let both = a.strictest(&b);
    /// assert_eq!(both.highest_system_load(), Some(1.2));
    /// assert_eq!(both.max_in_flight(), Some(17));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn strictest(&self, other: &SystemRule) -> SystemRule {
        fn lower<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        SystemRule {
            highest_system_load: lower(self.highest_system_load, other.highest_system_load),
            highest_cpu_usage: lower(self.highest_cpu_usage, other.highest_cpu_usage),
            qps: lower(self.qps, other.qps),
            avg_rt: lower(self.avg_rt, other.avg_rt),
            max_in_flight: lower(self.max_in_flight, other.max_in_flight),
            ..*self
        }
    }

    /// The load average above which the load check applies.
    pub fn highest_system_load(&self) -> Option<f64> {
        self.highest_system_load
    }

    /// The CPU usage, in `[0, 1]`, above which requests are shed.
    pub fn highest_cpu_usage(&self) -> Option<f64> {
        self.highest_cpu_usage
    }

    /// The passed requests per second above which requests are shed.
    pub fn qps(&self) -> Option<f64> {
        self.qps
    }

    /// The window's average RT above which requests are shed.
    pub fn avg_rt(&self) -> Option<Duration> {
        self.avg_rt
    }

    /// The in-flight count above which requests are shed.
    pub fn max_in_flight(&self) -> Option<u64> {
        self.max_in_flight
    }

    /// How a load above its threshold is acted on.
    pub fn load_check(&self) -> LoadCheck {
        self.load_check
    }

    /// The statistics window's length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The number of buckets the window is kept in.
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// The least time between two system readings.
    pub fn sample_every(&self) -> Duration {
        self.sample_every
    }

    /// The min RT of a window without completions (Sentinel's
    /// `csp.sentinel.statistic.max.rt`).
    pub fn statistic_max_rt(&self) -> Duration {
        self.statistic_max_rt
    }
}

/// Builds a [`SystemRule`]; every setter takes effect at [`build`](SystemRuleBuilder::build),
/// which checks them all.
///
/// # Examples
///
/// ```
/// use tollgate::ConfigError;
/// use tollgate::shed::system::SystemRule;
///
/// assert_eq!(
///     SystemRule::builder().highest_cpu_usage(f64::NAN).build(),
///     Err(ConfigError::NotANumber { parameter: "highest_cpu_usage" }),
/// );
/// ```
#[derive(Clone, Copy, Debug)]
#[must_use]
pub struct SystemRuleBuilder {
    rule: SystemRule,
}

impl SystemRuleBuilder {
    /// Applies the load check (see [`LoadCheck`]) while the 1-minute load average is
    /// above `load`.
    pub fn highest_system_load(mut self, load: f64) -> SystemRuleBuilder {
        self.rule.highest_system_load = Some(load);
        self
    }

    /// Sheds while CPU usage is above `usage`, in `[0, 1]`.
    pub fn highest_cpu_usage(mut self, usage: f64) -> SystemRuleBuilder {
        self.rule.highest_cpu_usage = Some(usage);
        self
    }

    /// Sheds a request that would take the window's passed QPS above `qps`.
    pub fn qps(mut self, qps: f64) -> SystemRuleBuilder {
        self.rule.qps = Some(qps);
        self
    }

    /// Sheds while the window's average RT is above `rt`.
    pub fn avg_rt(mut self, rt: Duration) -> SystemRuleBuilder {
        self.rule.avg_rt = Some(rt);
        self
    }

    /// Sheds while more than `in_flight` requests are in flight (not counting the
    /// one asking, as Sentinel's `maxThread`: up to `in_flight + 1` run at once).
    pub fn max_in_flight(mut self, in_flight: u64) -> SystemRuleBuilder {
        self.rule.max_in_flight = Some(in_flight);
        self
    }

    /// How a load above its threshold is acted on; [`LoadCheck::Bbr`] by default.
    pub fn load_check(mut self, check: LoadCheck) -> SystemRuleBuilder {
        self.rule.load_check = check;
        self
    }

    /// The statistics window: `length` kept in `buckets` equal buckets (Sentinel: 1 s
    /// in 2), `length` at most [`MAX_PERIOD`]. Max success QPS is the busiest
    /// bucket's rate.
    pub fn window(mut self, length: Duration, buckets: u32) -> SystemRuleBuilder {
        self.rule.window = length;
        self.rule.buckets = buckets;
        self
    }

    /// The least time between two system readings (Sentinel: 1 s), at most
    /// [`MAX_PERIOD`].
    pub fn sample_every(mut self, interval: Duration) -> SystemRuleBuilder {
        self.rule.sample_every = interval;
        self
    }

    /// The min RT of a window without completions (Sentinel: 5 s).
    pub fn statistic_max_rt(mut self, rt: Duration) -> SystemRuleBuilder {
        self.rule.statistic_max_rt = rt;
        self
    }

    /// Checks the thresholds and settings.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::NotANumber`], [`ConfigError::Negative`] or
    ///   [`ConfigError::Infinite`] for a load, CPU usage or QPS threshold that is NaN,
    ///   negative or infinite (Sentinel ignores a negative one: it means "unset");
    /// - [`ConfigError::OutOfRange`] for a CPU usage above 1 (Sentinel ignores it with
    ///   a warning), for no threshold at all (Sentinel turns checking off: here that
    ///   is the [kill switch](crate::shed::Mode::Off), not a rule), for a window that
    ///   `buckets` does not divide into whole nanoseconds, or for more than
    ///   [`MAX_BUCKETS`] buckets;
    /// - [`ConfigError::Zero`] for a QPS of 0 (it would shed everything), a zero
    ///   window, bucket count, sampling interval or statistic max RT;
    /// - [`ConfigError::TooLong`] for a window or sampling interval beyond
    ///   [`MAX_PERIOD`] (an hour), or an RT beyond what `u64` nanoseconds hold.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::ConfigError;
    /// use tollgate::shed::system::SystemRule;
    ///
    /// let rule = SystemRule::builder()
    ///     .highest_cpu_usage(0.8)
    ///     .max_in_flight(200)
    ///     .avg_rt(Duration::from_millis(50))
    ///     .build()?;
    /// assert_eq!(rule.max_in_flight(), Some(200));
    /// assert_eq!(
    ///     SystemRule::builder().highest_cpu_usage(f64::NAN).build().unwrap_err(),
    ///     ConfigError::NotANumber { parameter: "highest_cpu_usage" }
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn build(self) -> Result<SystemRule, ConfigError> {
        let rule = self.rule;
        if let Some(load) = rule.highest_system_load {
            finite_non_negative("highest_system_load", load)?;
        }
        if let Some(usage) = rule.highest_cpu_usage {
            finite_non_negative("highest_cpu_usage", usage)?;
            if usage > 1.0 {
                return Err(ConfigError::OutOfRange {
                    parameter: "highest_cpu_usage",
                    expected: "in [0, 1]",
                });
            }
        }
        if let Some(qps) = rule.qps {
            finite_non_negative("qps", qps)?;
            if qps == 0.0 {
                return Err(ConfigError::Zero { parameter: "qps" });
            }
        }
        if let Some(rt) = rule.avg_rt {
            not_too_long("avg_rt", rt)?;
        }
        let any = rule.highest_system_load.is_some()
            || rule.highest_cpu_usage.is_some()
            || rule.qps.is_some()
            || rule.avg_rt.is_some()
            || rule.max_in_flight.is_some();
        if !any {
            return Err(ConfigError::OutOfRange {
                parameter: "thresholds",
                expected: "at least one threshold set",
            });
        }
        positive_duration("window", rule.window)?;
        positive_duration("sample_every", rule.sample_every)?;
        positive_duration("statistic_max_rt", rule.statistic_max_rt)?;
        // A window of Duration::MAX keeps its first busiest bucket for good, and a
        // sampling interval of Duration::MAX keeps the first CPU reading.
        for (parameter, period) in [("window", rule.window), ("sample_every", rule.sample_every)] {
            if period > MAX_PERIOD {
                return Err(ConfigError::TooLong {
                    parameter,
                    max: MAX_PERIOD,
                    within: "the system rule's statistics",
                });
            }
        }
        if rule.buckets == 0 {
            return Err(ConfigError::Zero {
                parameter: "buckets",
            });
        }
        if rule.buckets > MAX_BUCKETS {
            return Err(ConfigError::OutOfRange {
                parameter: "buckets",
                expected: "at most 1000",
            });
        }
        // Sentinel asserts intervalInMs % sampleCount == 0.
        if rule.window.as_nanos() % u128::from(rule.buckets) != 0 {
            return Err(ConfigError::OutOfRange {
                parameter: "window",
                expected: "a whole number of nanoseconds per bucket",
            });
        }
        Ok(rule)
    }
}

fn finite_non_negative(parameter: &'static str, value: f64) -> Result<(), ConfigError> {
    if value.is_nan() {
        Err(ConfigError::NotANumber { parameter })
    } else if value < 0.0 {
        Err(ConfigError::Negative { parameter, value })
    } else if value.is_infinite() {
        Err(ConfigError::Infinite { parameter })
    } else {
        Ok(())
    }
}

fn not_too_long(parameter: &'static str, d: Duration) -> Result<(), ConfigError> {
    if d > LONGEST {
        Err(ConfigError::TooLong {
            parameter,
            max: LONGEST,
            within: "u64 nanoseconds",
        })
    } else {
        Ok(())
    }
}

fn positive_duration(parameter: &'static str, d: Duration) -> Result<(), ConfigError> {
    if d.is_zero() {
        return Err(ConfigError::Zero { parameter });
    }
    not_too_long(parameter, d)
}
