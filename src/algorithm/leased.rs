//! A concurrency limit whose permits expire: what a semaphore shared through a store
//! needs, since a process that dies holding permits never gives them back.

use std::time::Duration;

use super::script::{Arg, exact_count, whole_micros};
use super::{Algorithm, Concurrency, Facts, Share};
use crate::decision::{Decision, Denied, Reservation};
use crate::error::ConfigError;
use crate::time::Nanos;
use crate::units::positive_nanos;

/// At most `max` permits in use, where permits not renewed for a `lease` are taken
/// back.
///
/// Every acquire or release renews the lease of all permits held under the key; once
/// `lease` passes without either, the count falls to zero. Choose a lease longer than
/// any holder keeps its permits. In process, a [`Semaphore`](crate::Semaphore) needs no
/// lease: its permits return when dropped.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, Concurrency, Leased};
/// use tollgate::time::Nanos;
///
/// let limit = Leased::new(Concurrency::new(2)?, Duration::from_secs(30))?;
/// let mut state = limit.initial_state(Nanos::ZERO);
/// assert!(limit.acquire(&mut state, Nanos::ZERO, 2).is_ok());
/// assert!(limit.acquire(&mut state, Nanos::ZERO, 1).is_err());
/// // The holder died: after the lease, its permits are free again.
/// let later = Nanos::from_duration(Duration::from_secs(30));
/// assert!(limit.acquire(&mut state, later, 2).is_ok());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Leased {
    limit: Concurrency,
    lease: u64,
}

/// The permits held under a [`Leased`] limit and when their lease was last renewed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeasedState {
    in_use: u64,
    renewed_at: Nanos,
}

impl LeasedState {
    /// Permits held, expired or not.
    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// When the last acquire or release renewed the lease.
    pub fn renewed_at(&self) -> Nanos {
        self.renewed_at
    }
}

impl Leased {
    /// `limit`, with permits taken back after `lease` without renewal.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero lease, [`ConfigError::TooLong`] for one
    /// beyond the clock's range (584 years).
    pub fn new(limit: Concurrency, lease: Duration) -> Result<Leased, ConfigError> {
        Ok(Leased {
            limit,
            lease: positive_nanos("lease", lease)?,
        })
    }

    /// The concurrency limit.
    pub fn limit(&self) -> Concurrency {
        self.limit
    }

    /// How long permits stay held without renewal.
    pub fn lease(&self) -> Duration {
        Duration::from_nanos(self.lease)
    }

    /// The permits still held at `now`: none once the lease has run out. A lease that
    /// would run out past the clock's last instant never does on this clock.
    fn held(&self, state: &LeasedState, now: Nanos) -> u64 {
        let expires_at = state.renewed_at.as_u64().checked_add(self.lease);
        if expires_at.is_some_and(|at| now.as_u64() >= at) {
            0
        } else {
            state.in_use
        }
    }
}

impl Algorithm for Leased {
    type State = LeasedState;
    const HELD: bool = true;

    /// No: a denial ends when a holder releases, not at a time.
    fn denial_lasts(&self) -> bool {
        false
    }

    fn initial_state(&self, _now: Nanos) -> LeasedState {
        LeasedState::default()
    }

    fn acquire(&self, state: &mut LeasedState, now: Nanos, n: u64) -> Decision {
        let mut in_use = self.held(state, now);
        let decision = self.limit.acquire(&mut in_use, now, n)?;
        if n > 0 {
            *state = LeasedState {
                in_use,
                renewed_at: now,
            };
        }
        Ok(decision)
    }

    /// Grants only immediate reservations, as [`Concurrency`] does.
    fn reserve(
        &self,
        state: &mut LeasedState,
        now: Nanos,
        n: u64,
        _max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.acquire(state, now, n)?;
        Ok(Reservation::new(n, Duration::ZERO))
    }

    /// Releases `n` permits and renews the lease of those still held.
    fn refund(&self, state: &mut LeasedState, now: Nanos, n: u64) {
        let in_use = self.held(state, now).saturating_sub(n);
        *state = if in_use == 0 {
            LeasedState::default()
        } else {
            LeasedState {
                in_use,
                renewed_at: now,
            }
        };
    }

    fn capacity(&self) -> u64 {
        self.limit.max()
    }

    fn idle_at(&self, state: &LeasedState) -> Nanos {
        if state.in_use == 0 {
            Nanos::ZERO
        } else {
            Nanos::new(state.renewed_at.as_u64().saturating_add(self.lease))
        }
    }
}

/// The facts of a leased concurrency limit, a store's concurrency limit (a process may
/// die holding permits). Its Redis twin reads `{max, lease µs}`.
impl Facts for Leased {
    const NAME: &'static str = "concurrency";
    const SCRIPT: &'static str = include_str!("../store/redis/scripts/concurrency.lua");

    /// The lease, after which permits held by a holder that never released them are
    /// back.
    fn window(&self) -> Duration {
        self.lease()
    }

    /// The maximum divided; the lease kept.
    fn per_node(&self, share: Share) -> Result<Leased, ConfigError> {
        let limit = Concurrency::new(share.count(self.limit.max())?)?;
        Leased::new(limit, self.lease())
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let max = exact_count(self.limit.max(), "max")?;
        let lease = whole_micros(self.lease(), "lease")?;
        Ok(vec![Arg::Int(max), Arg::Int(lease)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::script::too_long;

    fn secs(s: u64) -> Nanos {
        Nanos::from_duration(Duration::from_secs(s))
    }

    #[test]
    fn zero_lease_is_an_error() {
        let limit = Concurrency::new(1).unwrap();
        assert_eq!(
            Leased::new(limit, Duration::ZERO),
            Err(ConfigError::Zero { parameter: "lease" })
        );
    }

    #[test]
    fn a_release_renews_the_lease_of_the_rest() {
        let limit = Leased::new(Concurrency::new(3).unwrap(), Duration::from_secs(10)).unwrap();
        let mut s = limit.initial_state(secs(0));
        limit.acquire(&mut s, secs(0), 3).unwrap();
        limit.refund(&mut s, secs(8), 1);
        assert!(
            limit.acquire(&mut s, secs(12), 2).is_err(),
            "renewed at 8 s"
        );
        assert!(limit.acquire(&mut s, secs(18), 3).is_ok());
        assert_eq!(limit.idle_at(&s), secs(28));
    }

    #[test]
    fn releasing_everything_is_idle_at_once() {
        let limit = Leased::new(Concurrency::new(2).unwrap(), Duration::from_secs(10)).unwrap();
        let mut s = limit.initial_state(secs(0));
        limit.acquire(&mut s, secs(1), 2).unwrap();
        limit.refund(&mut s, secs(2), 5);
        assert_eq!(s, LeasedState::default());
        assert_eq!(limit.idle_at(&s), Nanos::ZERO);
    }

    /// Regression: a lease that would run out past the clock's end saturated at its
    /// last instant, which then freed every permit.
    #[test]
    fn a_lease_past_the_clocks_end_never_runs_out() {
        let limit = Leased::new(Concurrency::new(2).unwrap(), Duration::from_secs(10)).unwrap();
        let near_end = Nanos::new(u64::MAX - 5_000_000_000);
        let mut s = limit.initial_state(near_end);
        limit.acquire(&mut s, near_end, 2).unwrap();
        for now in [near_end, Nanos::new(u64::MAX - 1), Nanos::MAX] {
            let denied = limit.acquire(&mut s, now, 1).unwrap_err();
            assert_eq!(denied.retry(), Some(crate::decision::Retry::OnRelease));
        }
        limit.refund(&mut s, Nanos::MAX, 1);
        assert!(limit.acquire(&mut s, Nanos::MAX, 1).is_ok());
        assert!(limit.acquire(&mut s, Nanos::MAX, 1).is_err());
    }

    #[test]
    fn a_lease_past_the_clocks_range_is_an_error() {
        let limit = Concurrency::new(1).unwrap();
        assert_eq!(
            Leased::new(limit, Duration::MAX),
            Err(crate::units::too_long("lease"))
        );
        assert!(Leased::new(limit, Duration::from_nanos(u64::MAX)).is_ok());
    }

    #[test]
    fn a_denial_renews_nothing() {
        let limit = Leased::new(Concurrency::new(1).unwrap(), Duration::from_secs(10)).unwrap();
        let mut s = limit.initial_state(secs(0));
        limit.acquire(&mut s, secs(0), 1).unwrap();
        assert!(limit.acquire(&mut s, secs(9), 1).is_err());
        assert!(limit.acquire(&mut s, secs(10), 1).is_ok());
    }

    fn leased(max: u64, lease: Duration) -> Leased {
        Leased::new(Concurrency::new(max).unwrap(), lease).unwrap()
    }

    #[test]
    fn whole_microsecond_leases_are_script_args() {
        let rule = leased(5, Duration::from_millis(1_500));
        assert_eq!(
            rule.script_args(),
            Ok(vec![Arg::Int(5), Arg::Int(1_500_000)])
        );
    }

    #[test]
    fn a_sub_microsecond_lease_has_no_script_args() {
        let rule = leased(5, Duration::from_nanos(1_500));
        assert!(matches!(
            rule.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "lease",
                ..
            })
        ));
    }

    #[test]
    fn a_lease_beyond_two_to_the_52_micros_has_no_script_args() {
        let fits = leased(1, Duration::from_micros(1 << 52));
        assert!(fits.script_args().is_ok());
        let huge = leased(1, Duration::from_micros((1 << 52) + 1));
        assert_eq!(huge.script_args(), Err(too_long("lease", 1 << 52)));
    }

    /// Regression: the longest lease the clock holds, which is not a whole number of
    /// µs, was rejected as "not a whole number of microseconds" instead of as too long
    /// for the Redis arithmetic.
    #[test]
    fn a_lease_too_long_for_redis_says_so_and_gives_the_longest() {
        let longest = leased(1, Duration::from_nanos(u64::MAX));
        let e = longest.script_args().unwrap_err();
        assert_eq!(e, too_long("lease", 1 << 52));
        let text = e.to_string();
        assert!(
            text.starts_with("lease is too long for the Redis scripts' arithmetic"),
            "{text}"
        );
        assert!(
            text.contains("4503599627.370496s (about 142 years)"),
            "{text}"
        );
    }

    #[test]
    fn a_max_beyond_two_to_the_52_has_no_script_args() {
        let fits = leased(1 << 52, Duration::from_secs(1));
        assert!(fits.script_args().is_ok());
        let huge = leased((1 << 52) + 1, Duration::from_secs(1));
        assert_eq!(
            huge.script_args(),
            Err(ConfigError::Overflow { parameter: "max" })
        );
    }
}
