//! [`Learner`]: what a [`LearnedRate`](super::LearnedRate) learns from each answer,
//! as smithy-rs's `update_rate_limiter` (and botocore's `on_receiving_response`),
//! plus the limits the partner announces. Pure: time arrives as [`Nanos`].

use std::time::Duration;

use crate::time::Nanos;

use super::answer::Answer;
use super::config::LearningConfig;
use super::cubic::{Cubic, seconds};
use super::send_rate::SendRate;

/// What the bucket should be after an answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Setting {
    /// Whether calls are limited at all.
    pub(crate) enabled: bool,
    /// Tokens per second.
    pub(crate) fill_rate: f64,
    /// The bucket's size before its floor of 1.
    pub(crate) size: f64,
    /// The end of the pause the partner asked for, if any; only ever later.
    pub(crate) paused_until: Nanos,
}

/// The learned state: CUBIC, the measured sending rate, and the partner's limits.
#[derive(Clone, Debug)]
pub(crate) struct Learner {
    config: LearningConfig,
    cubic: Cubic,
    sent: SendRate,
    /// Throttled at least once: CUBIC's rate applies.
    throttled_once: bool,
    /// CUBIC's rate before the floor (the bucket's size follows it).
    cubic_rate: f64,
    /// CUBIC's rate with the floor: the fill rate when nothing else limits it.
    fill_rate: f64,
    /// Calls a second the partner's quota allows, until when.
    quota: Option<(f64, Nanos)>,
    /// Calls a second the partner's remaining calls allow, until when.
    remaining: Option<(f64, Nanos)>,
    paused_until: Nanos,
}

impl Learner {
    /// Nothing learned, at `now`: botocore's `starting_max_rate=0` CUBIC, last
    /// throttled at `now`.
    pub(crate) fn new(config: LearningConfig, now: Nanos) -> Learner {
        Learner {
            config,
            cubic: Cubic::starting(config.beta, config.scale, 0.0, seconds(now)),
            sent: SendRate::new(config.smoothing, config.buckets_per_second, now),
            throttled_once: false,
            cubic_rate: 0.0,
            fill_rate: 0.0,
            quota: None,
            remaining: None,
            paused_until: Nanos::ZERO,
        }
    }

    /// Learns from `answer` at `now`.
    pub(crate) fn on_answer(&mut self, now: Nanos, answer: &Answer) -> Setting {
        self.learn(now, answer.is_throttled());
        // A quota over no time cannot be paced: the last one stands. A quota stands
        // for its window, at most an hour: a partner that stops announcing it (or
        // announced nonsense) does not hold the rate for good.
        if let Some((q, w)) = answer.quota() {
            if let Some(rate) = per_second(q, w) {
                let until = now + w.min(LearningConfig::LONGEST_WAIT);
                self.quota = Some((rate, until));
            }
        }
        if let Some((remaining, reset)) = answer.remaining() {
            if remaining == 0 {
                self.pause(now, reset);
            } else {
                // Paced as long as a pause could last, no longer.
                let until = now + reset.min(self.config.max_pause);
                self.remaining = per_second(remaining, reset).map(|rate| (rate, until));
            }
        }
        if let Some(d) = answer.retry_after() {
            self.pause(now, d);
        }
        self.setting(now)
    }

    /// smithy-rs's `update_rate_limiter`, to the number.
    fn learn(&mut self, now: Nanos, throttled: bool) {
        let t = seconds(now);
        let measured = self.sent.record_at(t);
        let calculated = if throttled {
            let rate_to_use = if self.throttled_once {
                f64::min(measured, self.fill_rate)
            } else {
                measured
            };
            self.throttled_once = true;
            self.cubic.throttled_at(rate_to_use, t)
        } else {
            self.cubic.success_at(t)
        };
        let new_rate = f64::min(calculated, self.config.max_growth * measured);
        self.cubic_rate = new_rate;
        self.fill_rate = f64::max(new_rate, self.config.min_rate);
    }

    fn pause(&mut self, now: Nanos, d: Duration) {
        let until = now + d.min(self.config.max_pause);
        self.paused_until = self.paused_until.max(until);
    }

    /// The bucket for `now`: CUBIC's rate once throttled, never above the
    /// partner's announced limits while they stand (which alone turn limiting on),
    /// never below the floor.
    pub(crate) fn setting(&self, now: Nanos) -> Setting {
        // At the clock's end time stands still, and so does what was said.
        let standing = |limit: Option<(f64, Nanos)>| {
            limit
                .filter(|(_, until)| now < *until || *until == Nanos::MAX)
                .map(|(rate, _)| rate)
        };
        // The floor holds for what the partner says too: a quota of 0 would make
        // the bucket wait forever for its first token.
        let ceiling = [standing(self.quota), standing(self.remaining)]
            .into_iter()
            .flatten()
            .reduce(f64::min)
            .map(|c| c.max(self.config.min_rate));
        let (enabled, fill_rate, size) = match (self.throttled_once, ceiling) {
            (true, None) => (true, self.fill_rate, self.cubic_rate),
            (true, Some(c)) => (true, self.fill_rate.min(c), self.cubic_rate.min(c)),
            (false, Some(c)) => (true, c, c),
            // Not limited: the bucket still follows CUBIC, as upstream's does.
            (false, None) => (false, self.fill_rate, self.cubic_rate),
        };
        Setting {
            enabled,
            fill_rate,
            size,
            paused_until: self.paused_until,
        }
    }

    pub(crate) fn measured(&self) -> f64 {
        self.sent.measured()
    }

    pub(crate) fn cubic(&self) -> Cubic {
        self.cubic
    }

    pub(crate) fn paused_until(&self) -> Nanos {
        self.paused_until
    }
}

/// `count` per `window` in calls a second; `None` for a zero window (no limit
/// that can be paced).
fn per_second(count: u64, window: Duration) -> Option<f64> {
    let seconds = window.as_secs_f64();
    (seconds > 0.0).then(|| count as f64 / seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::cubic::tests::assert_relative_eq;

    fn at(seconds: f64) -> Nanos {
        Nanos::new((seconds * 1e9).round() as u64)
    }

    /// smithy-rs `test_client_sending_rates`: an answer every 200 ms, two of them
    /// throttles; the measured rate and the fill rate after each, to the number.
    #[test]
    fn smithy_client_sending_rates() {
        let mut learner = Learner::new(LearningConfig::new(), Nanos::ZERO);
        let table = [
            (false, 0.2, 0.000000, 0.500000),
            (false, 0.4, 0.000000, 0.500000),
            (false, 0.6, 4.800000000000001, 0.500000),
            (false, 0.8, 4.800000000000001, 0.500000),
            (false, 1.0, 4.160000, 0.500000),
            (false, 1.2, 4.160000, 0.691200),
            (false, 1.4, 4.160000, 1.0975999999999997),
            (false, 1.6, 5.632000000000001, 1.6384000000000005),
            (false, 1.8, 5.632000000000001, 2.332800),
            (true, 2.0, 4.326400, 3.0284799999999996),
            (false, 2.2, 4.326400, 3.48663917347026),
            (false, 2.4, 4.326400, 3.821874416040255),
            (false, 2.6, 5.665280, 4.053385727709987),
            (false, 2.8, 5.665280, 4.200373108479454),
            (false, 3.0, 4.333056, 4.282036558348658),
            (true, 3.2, 4.333056, 2.99742559084406),
            (false, 3.4, 4.333056, 3.4522263943863463),
        ];
        let mut now = Nanos::ZERO;
        for (throttled, seconds, measured, fill_rate) in table {
            now = now + Duration::from_millis(200);
            assert_eq!(super::seconds(now), seconds);
            let answer = if throttled {
                Answer::throttled()
            } else {
                Answer::accepted()
            };
            let setting = learner.on_answer(now, &answer);
            assert_relative_eq(measured, learner.measured());
            assert_relative_eq(fill_rate, setting.fill_rate);
            assert_eq!(setting.enabled, seconds >= 2.0);
        }
    }

    #[test]
    fn throttling_is_enabled_once_throttling_error_is_received() {
        let mut learner = Learner::new(LearningConfig::new(), Nanos::ZERO);
        assert!(!learner.setting(Nanos::ZERO).enabled);
        assert!(learner.on_answer(Nanos::ZERO, &Answer::throttled()).enabled);
    }

    /// smithy-rs `test_multi_task_recovery_after_throttle_blip`, the learning half:
    /// fifty throttles in 50 ms leave the floor.
    #[test]
    fn a_burst_of_throttles_leaves_the_floor() {
        let mut learner = Learner::new(LearningConfig::new(), Nanos::ZERO);
        let mut setting = learner.setting(Nanos::ZERO);
        for i in 1..=50 {
            setting = learner.on_answer(at(0.001 * i as f64), &Answer::throttled());
        }
        assert!((setting.fill_rate - 0.5).abs() < 0.01);
    }

    #[test]
    fn announced_limits_cap_the_rate_and_turn_limiting_on() {
        let mut learner = Learner::new(LearningConfig::new(), Nanos::ZERO);
        let quota = Answer::accepted().with_quota(100, Duration::from_secs(60));
        let s = learner.on_answer(at(0.1), &quota);
        assert!(s.enabled);
        assert_eq!(s.fill_rate, 100.0 / 60.0);
        // 1 left for 10 s: a tenth of a call a second until then, held at the floor.
        let few = Answer::accepted().with_remaining(1, Duration::from_secs(10));
        let s = learner.on_answer(at(0.2), &few);
        assert_eq!(s.fill_rate, 0.5);
        let few = Answer::accepted().with_remaining(9, Duration::from_secs(10));
        let s = learner.on_answer(at(0.2), &few);
        assert_eq!(s.fill_rate, 0.9);
        assert_eq!(learner.setting(at(10.2)).fill_rate, 100.0 / 60.0);
        // A zero window announces nothing that can be paced: the last quota stands.
        let none = Answer::accepted().with_quota(5, Duration::ZERO);
        assert_eq!(learner.on_answer(at(11.0), &none).fill_rate, 100.0 / 60.0);
    }

    #[test]
    fn pauses_grow_only_and_are_bounded() {
        let config = LearningConfig::new()
            .max_pause(Duration::from_secs(60))
            .unwrap();
        let mut learner = Learner::new(config, Nanos::ZERO);
        let s = learner.on_answer(
            Nanos::ZERO,
            &Answer::throttled().with_retry_after(Duration::MAX),
        );
        assert_eq!(s.paused_until, at(60.0));
        let s = learner.on_answer(
            at(1.0),
            &Answer::accepted().with_remaining(0, Duration::from_secs(3)),
        );
        assert_eq!(s.paused_until, at(60.0));
        let s = learner.on_answer(
            at(59.0),
            &Answer::accepted().with_remaining(0, Duration::from_secs(3)),
        );
        assert_eq!(s.paused_until, at(62.0));
    }

    #[test]
    fn extremes_never_panic() {
        let mut learner = Learner::new(LearningConfig::new(), Nanos::MAX);
        let huge = Answer::throttled()
            .with_retry_after(Duration::MAX)
            .with_quota(u64::MAX, Duration::from_nanos(1))
            .with_remaining(u64::MAX, Duration::MAX);
        let s = learner.on_answer(Nanos::MAX, &huge);
        assert!(s.fill_rate > 0.0 && s.size.is_finite());
        assert_eq!(s.paused_until, Nanos::MAX);
        let s = learner.on_answer(Nanos::ZERO, &Answer::accepted());
        assert!(s.fill_rate > 0.0);
    }
}
