//! Traffic: when requests arrive, for which key, at what cost.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::error::SimError;

/// One request: its time from the start, its key (an index into the key names) and
/// its cost in permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Time since the simulation's start.
    pub at: Duration,
    /// The key: an index, named by [`Traffic::key_name`] (or a trace's keys).
    pub key: u32,
    /// Permits the request asks for.
    pub cost: u64,
}

/// How requests arrive over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Evenly spaced, `rate` a second.
    Constant {
        /// Requests a second.
        rate: f64,
    },
    /// A Poisson process of `rate` a second: independent, exponential gaps.
    Poisson {
        /// Requests a second, on average.
        rate: f64,
    },
    /// Poisson at `rate` for `on`, then nothing for `off`, over and over.
    OnOff {
        /// Requests a second while on.
        rate: f64,
        /// How long each burst lasts.
        on: Duration,
        /// How long each pause lasts.
        off: Duration,
    },
    /// Poisson with a rate going linearly from `from` to `to` over the run.
    Ramp {
        /// Requests a second at the start.
        from: f64,
        /// Requests a second at the end.
        to: f64,
    },
}

/// Which keys requests are for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keys {
    /// Every request for one key.
    One,
    /// `n` keys, key `k` (from 1) drawn with weight `1 / k^exponent` (Zipf).
    Zipf {
        /// How many keys.
        n: u32,
        /// The skew: 0 is uniform, 1 the classic Zipf.
        exponent: f64,
    },
}

/// A traffic to replay: a pattern, keys, a cost per request and a length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// When requests arrive.
    pub pattern: Pattern,
    /// Which keys they are for.
    pub keys: Keys,
    /// Permits each request asks for.
    pub cost: u64,
    /// How long the traffic runs.
    pub duration: Duration,
}

/// The most requests one traffic makes: a bound on memory, about 50 MB.
pub const MAX_ARRIVALS: usize = 50_000_000;

impl Traffic {
    /// The arrivals, in time order, from `seed`: the same seed gives the same arrivals.
    ///
    /// # Errors
    ///
    /// [`SimError::Traffic`] for a rate that is not a positive finite number (or a
    /// ramp whose ends are negative or both 0), an empty duration or burst, no keys,
    /// a skew that is not finite and non-negative, a cost of 0, or more than
    /// [`MAX_ARRIVALS`] requests.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_sim::arrivals::{Keys, Pattern, Traffic};
    ///
    /// let traffic = Traffic {
    ///     pattern: Pattern::Constant { rate: 10.0 },
    ///     keys: Keys::One,
    ///     cost: 1,
    ///     duration: Duration::from_secs(2),
    /// };
    /// let arrivals = traffic.arrivals(7)?;
    /// assert_eq!(arrivals.len(), 20);
    /// assert_eq!(arrivals[1].at, Duration::from_millis(100));
    /// # Ok::<(), tollgate_sim::SimError>(())
    /// ```
    pub fn arrivals(&self, seed: u64) -> Result<Vec<Arrival>, SimError> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let picker = KeyPicker::new(self.keys);
        let end = self.duration.as_secs_f64();
        let mut out = Vec::new();
        let mut t = 0.0_f64;
        loop {
            t = match self.pattern {
                Pattern::Constant { rate } => {
                    if out.is_empty() {
                        0.0
                    } else {
                        // From the count, not by adding gaps: no drift over long runs.
                        out.len() as f64 / rate
                    }
                }
                Pattern::Poisson { rate } => t + exponential(&mut rng, rate),
                Pattern::OnOff { rate, on, off } => {
                    let (on, period) = (on.as_secs_f64(), (on + off).as_secs_f64());
                    let mut next = t + exponential(&mut rng, rate);
                    // A time in a pause moves to the next burst, by the memorylessness
                    // of the exponential: the same as drawing from the burst's start.
                    let phase = next % period;
                    if phase >= on {
                        next += period - phase;
                        next += exponential(&mut rng, rate);
                    }
                    next
                }
                Pattern::Ramp { from, to } => {
                    // Thinning: candidates at the higher rate, each kept with the ratio
                    // of the rate at its time.
                    let top = from.max(to);
                    let mut next = t;
                    loop {
                        next += exponential(&mut rng, top);
                        let rate = from + (to - from) * (next / end).min(1.0);
                        if next >= end || uniform(&mut rng) * top < rate {
                            break;
                        }
                    }
                    next
                }
            };
            if t >= end {
                break;
            }
            if out.len() >= MAX_ARRIVALS {
                return Err(SimError::Traffic {
                    parameter: "rate × duration",
                    expected: "at most 50,000,000 requests",
                });
            }
            out.push(Arrival {
                at: Duration::from_secs_f64(t),
                key: picker.pick(&mut rng),
                cost: self.cost,
            });
        }
        Ok(out)
    }

    /// The name of key `k`.
    pub fn key_name(&self, k: u32) -> String {
        match self.keys {
            Keys::One => "key".to_owned(),
            Keys::Zipf { .. } => format!("key{k}"),
        }
    }

    fn validate(&self) -> Result<(), SimError> {
        let positive = |rate: f64| rate.is_finite() && rate > 0.0;
        let rate_ok = match self.pattern {
            Pattern::Constant { rate } | Pattern::Poisson { rate } => positive(rate),
            Pattern::OnOff { rate, on, .. } => {
                if on.is_zero() {
                    return Err(SimError::Traffic {
                        parameter: "on",
                        expected: "longer than 0",
                    });
                }
                positive(rate)
            }
            Pattern::Ramp { from, to } => {
                from.is_finite() && to.is_finite() && from >= 0.0 && to >= 0.0 && from + to > 0.0
            }
        };
        if !rate_ok {
            return Err(SimError::Traffic {
                parameter: "rate",
                expected: "a positive, finite number of requests a second",
            });
        }
        if self.duration.is_zero() {
            return Err(SimError::Traffic {
                parameter: "duration",
                expected: "longer than 0",
            });
        }
        let top_rate = match self.pattern {
            Pattern::Constant { rate }
            | Pattern::Poisson { rate }
            | Pattern::OnOff { rate, .. } => rate,
            Pattern::Ramp { from, to } => from.max(to),
        };
        // Refused before drawing: a run that would make too many requests.
        if top_rate * self.duration.as_secs_f64() > MAX_ARRIVALS as f64 {
            return Err(SimError::Traffic {
                parameter: "rate × duration",
                expected: "at most 50,000,000 requests",
            });
        }
        if self.cost == 0 {
            return Err(SimError::Traffic {
                parameter: "cost",
                expected: "at least 1",
            });
        }
        if let Keys::Zipf { n, exponent } = self.keys {
            if n == 0 {
                return Err(SimError::Traffic {
                    parameter: "keys",
                    expected: "at least 1",
                });
            }
            if !(exponent.is_finite() && exponent >= 0.0) {
                return Err(SimError::Traffic {
                    parameter: "zipf",
                    expected: "a finite, non-negative exponent",
                });
            }
        }
        Ok(())
    }
}

/// Draws keys: the Zipf weights' running sums, searched.
struct KeyPicker {
    cumulative: Vec<f64>,
}

impl KeyPicker {
    fn new(keys: Keys) -> KeyPicker {
        let cumulative = match keys {
            Keys::One => Vec::new(),
            Keys::Zipf { n, exponent } => {
                let mut sum = 0.0;
                (1..=n)
                    .map(|k| {
                        sum += 1.0 / f64::from(k).powf(exponent);
                        sum
                    })
                    .collect()
            }
        };
        KeyPicker { cumulative }
    }

    fn pick(&self, rng: &mut ChaCha8Rng) -> u32 {
        let Some(&total) = self.cumulative.last() else {
            return 0;
        };
        let u = uniform(rng) * total;
        let k = self.cumulative.partition_point(|&c| c <= u);
        u32::try_from(k.min(self.cumulative.len() - 1)).unwrap_or(0)
    }
}

/// A uniform draw in [0, 1): the top 53 bits of one output.
fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An exponential gap of mean `1 / rate`.
fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> f64 {
    -(1.0 - uniform(rng)).ln() / rate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(pattern: Pattern) -> Traffic {
        Traffic {
            pattern,
            keys: Keys::One,
            cost: 1,
            duration: Duration::from_secs(100),
        }
    }

    #[test]
    fn poisson_has_its_rate_and_a_seed_replays() {
        let t = traffic(Pattern::Poisson { rate: 50.0 });
        let a = t.arrivals(1).unwrap();
        assert!((4_500..5_500).contains(&a.len()), "{}", a.len());
        assert_eq!(a, t.arrivals(1).unwrap());
        assert_ne!(a, t.arrivals(2).unwrap());
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
    }

    #[test]
    fn on_off_is_silent_in_its_pauses() {
        let t = traffic(Pattern::OnOff {
            rate: 100.0,
            on: Duration::from_secs(1),
            off: Duration::from_secs(4),
        });
        let a = t.arrivals(3).unwrap();
        assert!(a.iter().all(|r| r.at.as_secs_f64() % 5.0 < 1.0));
        assert!((1_700..2_300).contains(&a.len()), "{}", a.len());
    }

    #[test]
    fn a_ramp_grows() {
        let t = traffic(Pattern::Ramp {
            from: 0.0,
            to: 100.0,
        });
        let a = t.arrivals(4).unwrap();
        let first = a.iter().filter(|r| r.at < Duration::from_secs(50)).count();
        let second = a.len() - first;
        assert!(second > 2 * first, "{first} then {second}");
    }

    #[test]
    fn zipf_favours_the_first_keys() {
        let mut t = traffic(Pattern::Constant { rate: 100.0 });
        t.keys = Keys::Zipf {
            n: 100,
            exponent: 1.0,
        };
        let a = t.arrivals(5).unwrap();
        let count = |k| a.iter().filter(|r| r.key == k).count();
        assert!(count(0) > 5 * count(20), "{} {}", count(0), count(20));
        assert!(a.iter().all(|r| r.key < 100));
    }

    #[test]
    fn bad_traffic_is_refused() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = traffic(Pattern::Poisson { rate }).arrivals(0).unwrap_err();
            assert!(
                matches!(
                    err,
                    SimError::Traffic {
                        parameter: "rate",
                        ..
                    }
                ),
                "{rate}"
            );
        }
        let mut t = traffic(Pattern::Constant { rate: 1.0 });
        t.duration = Duration::ZERO;
        assert!(t.arrivals(0).is_err());
        t.duration = Duration::from_secs(1);
        t.cost = 0;
        assert!(t.arrivals(0).is_err());
        t.cost = 1;
        t.keys = Keys::Zipf {
            n: 0,
            exponent: 1.0,
        };
        assert!(t.arrivals(0).is_err());
        let huge = Traffic {
            duration: Duration::from_secs(3_000_000_000),
            ..traffic(Pattern::Constant { rate: 1e9 })
        };
        assert!(huge.arrivals(0).is_err(), "bounded, not an out-of-memory");
    }
}
