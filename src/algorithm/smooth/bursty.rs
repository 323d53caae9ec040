//! Guava's `SmoothBursty`: stored permits cost nothing.

use std::time::Duration;

use super::super::script::Arg;
use super::super::share::too_slow;
use super::super::{Algorithm, Facts, Share};
use super::{Rate, Smooth, SmoothState, script_refill, sealed};
use crate::error::{ConfigError, non_negative_finite};
use crate::time::Nanos;

/// Guava's `SmoothBursty`: up to `max_burst_seconds` of unused rate is stored, and
/// stored permits cost nothing.
///
/// A new limiter stores nothing. The state remembers when the *next* request may go;
/// a request is granted then, whatever its size, and its cost pushes that instant
/// later: a caller waits only for earlier debt, and the next caller pays for this
/// one (the prepay). Time is counted in whole microseconds since
/// [`initial_state`](crate::algorithm::Algorithm::initial_state) and the arithmetic is
/// Guava's, step by step, so every wait in microseconds equals Guava's. See
/// [`Smooth`] for how it behaves as an [`Algorithm`](crate::algorithm::Algorithm).
///
/// Deliberate differences from Guava: the rate must be finite (Guava's `+inf`
/// admits everything) and at most 10⁶ per second (above that, one permit costs 0 µs
/// after Guava's truncation, so single permits are never limited), and at least one
/// per 2⁵³ µs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Limiter;
/// use tollgate::algorithm::SmoothBursty;
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(SmoothBursty::new(5.0)?, clock.clone());
/// // Guava's RateLimiter.create(5.0).acquire(), three times: 0 s, 0.2 s, 0.2 s.
/// for expected in [0, 200, 200] {
///     let wait = limiter.reserve(1, Duration::MAX)?.wait();
///     assert_eq!(wait, Duration::from_millis(expected));
///     clock.advance(wait);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type SmoothBursty = Smooth<Bursty>;

/// The shape of [`SmoothBursty`]: how many seconds of permits idle time stores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bursty {
    max_burst_seconds: f64,
    max_permits: f64,
}

impl Bursty {
    fn new(max_burst_seconds: f64, permits_per_second: f64) -> Result<Bursty, ConfigError> {
        let seconds = non_negative_finite("max_burst_seconds", max_burst_seconds)?;
        let max_permits = seconds * permits_per_second;
        if !max_permits.is_finite() {
            return Err(ConfigError::Overflow {
                parameter: "max_burst_seconds",
            });
        }
        Ok(Bursty {
            max_burst_seconds,
            max_permits,
        })
    }
}

impl sealed::Shape for Bursty {
    fn with_rate(&self, permits_per_second: f64, _stable_us: f64) -> Result<Bursty, ConfigError> {
        Bursty::new(self.max_burst_seconds, permits_per_second)
    }

    fn max_permits(&self) -> f64 {
        self.max_permits
    }

    fn cool_down_us(&self, stable_us: f64) -> f64 {
        stable_us
    }

    fn stored_to_wait(&self, _stable_us: f64, _stored: f64, _take: f64) -> i64 {
        0
    }

    fn initial_stored(&self) -> f64 {
        0.0
    }
}

/// # Bursty
impl SmoothBursty {
    /// Guava's `RateLimiter.create(permits_per_second)`: stores up to one second of
    /// permits.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NotANumber`], [`ConfigError::Negative`], [`ConfigError::Zero`]
    /// or [`ConfigError::Infinite`] for such a rate (Guava allows `+inf`);
    /// [`ConfigError::OutOfRange`] above 10⁶ per second or below one per 2⁵³ µs.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::SmoothBursty;
    ///
    /// assert_eq!(SmoothBursty::new(10.0)?.max_permits(), 10.0);
    /// assert!(SmoothBursty::new(f64::INFINITY).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(permits_per_second: f64) -> Result<SmoothBursty, ConfigError> {
        SmoothBursty::with_max_burst_seconds(permits_per_second, 1.0)
    }

    /// A bursty limiter storing up to `max_burst_seconds` of permits.
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::new`] for the rate; for `max_burst_seconds`,
    /// [`ConfigError::NotANumber`], [`ConfigError::Negative`] or
    /// [`ConfigError::Infinite`], and [`ConfigError::Overflow`] if the maximum
    /// number of permits is not a finite `f64`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::SmoothBursty;
    ///
    /// let bursty = SmoothBursty::with_max_burst_seconds(2.0, 10.0)?;
    /// assert_eq!(bursty.max_permits(), 20.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_max_burst_seconds(
        permits_per_second: f64,
        max_burst_seconds: f64,
    ) -> Result<SmoothBursty, ConfigError> {
        let rate = Rate::new(permits_per_second)?;
        let shape = Bursty::new(max_burst_seconds, rate.permits_per_second)?;
        Ok(Smooth::with_shape(rate, shape))
    }

    /// Changes how many seconds of permits may be stored. Guava has no such call:
    /// here the idle time up to `now` is stored first, and the stored permits are
    /// kept, cut to the new maximum (never scaled up).
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::with_max_burst_seconds`]; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, SmoothBursty};
    /// use tollgate::time::Nanos;
    ///
    /// let mut bursty = SmoothBursty::new(10.0)?;
    /// let mut state = bursty.initial_state(Nanos::ZERO);
    /// let later = Nanos::new(5_000_000_000);
    /// bursty.set_max_burst_seconds(&mut state, later, 0.5)?;
    /// assert_eq!(state.stored_permits(), 5.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_max_burst_seconds(
        &mut self,
        state: &mut SmoothState,
        now: Nanos,
        max_burst_seconds: f64,
    ) -> Result<(), ConfigError> {
        let shape = Bursty::new(max_burst_seconds, self.rate.permits_per_second)?;
        self.resync(state, state.micros_at(now));
        self.shape = shape;
        state.stored_permits = state.stored_permits.min(shape.max_permits);
        Ok(())
    }

    /// How many seconds of permits may be stored.
    pub fn max_burst_seconds(&self) -> f64 {
        self.shape.max_burst_seconds
    }
}

/// The facts of Guava's bursty limiter. Its Redis twin reads `{stable interval µs,
/// max permits, capacity}`, the very doubles this limiter computes with.
impl Facts for SmoothBursty {
    const NAME: &'static str = "smooth_bursty";
    const SCRIPT: &'static str = include_str!("../../store/redis/scripts/smooth.lua");

    /// `max_burst_seconds`, at least one stable interval: the time of one permit,
    /// which is what a limiter without burst refills.
    fn window(&self) -> Duration {
        Duration::try_from_secs_f64(self.max_burst_seconds())
            .unwrap_or(Duration::MAX)
            .max(self.stable_interval())
    }

    /// The most permits it stores, at least 1.
    fn quota(&self) -> u64 {
        (self.max_permits() as u64).max(1)
    }

    /// The rate divided, rounded down to the next smaller double if the division
    /// rounded up; the burst in seconds kept.
    fn per_node(&self, share: Share) -> Result<SmoothBursty, ConfigError> {
        SmoothBursty::with_max_burst_seconds(share.rate(self.rate()), self.max_burst_seconds())
            .map_err(too_slow)
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let stable_us = self.rate.interval_us;
        let max_permits = self.shape.max_permits;
        // A bursty limiter stores one permit per stable interval.
        script_refill(max_permits * stable_us, "max_burst_seconds")?;
        Ok(vec![
            Arg::Float(stable_us),
            Arg::Float(max_permits),
            Arg::Int(self.capacity()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{at, floats};

    #[test]
    fn rejects_bad_max_burst_seconds() {
        let name = "max_burst_seconds";
        let bad = |secs| SmoothBursty::with_max_burst_seconds(1.0, secs).unwrap_err();
        assert_eq!(bad(f64::NAN), ConfigError::NotANumber { parameter: name });
        assert_eq!(
            bad(-0.5),
            ConfigError::Negative {
                parameter: name,
                value: -0.5
            }
        );
        assert_eq!(
            bad(f64::INFINITY),
            ConfigError::Infinite { parameter: name }
        );
        assert_eq!(
            SmoothBursty::with_max_burst_seconds(1e6, f64::MAX).unwrap_err(),
            ConfigError::Overflow { parameter: name }
        );
        assert!(SmoothBursty::with_max_burst_seconds(1.0, 0.0).is_ok());
    }

    #[test]
    fn set_max_burst_seconds_cuts_stored_permits_and_fails_cleanly() {
        let mut bursty = SmoothBursty::new(10.0).unwrap();
        let mut s = bursty.initial_state(Nanos::ZERO);
        bursty.set_max_burst_seconds(&mut s, at(5000), 0.5).unwrap();
        assert_eq!((s.stored_permits(), bursty.max_permits()), (5.0, 5.0));
        bursty.set_max_burst_seconds(&mut s, at(5000), 3.0).unwrap();
        assert_eq!(
            s.stored_permits(),
            5.0,
            "raising the maximum stores nothing"
        );
        assert_eq!(bursty.max_burst_seconds(), 3.0);
        let (old, old_state) = (bursty, s);
        assert!(
            bursty
                .set_max_burst_seconds(&mut s, at(9000), -1.0)
                .is_err()
        );
        assert!(bursty.set_rate(&mut s, at(9000), f64::NAN).is_err());
        assert_eq!((bursty, s), (old, old_state));
    }

    #[test]
    fn script_args_are_interval_maximum_and_capacity() {
        let bursty = SmoothBursty::with_max_burst_seconds(4.0, 2.5).unwrap();
        assert_eq!(
            bursty.script_args(),
            Ok(vec![
                Arg::Float(250_000.0),
                Arg::Float(10.0),
                Arg::Int(bursty.capacity()),
            ])
        );
    }

    #[test]
    fn intervals_of_fractional_microseconds_are_sent_as_the_same_double() {
        let bursty = SmoothBursty::new(3.0).unwrap();
        let sent = floats(&bursty.script_args().unwrap())[0];
        assert_eq!(sent.to_bits(), (1e6f64 / 3.0).to_bits());
        let text = Arg::Float(sent).to_text();
        assert_eq!(text.parse::<f64>().unwrap().to_bits(), sent.to_bits());
        assert_eq!(
            bursty.stable_interval(),
            Duration::from_secs_f64(sent / 1e6)
        );
    }

    #[test]
    fn a_maximum_the_script_cannot_refill_exactly_has_no_script_args() {
        let years = 150.0 * 365.0 * 86_400.0;
        let bursty = SmoothBursty::with_max_burst_seconds(10.0, years).unwrap();
        assert_eq!(
            bursty.script_args(),
            Err(ConfigError::Overflow {
                parameter: "max_burst_seconds"
            })
        );
        let bursty = SmoothBursty::with_max_burst_seconds(10.0, years / 2.0).unwrap();
        assert!(bursty.script_args().is_ok());
    }
}
