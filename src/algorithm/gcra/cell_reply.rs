//! redis-cell's `CL.THROTTLE key max_burst count period [quantity]` reply, read off a
//! [`Gcra`] decision: the GCRA decides, and the reply only reports it.

use std::time::Duration;

use super::Gcra;
use crate::algorithm::Algorithm;
use crate::decision::{Admitted, Decision, Denied};
use crate::time::Nanos;
use crate::units::saturating_i64;

/// The reply of redis-cell's `CL.THROTTLE`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, CellReply, Gcra};
/// use tollgate::time::Nanos;
///
/// // CL.THROTTLE user123 15 30 60 1
/// let gcra = Gcra::from_cell(15, 30, Duration::from_secs(60))?;
/// let mut state = gcra.initial_state(Nanos::ZERO);
/// let reply: CellReply = gcra.cell_throttle(&mut state, Nanos::ZERO, 1);
/// assert!(!reply.limited);
/// assert_eq!(reply.to_array(), [0, 16, 15, -1, 2]);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CellReply {
    /// Whether the request was limited.
    pub limited: bool,
    /// `max_burst + 1`.
    pub limit: u64,
    /// Permits left.
    pub remaining: u64,
    /// When limited, the time until a retry can succeed; `None` when not limited, or
    /// when the request can never succeed.
    pub retry_after: Option<Duration>,
    /// The time until the bucket is full again.
    pub reset_after: Duration,
}

impl Gcra {
    /// `CL.THROTTLE` on `state` at `now` for `quantity`, replying as redis-cell does.
    /// A `quantity` of 0 peeks.
    ///
    /// The decision is [`acquire`](Algorithm::acquire)'s. A `quantity` above the burst
    /// can never pass and takes nothing: the reply is limited, with no retry, and
    /// reports what is left, as redis-cell does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, Gcra};
    /// use tollgate::time::Nanos;
    ///
    /// // CL.THROTTLE user123 4 1 1 6: more than the burst of 5, on a fresh key.
    /// let gcra = Gcra::from_cell(4, 1, Duration::from_secs(1))?;
    /// let mut state = gcra.initial_state(Nanos::ZERO);
    /// let reply = gcra.cell_throttle(&mut state, Nanos::ZERO, 6);
    /// assert_eq!(reply.to_array(), [1, 5, 5, -1, 0]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn cell_throttle(&self, state: &mut u64, now: Nanos, quantity: u64) -> CellReply {
        match self.acquire(state, now, quantity) {
            Ok(admitted) => self.cell_reply(false, None, admitted.reset_after()),
            Err(Denied::Limited(limited)) => {
                self.cell_reply(true, limited.retry_after(), limited.reset_after())
            }
            // More than the burst: nothing was taken, so report what is left.
            Err(_) => {
                let left = self.peek(state, now, 0);
                let reset_after = left.map_or(Duration::ZERO, |a| a.reset_after());
                self.cell_reply(true, None, reset_after)
            }
        }
    }

    /// A reply whose bucket is full again after `ttl`.
    fn cell_reply(&self, limited: bool, retry_after: Option<Duration>, ttl: Duration) -> CellReply {
        CellReply {
            limited,
            limit: self.burst,
            remaining: self.cell_remaining(ttl),
            retry_after,
            reset_after: ttl,
        }
    }

    /// redis-cell's `remaining` for a bucket full again after `ttl`.
    fn cell_remaining(&self, ttl: Duration) -> u64 {
        let room = i128::from(self.tolerance) - ttl.as_nanos() as i128;
        // Below zero (a bucket in debt) there is no room; it is never above the
        // tolerance, so it fits.
        let room = u64::try_from(room.max(0)).unwrap_or(self.tolerance);
        cell_remaining(room, self.interval)
    }
}

/// redis-cell's `remaining`: `room / interval` (the room left, `tolerance - ttl`),
/// both in whole microseconds, divided as floats and truncated towards zero; 0 when
/// the bucket holds less than one interval. (Under a microsecond of interval, where
/// redis-cell would divide by zero, the nanoseconds are divided exactly.)
///
/// The one rounding of both renderings of a reply,
/// [`Gcra::cell_throttle`] and [`CellReply::from_decision`].
fn cell_remaining(room_nanos: u64, interval_nanos: u64) -> u64 {
    let interval_us = interval_nanos / 1000;
    if interval_us == 0 {
        return room_nanos / interval_nanos.max(1);
    }
    ((room_nanos / 1000) as f64 / interval_us as f64) as u64
}

/// A decision's `remaining` as redis-cell counts it. A GCRA decision made in
/// process keeps its room in nanoseconds over the emission interval (a divisor above
/// one), as does a Redis store's GCRA reply (its interval a whole number of
/// microseconds): divided exactly, it is one lower than redis-cell's
/// whole-microsecond count when the interval is not a whole number of
/// microseconds. Any other decision (already in whole permits) is as it came.
fn decision_remaining((room, divisor): (u64, u64)) -> u64 {
    if divisor > 1 {
        cell_remaining(room, divisor)
    } else {
        room / divisor.max(1)
    }
}

impl CellReply {
    /// The `CL.THROTTLE` reply for a GCRA decision, such as a
    /// `RedisStore` decision on a [`Gcra`] rule: the store's script
    /// replies the same fields, in microseconds.
    ///
    /// The reply is the one [`Gcra::cell_throttle`] gives in the same state at the
    /// same time, `remaining` included: it is counted as redis-cell counts it, in
    /// whole microseconds (see [`Gcra::cell_throttle`]), not as
    /// [`Admitted::remaining`] divides exact nanoseconds, which is one lower when the
    /// emission interval is not a whole number of microseconds.
    ///
    /// `None` for a request that can never pass (more than the burst) or a closed
    /// limiter: such a decision carries no state, while `CL.THROTTLE` reports what is
    /// left. Reply to such a request with [`CellReply::never`] of a peek (`n = 0`) at
    /// the same key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, CellReply, Gcra};
    /// use tollgate::time::Nanos;
    /// use tollgate::Quota;
    ///
    /// let gcra = Gcra::new(Quota::per_second(1)?.burst(2)?);
    /// let mut state = gcra.initial_state(Nanos::ZERO);
    /// let decision = gcra.acquire(&mut state, Nanos::ZERO, 1);
    /// let reply = CellReply::from_decision(&decision).expect("a decision with state");
    /// assert_eq!(reply.to_array(), [0, 2, 1, -1, 1]);
    /// assert_eq!(CellReply::from_decision(&gcra.acquire(&mut state, Nanos::ZERO, 3)), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn from_decision(decision: &Decision) -> Option<CellReply> {
        match decision {
            Ok(a) => Some(CellReply {
                limited: false,
                limit: a.limit(),
                remaining: decision_remaining(a.remaining_parts()),
                retry_after: None,
                reset_after: a.reset_after(),
            }),
            Err(Denied::Limited(l)) => Some(CellReply {
                limited: true,
                limit: l.limit(),
                remaining: decision_remaining(l.remaining_parts()),
                retry_after: l.retry_after(),
                reset_after: l.reset_after(),
            }),
            Err(Denied::Insufficient(_) | Denied::Closed) => None,
        }
    }

    /// The reply to a request that can never pass (more than the burst), given a peek
    /// (`n = 0`) at the same key: limited, with no retry, and what is left, since
    /// nothing was taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, CellReply, Gcra};
    /// use tollgate::time::Nanos;
    /// use tollgate::Quota;
    ///
    /// let gcra = Gcra::new(Quota::per_second(1)?.burst(5)?);
    /// let state = gcra.initial_state(Nanos::ZERO);
    /// let left = gcra.peek(&state, Nanos::ZERO, 0)?;
    /// assert_eq!(CellReply::never(&left).to_array(), [1, 5, 5, -1, 0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn never(peek: &Admitted) -> CellReply {
        CellReply {
            limited: true,
            limit: peek.limit(),
            remaining: decision_remaining(peek.remaining_parts()),
            retry_after: None,
            reset_after: peek.reset_after(),
        }
    }

    /// The five integers `CL.THROTTLE` replies: limited (0/1), limit, remaining,
    /// retry_after seconds (-1 if none) and reset_after seconds, both rounded up when
    /// their fraction is at least a millisecond.
    pub fn to_array(&self) -> [i64; 5] {
        let secs = |d: Duration| {
            let whole = saturating_i64(d.as_secs().into());
            whole.saturating_add(i64::from(d.subsec_millis() > 0))
        };
        [
            i64::from(self.limited),
            saturating_i64(self.limit.into()),
            saturating_i64(self.remaining.into()),
            self.retry_after.map_or(-1, secs),
            secs(self.reset_after),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{at, ms};
    use crate::quota::Quota;

    /// redis-cell's own table (`it_rate_limits`): max_burst 4, 1 per second.
    #[test]
    fn matches_redis_cell_table() {
        let g = Gcra::from_cell(4, 1, Duration::from_secs(1)).unwrap();
        let mut s = g.initial_state(at(0));
        // (now ms, quantity, remaining, reset_after, retry_after, limited)
        let cases: [(u64, u64, u64, Duration, Option<Duration>, bool); 15] = [
            (0, 6, 5, ms(0), None, true),
            (0, 1, 4, ms(1000), None, false),
            (0, 1, 3, ms(2000), None, false),
            (0, 1, 2, ms(3000), None, false),
            (0, 1, 1, ms(4000), None, false),
            (0, 1, 0, ms(5000), None, false),
            (0, 1, 0, ms(5000), Some(ms(1000)), true),
            (3000, 1, 2, ms(3000), None, false),
            (3100, 1, 1, ms(3900), None, false),
            (4000, 1, 1, ms(4000), None, false),
            (8000, 1, 4, ms(1000), None, false),
            (9500, 1, 4, ms(1000), None, false),
            (9500, 0, 4, ms(1000), None, false),
            (9500, 2, 2, ms(3000), None, false),
            (9500, 5, 2, ms(3000), Some(ms(3000)), true),
        ];
        for (i, (now, q, remaining, reset, retry, limited)) in cases.into_iter().enumerate() {
            let r = g.cell_throttle(&mut s, at(now), q);
            assert_eq!(
                r,
                CellReply {
                    limited,
                    limit: 5,
                    remaining,
                    retry_after: retry,
                    reset_after: reset,
                },
                "case {i}"
            );
        }
    }

    /// Regression: a request above the burst on a fresh key replied "0 remaining",
    /// as if the bucket were empty, though it took nothing; `CL.THROTTLE` reports the
    /// whole burst left.
    #[test]
    fn more_than_the_burst_reports_what_is_actually_left() {
        let g = Gcra::new(Quota::per_second(1).unwrap().burst(5).unwrap());
        let mut s = g.initial_state(at(0));
        let reply = g.cell_throttle(&mut s, at(0), 6);
        assert_eq!(reply.to_array(), [1, 5, 5, -1, 0]);
        assert_eq!(s, 0, "nothing taken");
        let never = g.acquire(&mut s, at(0), 6);
        assert_eq!(CellReply::from_decision(&never), None);
        let left = g.peek(&s, at(0), 0).unwrap();
        assert_eq!(CellReply::never(&left), reply);
        // After 3 taken at 0, at 500 ms: 2.5 s to full, so 2 whole permits left.
        g.acquire(&mut s, at(0), 3).unwrap();
        let reply = g.cell_throttle(&mut s, at(500), 6);
        assert_eq!(reply.remaining, 2);
        assert_eq!(reply.reset_after, ms(2500));
        assert_eq!(reply.retry_after, None);
    }

    /// redis-cell divides whole microseconds as floats: 333,333.1 µs of room over an
    /// interval of 333,333.333 µs counts one permit (333,333 / 333,333), where exact
    /// nanoseconds count none.
    #[test]
    fn remaining_divides_whole_microseconds_as_redis_cell_does() {
        let g = Gcra::from_cell(2, 3, Duration::from_secs(1)).unwrap();
        assert_eq!(g.emission_interval(), Duration::from_nanos(333_333_333));
        let ttl = Duration::from_nanos(999_999_999 - 333_333_100);
        assert_eq!(g.cell_remaining(ttl), 1);
        assert_eq!(g.cell_remaining(Duration::from_secs(1)), 0);
        assert_eq!(g.cell_remaining(Duration::from_secs(5)), 0);
    }

    #[test]
    fn cell_reply_rounds_seconds_up_from_a_millisecond() {
        let reply = CellReply {
            limited: true,
            limit: 5,
            remaining: 0,
            retry_after: Some(Duration::from_micros(1_001_000)),
            reset_after: Duration::from_micros(2_000_999),
        };
        // 1.001 s rounds up; 2.000999 s has under a millisecond of fraction.
        assert_eq!(reply.to_array(), [1, 5, 0, 2, 2]);
        let reply = CellReply {
            retry_after: None,
            reset_after: Duration::from_millis(2_001),
            ..reply
        };
        assert_eq!(reply.to_array(), [1, 5, 0, -1, 3]);
    }
}
