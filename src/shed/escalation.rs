//! [`Escalation`]: the shed level of a utilisation shedder, as a pure state machine
//! over time and utilisation readings.

use std::time::Duration;

use crate::time::Nanos;

/// How many of the lowest classes are shed, moved one step at a time: up after
/// utilisation stayed at or above `high` for `up_after`, down after it stayed at or
/// below `low` for `down_after`. Between the two it holds, and both timers restart.
#[derive(Clone, Debug)]
pub(crate) struct Escalation {
    level: usize,
    max_level: usize,
    high: f64,
    low: f64,
    up_after: Duration,
    down_after: Duration,
    trend: Trend,
}

/// Since when readings have been on one side of the thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Trend {
    Steady,
    Above(Nanos),
    Below(Nanos),
}

impl Escalation {
    /// At level 0; `low < high` and non-zero holds are the caller's to check.
    pub(crate) fn new(
        max_level: usize,
        high: f64,
        low: f64,
        up_after: Duration,
        down_after: Duration,
    ) -> Escalation {
        Escalation {
            level: 0,
            max_level,
            high,
            low,
            up_after,
            down_after,
            trend: Trend::Steady,
        }
    }

    /// Takes a reading of `utilisation` at `now` and answers the level. Moves at
    /// most one step per reading: readings are all it knows of the time between them.
    pub(crate) fn observe(&mut self, now: Nanos, utilisation: f64) -> usize {
        if utilisation >= self.high {
            match self.trend {
                Trend::Above(since) => {
                    if self.level < self.max_level && now.saturating_since(since) >= self.up_after {
                        self.level += 1;
                        self.trend = Trend::Above(now);
                    }
                }
                _ => self.trend = Trend::Above(now),
            }
        } else if utilisation <= self.low {
            match self.trend {
                Trend::Below(since) => {
                    if self.level > 0 && now.saturating_since(since) >= self.down_after {
                        self.level -= 1;
                        self.trend = Trend::Below(now);
                    }
                }
                _ => self.trend = Trend::Below(now),
            }
        } else {
            // Between the thresholds (or NaN): hold the level, restart both timers.
            self.trend = Trend::Steady;
        }
        self.level
    }

    pub(crate) fn level(&self) -> usize {
        self.level
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Nanos {
        Nanos::new(ms * MS)
    }

    fn escalation() -> Escalation {
        Escalation::new(
            3,
            0.9,
            0.5,
            Duration::from_millis(100),
            Duration::from_millis(500),
        )
    }

    #[test]
    fn escalates_one_step_per_hold_while_above() {
        let mut e = escalation();
        assert_eq!(e.observe(at(0), 0.95), 0);
        assert_eq!(e.observe(at(99), 0.95), 0);
        assert_eq!(e.observe(at(100), 0.95), 1);
        assert_eq!(e.observe(at(199), 1.0), 1);
        assert_eq!(e.observe(at(200), 1.0), 2);
        assert_eq!(e.observe(at(300), 1.0), 3);
        assert_eq!(e.observe(at(10_000), 1.0), 3, "capped at max_level");
    }

    #[test]
    fn a_dip_between_thresholds_restarts_the_hold() {
        let mut e = escalation();
        e.observe(at(0), 0.95);
        e.observe(at(50), 0.7);
        assert_eq!(e.observe(at(100), 0.95), 0);
        assert_eq!(e.observe(at(199), 0.95), 0);
        assert_eq!(e.observe(at(200), 0.95), 1);
    }

    #[test]
    fn de_escalates_one_step_per_slower_hold_while_below() {
        let mut e = escalation();
        for ms in [0, 100, 200] {
            e.observe(at(ms), 0.95);
        }
        assert_eq!(e.level(), 2);
        assert_eq!(e.observe(at(300), 0.5), 2);
        assert_eq!(e.observe(at(799), 0.1), 2);
        assert_eq!(e.observe(at(800), 0.1), 1);
        assert_eq!(e.observe(at(1_299), 0.1), 1);
        assert_eq!(e.observe(at(1_300), 0.1), 0);
        assert_eq!(e.observe(at(5_000), 0.0), 0);
    }

    #[test]
    fn nan_readings_hold_the_level() {
        let mut e = escalation();
        e.observe(at(0), 0.95);
        assert_eq!(e.observe(at(100), f64::NAN), 0);
        assert_eq!(e.observe(at(200), 0.95), 0, "the hold restarted");
    }

    #[test]
    fn endless_holds_never_move_and_never_overflow() {
        let mut e = Escalation::new(3, 0.9, 0.5, Duration::MAX, Duration::MAX);
        e.observe(Nanos::ZERO, 1.0);
        assert_eq!(e.observe(Nanos::MAX, 1.0), 0);
    }
}
