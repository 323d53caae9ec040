//! The random jitter of RTT probes, from a seed: upstream draws it from
//! `ThreadLocalRandom`; a seed makes a run reproducible.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// SplitMix64: small, fast, and good enough to spread probes apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Jitter {
    state: u64,
}

impl Jitter {
    /// A generator from `seed`, or from the process's random hash keys.
    pub(crate) fn new(seed: Option<u64>) -> Jitter {
        let state = seed.unwrap_or_else(|| RandomState::new().build_hasher().finish());
        Jitter { state }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0.5, 1)`, as `nextDouble(0.5, 1)`.
    pub(crate) fn half_to_one(&mut self) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        0.5 + 0.5 * unit
    }

    /// Uniform in `[0, n)` (0 for `n = 0`), as `nextInt(n)`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_range_and_follow_the_seed() {
        let mut a = Jitter::new(Some(7));
        let mut b = Jitter::new(Some(7));
        for _ in 0..1000 {
            let x = a.half_to_one();
            assert!((0.5..1.0).contains(&x));
            assert_eq!(x, b.half_to_one());
            assert!(a.below(10) < 10);
            b.below(10);
        }
        assert_eq!(a.below(0), 0);
        assert_eq!(a.below(1), 0);
    }
}
