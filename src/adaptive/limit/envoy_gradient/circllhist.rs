//! The part of libcircllhist that Envoy's gradient controller uses: log-linear bins of
//! two significant digits, and the Type-1 quantile estimate inside a bin.
//!
//! Envoy aggregates latencies (in whole microseconds) in a circllhist and reads one
//! quantile with `hist_approx_quantile`; the controller's numbers depend on both the
//! binning and the estimate, so this is a port of those two functions as
//! libcircllhist 0.3.2 (the version Envoy builds with) computes them, in the same
//! `f64` operations. A value `x ≥ 1` falls in the bin `[v/10 × 10^e, (v+1)/10 × 10^e)`
//! with `e = ⌊log10 x⌋` and `v` in `10..=99`: 5 000 µs and 5 099 µs share a bin
//! 100 µs wide. Zero has a bin of its own, of width zero.

use std::collections::BTreeMap;

/// `10^e` as libcircllhist's `power_of_ten` table writes it, for every `e` a `u64`
/// value can reach (and one past, for the roll-over from 99 to 10).
const POWER_OF_TEN: [f64; 21] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20,
];

/// The largest exponent [`POWER_OF_TEN`] holds.
const MAX_EXP: usize = POWER_OF_TEN.len() - 1;

/// One bin: `val` is the two significant digits (0 for the zero bin), `exp` the
/// decimal exponent. Ordered as the values they hold (the zero bin first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Bin {
    exp: u8,
    val: u8,
}

impl Bin {
    const ZERO: Bin = Bin { exp: 0, val: 0 };

    /// The bin of `x`, a non-negative whole number (`double_to_hist_bucket`).
    fn of(x: f64) -> Bin {
        if x.is_nan() || x <= 0.0 {
            return Bin::ZERO;
        }
        let mut exp = (x.log10().floor() as usize).min(MAX_EXP);
        let mut val = (x / POWER_OF_TEN[exp] * 10.0 + 1e-13).floor() as u64;
        if val >= 100 {
            // log10 rounded down at a power of ten: 100 × 10^e is 10 × 10^(e+1).
            val /= 10;
            exp = (exp + 1).min(MAX_EXP);
        }
        if val < 10 && exp > 0 {
            // log10 rounded up just below a power of ten (only past 10^15 µs, 31
            // years). libcircllhist files such a value in a NaN bin that quantiles
            // skip; it belongs one decade down.
            exp -= 1;
            val = (x / POWER_OF_TEN[exp] * 10.0 + 1e-13).floor() as u64;
        }
        Bin {
            exp: exp as u8,
            val: val.clamp(10, 99) as u8,
        }
    }

    /// The bin's lower bound (`hist_bucket_left`).
    fn left(self) -> f64 {
        if self.val == 0 {
            0.0
        } else {
            (f64::from(self.val) / 10.0) * POWER_OF_TEN[usize::from(self.exp)]
        }
    }

    /// The bin's width (`hist_bucket_to_double_bin_width`).
    fn width(self) -> f64 {
        if self.val == 0 {
            0.0
        } else {
            POWER_OF_TEN[usize::from(self.exp)] / 10.0
        }
    }
}

/// Counts of values per bin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Histogram {
    bins: BTreeMap<Bin, u64>,
}

impl Histogram {
    /// Counts one value (`hist_insert`).
    pub(super) fn insert(&mut self, value: u64) {
        let count = self.bins.entry(Bin::of(value as f64)).or_insert(0);
        *count = count.saturating_add(1);
    }

    /// How many values are counted (`hist_sample_count`).
    pub(super) fn count(&self) -> u64 {
        self.bins
            .values()
            .fold(0u64, |total, &count| total.saturating_add(count))
    }

    /// Forgets every value (`hist_clear`).
    pub(super) fn clear(&mut self) {
        self.bins.clear();
    }

    /// The `q`-quantile (`q` in `[0, 1]`) as `hist_approx_quantile` estimates it: the
    /// bin holding the `⌈q·N⌉`-th value, and in it, the expected place of its `k`-th
    /// of `n` values spread uniformly, `left + k/(n+1) × width`. NaN when empty.
    pub(super) fn quantile(&self, q: f64) -> f64 {
        let total: f64 = self.bins.values().map(|&count| count as f64).sum();
        if total == 0.0 {
            return f64::NAN;
        }
        let qn = total * q;
        let mut bins = self.bins.iter();
        let Some((&first, &first_count)) = bins.next() else {
            return f64::NAN;
        };
        let (mut bin, mut count) = (first, first_count);
        let mut lower = 0.0;
        let mut upper = count as f64;
        while upper < qn {
            let Some((&next, &next_count)) = bins.next() else {
                break;
            };
            (bin, count) = (next, next_count);
            lower = upper;
            upper = lower + count as f64;
        }
        let width = bin.width();
        if width == 0.0 {
            return bin.left();
        }
        let n_plus_one = count.saturating_add(1) as f64;
        let k = if qn == lower {
            1.0
        } else {
            (qn - lower).ceil()
        };
        bin.left() + k / n_plus_one * width
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram {
        let mut h = Histogram::default();
        for &v in values {
            h.insert(v);
        }
        h
    }

    #[test]
    fn bins_keep_two_significant_digits() {
        assert_eq!(Bin::of(0.0), Bin::ZERO);
        assert_eq!(Bin::of(5.0), Bin { exp: 0, val: 50 });
        assert_eq!(Bin::of(5_000.0), Bin { exp: 3, val: 50 });
        assert_eq!(Bin::of(5_099.0), Bin { exp: 3, val: 50 });
        assert_eq!(Bin::of(13_000.0), Bin { exp: 4, val: 13 });
        assert_eq!(Bin::of(1_000.0), Bin { exp: 3, val: 10 });
        assert_eq!(Bin::of(999.0), Bin { exp: 2, val: 99 });
        assert_eq!(Bin { exp: 3, val: 50 }.left(), 5_000.0);
        assert_eq!(Bin { exp: 3, val: 50 }.width(), 100.0);
    }

    #[test]
    fn extreme_values_have_bins() {
        assert_eq!(Bin::of(u64::MAX as f64), Bin { exp: 19, val: 18 });
        assert_eq!(Bin::of(f64::INFINITY).exp, 20);
        assert_eq!(Bin::of(f64::NAN), Bin::ZERO);
        // Just below 10^15: libcircllhist's rounding margin (1e-13) lifts it into
        // the next decade's first bin, and so does this port.
        assert_eq!(Bin::of(999_999_999_999_999.0), Bin { exp: 15, val: 10 });
    }

    #[test]
    fn quantile_is_type_1_with_the_expected_place_in_the_bin() {
        // One value: the middle of its bin.
        assert_eq!(histogram(&[5_000]).quantile(0.5), 5_050.0);
        // Five equal values, the median is the third of five: 3/6 of the width.
        assert_eq!(histogram(&[5_000; 5]).quantile(0.5), 5_050.0);
        // 1..=5 ms, one per bin: the third bin, alone in it.
        assert_eq!(
            histogram(&[1_000, 2_000, 3_000, 4_000, 5_000]).quantile(0.5),
            3_050.0
        );
        // 50 × 13 ms: the 25th of 50 in [13 000, 14 000).
        assert_eq!(
            histogram(&[13_000; 50]).quantile(0.5).trunc(),
            13_490.0,
            "13 000 + 25/51 × 1 000"
        );
        // q = 0: the first value of the first bin.
        assert_eq!(
            histogram(&[4_000, 4_000, 9_000]).quantile(0.0),
            4_000.0 + 1.0 / 3.0 * 100.0
        );
        // q = 1: the last value of the last bin.
        assert_eq!(histogram(&[4_000, 9_000]).quantile(1.0), 9_050.0);
        // Zero latencies sit in the zero bin.
        assert_eq!(histogram(&[0, 0]).quantile(0.5), 0.0);
    }

    #[test]
    fn empty_histogram_has_no_quantile() {
        let mut h = histogram(&[1, 2, 3]);
        assert_eq!(h.count(), 3);
        h.clear();
        assert_eq!(h.count(), 0);
        assert!(h.quantile(0.5).is_nan());
    }
}
