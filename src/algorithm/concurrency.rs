//! A concurrency limit: at most `max` permits held at once, given back by their
//! holders rather than by time.
//!
//! The state is the number of permits in use, one `u64`, so a limiter over it is
//! lock-free.

use std::time::Duration;

use super::{Algorithm, check_capacity};
use super::{CONFIG_WORDS, Packing};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::time::Nanos;

/// At most `max` permits in use at once: the algorithm under
/// [`Semaphore`](crate::Semaphore).
///
/// Time plays no part. Permits come back when their holders
/// [`refund`](Algorithm::refund) them, so a denial waits for a release
/// ([`Retry::OnRelease`](crate::Retry::OnRelease): its `retry_after` is `None`), and
/// every `reset_after` is [`Duration::ZERO`].
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::{Algorithm, Concurrency};
/// use tollgate::time::Nanos;
///
/// let limit = Concurrency::new(2)?;
/// let mut in_use = limit.initial_state(Nanos::ZERO);
/// assert_eq!(limit.acquire(&mut in_use, Nanos::ZERO, 2)?.remaining(), 0);
/// assert!(limit.acquire(&mut in_use, Nanos::ZERO, 1).is_err());
/// limit.refund(&mut in_use, Nanos::ZERO, 1);
/// assert!(limit.acquire(&mut in_use, Nanos::ZERO, 1).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Concurrency {
    max: u64,
}

impl Concurrency {
    /// At most `max` permits in use at once.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `max` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::algorithm::Concurrency;
    ///
    /// assert_eq!(Concurrency::new(4)?.max(), 4);
    /// assert_eq!(Concurrency::new(0), Err(ConfigError::Zero { parameter: "max" }));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(max: u64) -> Result<Concurrency, ConfigError> {
        Ok(Concurrency {
            max: non_zero("max", max)?,
        })
    }

    /// The most permits in use at once.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Changes the maximum, keeping the permits in use. Lowered below what is in
    /// use, nothing is taken back: new requests are denied until enough permits are
    /// returned.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `max` is zero; nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, Concurrency};
    /// use tollgate::time::Nanos;
    ///
    /// let mut limit = Concurrency::new(3)?;
    /// let mut in_use = limit.initial_state(Nanos::ZERO);
    /// limit.acquire(&mut in_use, Nanos::ZERO, 3)?;
    /// limit.set_max(1)?;
    /// limit.refund(&mut in_use, Nanos::ZERO, 2);
    /// assert!(limit.acquire(&mut in_use, Nanos::ZERO, 1).is_err(), "one still in use");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_max(&mut self, max: u64) -> Result<(), ConfigError> {
        *self = Concurrency::new(max)?;
        Ok(())
    }
}

impl Algorithm for Concurrency {
    /// Permits in use.
    type State = u64;
    const HELD: bool = true;
    const PACKING: Option<Packing<Self>> = Some(Packing::new(Self::words, Self::from_words));

    fn initial_state(&self, _now: Nanos) -> u64 {
        0
    }

    #[inline]
    fn acquire(&self, in_use: &mut u64, _now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.max)?;
        let after = in_use.checked_add(n).filter(|&after| after <= self.max);
        match after {
            Some(after) => {
                *in_use = after;
                Ok(Admitted::new(self.max, self.max - after, Duration::ZERO))
            }
            // n == 0 peeks, even when the maximum was lowered below what is in use.
            None if n == 0 => Ok(Admitted::new(self.max, 0, Duration::ZERO)),
            // Permits return when holders release them, not with time.
            None => Err(Limited::on_release(self.max, self.max.saturating_sub(*in_use)).into()),
        }
    }

    /// Grants only immediate reservations: waiting for a release is not a matter of
    /// time, so `max_wait` is ignored.
    fn reserve(
        &self,
        in_use: &mut u64,
        now: Nanos,
        n: u64,
        _max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.acquire(in_use, now, n)?;
        Ok(Reservation::new(n, Duration::ZERO))
    }

    /// Releases `n` permits; never below zero.
    fn refund(&self, in_use: &mut u64, _now: Nanos, n: u64) {
        *in_use = in_use.saturating_sub(n);
    }

    fn capacity(&self) -> u64 {
        self.max
    }

    /// [`Nanos::ZERO`] when nothing is in use; otherwise never, as only releases,
    /// not time, free permits.
    fn idle_at(&self, in_use: &u64) -> Nanos {
        if *in_use == 0 {
            Nanos::ZERO
        } else {
            Nanos::MAX
        }
    }
}

impl Concurrency {
    pub(crate) fn words(&self) -> [u64; CONFIG_WORDS] {
        [self.max, 0, 0, 0]
    }

    #[inline]
    pub(crate) fn from_words(words: [u64; CONFIG_WORDS]) -> Concurrency {
        // Words come only from `words`, so `max` is never zero.
        Concurrency { max: words[0] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Retry;

    const T: Nanos = Nanos::ZERO;

    /// Regression: the denial said "retry after 0ns", as if permits were free now.
    #[test]
    fn admits_up_to_max_then_waits_for_a_release() {
        let c = Concurrency::new(3).unwrap();
        let mut s = c.initial_state(T);
        assert_eq!(c.acquire(&mut s, T, 2).unwrap().remaining(), 1);
        let denied = c.acquire(&mut s, T, 2).unwrap_err();
        assert_eq!(denied.retry(), Some(Retry::OnRelease));
        assert_eq!(denied.retry_after(), None);
        match denied {
            Denied::Limited(l) => assert_eq!(l.remaining(), 1),
            other => panic!("not never: {other:?}"),
        }
        assert_eq!(s, 2, "a denial changes nothing");
        assert_eq!(c.acquire(&mut s, T, 1).unwrap().remaining(), 0);
    }

    #[test]
    fn more_than_max_is_never() {
        let c = Concurrency::new(3).unwrap();
        let mut s = c.initial_state(T);
        assert!(c.acquire(&mut s, T, 4).unwrap_err().is_never());
        assert!(
            c.reserve(&mut s, T, 4, Duration::MAX)
                .unwrap_err()
                .is_never()
        );
        assert_eq!(s, 0);
    }

    #[test]
    fn zero_peeks_even_over_a_lowered_max() {
        let mut c = Concurrency::new(3).unwrap();
        let mut s = c.initial_state(T);
        c.acquire(&mut s, T, 3).unwrap();
        c.set_max(1).unwrap();
        let peek = c.acquire(&mut s, T, 0).unwrap();
        assert_eq!(peek.remaining(), 0);
        assert_eq!(s, 3);
    }

    #[test]
    fn lowering_max_below_in_use_waits_for_releases() {
        let mut c = Concurrency::new(4).unwrap();
        let mut s = c.initial_state(T);
        c.acquire(&mut s, T, 4).unwrap();
        c.set_max(2).unwrap();
        c.refund(&mut s, T, 1);
        assert!(c.acquire(&mut s, T, 1).is_err());
        c.refund(&mut s, T, 2);
        assert_eq!(s, 1);
        assert!(c.acquire(&mut s, T, 1).is_ok());
        assert!(c.acquire(&mut s, T, 1).is_err());
    }

    #[test]
    fn refund_saturates_at_zero() {
        let c = Concurrency::new(2).unwrap();
        let mut s = 1;
        c.refund(&mut s, T, u64::MAX);
        assert_eq!(s, 0);
    }

    #[test]
    fn reserve_is_immediate_or_denied() {
        let c = Concurrency::new(1).unwrap();
        let mut s = c.initial_state(T);
        assert!(
            c.reserve(&mut s, T, 1, Duration::ZERO)
                .unwrap()
                .is_immediate()
        );
        let denied = c
            .reserve(&mut s, T, 1, Duration::from_secs(60))
            .unwrap_err();
        assert_eq!(denied.retry(), Some(Retry::OnRelease));
    }

    #[test]
    fn idle_only_when_nothing_is_in_use() {
        let c = Concurrency::new(2).unwrap();
        assert_eq!(c.idle_at(&0), Nanos::ZERO);
        assert_eq!(c.idle_at(&1), Nanos::MAX);
    }

    #[test]
    fn zero_max_is_an_error_and_set_max_keeps_the_old_one() {
        assert_eq!(
            Concurrency::new(0),
            Err(ConfigError::Zero { parameter: "max" })
        );
        let mut c = Concurrency::new(2).unwrap();
        assert!(c.set_max(0).is_err());
        assert_eq!(c.max(), 2);
    }

    #[test]
    fn huge_values_never_overflow() {
        let c = Concurrency::new(u64::MAX).unwrap();
        let mut s = u64::MAX - 1;
        assert!(c.acquire(&mut s, T, 1).is_ok());
        assert!(c.acquire(&mut s, T, 1).is_err());
        assert!(c.acquire(&mut s, T, u64::MAX).is_err());
    }

    #[test]
    fn words_round_trip() {
        let c = Concurrency::new(7).unwrap();
        assert_eq!(Concurrency::from_words(c.words()), c);
    }
}
