//! [`XorShift`]: the small seedable generator behind the SRE throttle's draws, so
//! that a seed replays the same rejections and no dependency is needed.

/// xorshift64* (Vigna): fast, 64 bits of state, good enough to draw rejections;
/// not for secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct XorShift(u64);

impl XorShift {
    /// A generator from any seed, zero included: splitmix64 spreads it first.
    pub(crate) fn new(seed: u64) -> XorShift {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // xorshift is stuck at zero.
        XorShift(if z == 0 { 0x2545_f491_4f6c_dd1d } else { z })
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A draw in [0, 1), on a grid of 2⁻⁵³.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_in_range_and_replay_from_a_seed() {
        let mut a = XorShift::new(0);
        let mut b = XorShift::new(0);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        // Roughly uniform: the mean of 10⁴ draws is within 0.02 of a half.
        assert!((sum / 10_000.0 - 0.5).abs() < 0.02);
        assert_ne!(XorShift::new(1), XorShift::new(2));
    }
}
