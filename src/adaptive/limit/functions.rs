//! The integer functions of a limit that Netflix's algorithms use for thresholds and
//! queue sizes: `log10_root` (Vegas's α, β and steps) and `square_root` (Gradient's
//! queue size).
//!
//! Upstream looks the values below 1000 up in a table for speed; these compute them,
//! with the same results.

/// `⌊log₁₀ limit⌋`, at least 1: Netflix's `Log10RootIntFunction` (and the deprecated
/// `Log10RootFunction`) with a baseline of 0.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::functions::log10_root;
///
/// assert_eq!(log10_root(0), 1);
/// assert_eq!(log10_root(100), 2);
/// assert_eq!(log10_root(10_000), 4);
/// ```
pub fn log10_root(limit: u64) -> u64 {
    match limit.checked_ilog10() {
        Some(log) => u64::from(log).max(1),
        None => 1,
    }
}

/// `⌊√limit⌋`, at least 1: Netflix's `SquareRootFunction`. Upstream's
/// `SquareRootFunction.create(baseline)` is `square_root(limit).max(baseline)`.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::functions::square_root;
///
/// assert_eq!(square_root(0), 1);
/// assert_eq!(square_root(999), 31);
/// assert_eq!(square_root(u64::MAX), u64::from(u32::MAX));
/// ```
pub fn square_root(limit: u64) -> u64 {
    // The float root is within one of the integer root; step to the exact one.
    let mut root = ((limit as f64).sqrt() as u64).min(u64::from(u32::MAX));
    while root > 0 && root * root > limit {
        root -= 1;
    }
    while root < u64::from(u32::MAX) && (root + 1) * (root + 1) <= limit {
        root += 1;
    }
    root.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Log10RootFunctionTest and Log10RootIntFunctionTest (the same three cases):
    /// test0Index, testInRange, testOutofLookupRange.
    #[test]
    fn log10_root_matches_upstream() {
        assert_eq!(log10_root(0), 1); // test0Index
        assert_eq!(log10_root(100), 2); // testInRange
        assert_eq!(log10_root(10_000), 4); // testOutofLookupRange
    }

    /// SquareRootFunctionTest, with `create(4)`: confirm0Index, confirmMaxIndex,
    /// confirmOutofLookupRange.
    #[test]
    fn square_root_with_baseline_matches_upstream() {
        let create_4 = |limit| square_root(limit).max(4);
        assert_eq!(create_4(0), 4); // confirm0Index
        assert_eq!(create_4(999), 31); // confirmMaxIndex
        assert_eq!(create_4(2500), 50); // confirmOutofLookupRange
    }

    #[test]
    fn table_range_agrees_with_floats() {
        for i in 0..1000u64 {
            assert_eq!(
                log10_root(i),
                ((i as f64).log10() as i64).max(1) as u64,
                "{i}"
            );
            assert_eq!(square_root(i), ((i as f64).sqrt() as u64).max(1), "{i}");
        }
        assert_eq!(log10_root(u64::MAX), 19);
        assert_eq!(square_root(99_999_999_999_999_999), 316_227_766);
    }
}
