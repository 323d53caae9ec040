//! Guava's limiters: `{stable interval µs, max permits, capacity}` for SmoothBursty,
//! followed by `{threshold permits, slope, cool-down µs}` for SmoothWarmingUp.
//!
//! The doubles are computed here by the formulas of `src/algorithm/smooth/` in their
//! operation order, so they are the very doubles the Rust limiter uses, and `Arg::Float`
//! carries them to the script unchanged. Since the script then repeats Rust's
//! arithmetic step by step, any stable interval works, whole microseconds or not.
//!
//! What the script cannot count exactly is a maximum of stored permits that takes
//! more than 2^52 µs (about 142 years) to store: the time until full would leave the
//! integers a double holds; such limiters are refused. Left over: the Rust capacity
//! lets one request cost up to 2^53 µs (285 years), so a request whose cost, plus the
//! debt before it and the time to store the maximum, passes 2^53 µs may be answered
//! 1 µs off. No configuration avoids that; realistic requests never come near it.

use super::{whole_micros, Arg, MAX_SCRIPT_MICROS};
use crate::algorithm::{Algorithm, SmoothBursty, SmoothWarmingUp};
use crate::error::ConfigError;

/// Microseconds per second, as `Rate::new` divides it.
const MICROS_PER_SECOND: f64 = 1_000_000.0;

pub(super) fn args_bursty(rule: &SmoothBursty) -> Result<Vec<Arg>, ConfigError> {
    let stable_us = MICROS_PER_SECOND / rule.rate();
    let max_permits = rule.max_permits();
    // A bursty limiter stores one permit per stable interval.
    fits_refill(max_permits * stable_us, "max_burst_seconds")?;
    Ok(vec![
        Arg::Float(stable_us),
        Arg::Float(max_permits),
        Arg::Int(rule.capacity()),
    ])
}

pub(super) fn args_warming_up(rule: &SmoothWarmingUp) -> Result<Vec<Arg>, ConfigError> {
    let stable_us = MICROS_PER_SECOND / rule.rate();
    let warmup_us = whole_micros(rule.warmup(), "warmup")?;
    let shape = WarmingUpShape::new(stable_us, warmup_us, rule.cold_factor());
    fits_refill(shape.max_permits * shape.cool_down_us, "warmup")?;
    Ok(vec![
        Arg::Float(stable_us),
        Arg::Float(shape.max_permits),
        Arg::Int(rule.capacity()),
        Arg::Float(shape.threshold_permits),
        Arg::Float(shape.slope),
        Arg::Float(shape.cool_down_us),
    ])
}

/// The time to store the maximum, in µs, must stay an exact integer in the script.
fn fits_refill(refill_us: f64, parameter: &'static str) -> Result<(), ConfigError> {
    if refill_us <= MAX_SCRIPT_MICROS as f64 {
        Ok(())
    } else {
        Err(ConfigError::Overflow { parameter })
    }
}

/// `WarmingUp::new` of `src/algorithm/smooth/warming_up.rs`, whose fields are private.
#[derive(Debug, PartialEq)]
struct WarmingUpShape {
    threshold_permits: f64,
    max_permits: f64,
    slope: f64,
    /// 0 without warm-up, where Rust's is infinite: nothing is ever stored, so the
    /// script never uses it.
    cool_down_us: f64,
}

impl WarmingUpShape {
    fn new(stable_us: f64, warmup_us: u64, cold_factor: f64) -> WarmingUpShape {
        if warmup_us == 0 {
            return WarmingUpShape {
                threshold_permits: 0.0,
                max_permits: 0.0,
                slope: 0.0,
                cool_down_us: 0.0,
            };
        }
        // Exact: the warm-up is at most 2^52 µs.
        let warmup = warmup_us as f64;
        let cold_interval = stable_us * cold_factor;
        let threshold = 0.5 * warmup / stable_us;
        let max = threshold + 2.0 * warmup / (stable_us + cold_interval);
        let slope = (cold_interval - stable_us) / (max - threshold);
        WarmingUpShape {
            threshold_permits: threshold,
            max_permits: max,
            slope,
            cool_down_us: warmup / max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn floats(args: &[Arg]) -> Vec<f64> {
        args.iter()
            .map(|a| match *a {
                Arg::Float(v) => v,
                Arg::Int(v) => v as f64,
            })
            .collect()
    }

    #[test]
    fn bursty_sends_interval_maximum_and_capacity() {
        let bursty = SmoothBursty::with_max_burst_seconds(4.0, 2.5).unwrap();
        assert_eq!(
            args_bursty(&bursty),
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
        let sent = floats(&args_bursty(&bursty).unwrap())[0];
        assert_eq!(sent.to_bits(), (1e6f64 / 3.0).to_bits());
        let text = Arg::Float(sent).to_text();
        assert_eq!(text.parse::<f64>().unwrap().to_bits(), sent.to_bits());
        assert_eq!(
            bursty.stable_interval(),
            Duration::from_secs_f64(sent / 1e6)
        );
    }

    #[test]
    fn warming_up_sends_guavas_shape() {
        // Guava's testWarmUp: 2 per second, 4 s, cold factor 3.
        let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        assert_eq!(
            args_warming_up(&warm),
            Ok(vec![
                Arg::Float(500_000.0),
                Arg::Float(8.0),
                Arg::Int(warm.capacity()),
                Arg::Float(4.0),
                Arg::Float(250_000.0),
                Arg::Float(500_000.0),
            ])
        );
    }

    #[test]
    fn warming_up_maximum_is_the_rust_limiters_to_the_bit() {
        for rate in [
            0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 33.0, 1000.0, 1e6,
        ] {
            for warmup_ms in [1, 7, 250, 1000, 4000, 12_345, 86_400_000] {
                for cold_factor in [1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 1e6] {
                    let warmup = Duration::from_millis(warmup_ms);
                    let warm =
                        SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap();
                    let sent = floats(&args_warming_up(&warm).unwrap());
                    assert_eq!(
                        sent[1].to_bits(),
                        warm.max_permits().to_bits(),
                        "{rate}/s, {warmup_ms} ms, cold factor {cold_factor}"
                    );
                    assert!(sent.iter().all(|v| v.is_finite()));
                }
            }
        }
    }

    #[test]
    fn no_warm_up_stores_nothing() {
        let warm = SmoothWarmingUp::new(5.0, Duration::ZERO).unwrap();
        assert_eq!(
            floats(&args_warming_up(&warm).unwrap()),
            [200_000.0, 0.0, warm.capacity() as f64, 0.0, 0.0, 0.0]
        );
    }

    #[test]
    fn maxima_the_script_cannot_refill_exactly_are_rejected() {
        let years = 150.0 * 365.0 * 86_400.0;
        let bursty = SmoothBursty::with_max_burst_seconds(10.0, years).unwrap();
        assert_eq!(
            args_bursty(&bursty),
            Err(ConfigError::Overflow {
                parameter: "max_burst_seconds"
            })
        );
        let bursty = SmoothBursty::with_max_burst_seconds(10.0, years / 2.0).unwrap();
        assert!(args_bursty(&bursty).is_ok());

        let warm = SmoothWarmingUp::new(1.0, Duration::from_secs_f64(years)).unwrap();
        assert_eq!(
            args_warming_up(&warm),
            Err(super::super::too_long("warmup", MAX_SCRIPT_MICROS))
        );
        let warm = SmoothWarmingUp::new(1.0, Duration::from_secs_f64(years / 2.0)).unwrap();
        assert!(args_warming_up(&warm).is_ok());
    }
}
