//! One bucket's quota split among the Envoys that report it: max-min fair on what
//! each asked for, every token handed out, never more than the limit in all.

/// How much more than its measured demand an Envoy is given while quota remains, so
/// that a growing client does not wait a report period for room.
pub const HEADROOM: f64 = 1.5;

/// The most tokens [`split`] hands out: 2^53.
pub const MAX_SPLIT: u64 = 1 << 53;

/// Splits `limit` tokens among Envoys whose demands (tokens per unit, `None` while
/// not yet known) are `demands`, in the same order.
///
/// Max-min fair: each Envoy is first offered its demand times [`HEADROOM`] (at least
/// one token), the smallest first, none more than an equal share of what is left; what no one asked
/// for is then shared equally; an Envoy whose demand is unknown asks for everything.
/// Shares are whole tokens: the fractions go, one token each, to the largest
/// remainders (ties to the earlier Envoy), so the shares add up to exactly `limit`
/// (and to nothing for no Envoys). The split depends only on its inputs. A limit
/// above [`MAX_SPLIT`] is split as [`MAX_SPLIT`]: far more than a token bucket of
/// Envoy's holds (`u32`), and where `f64` still counts every token.
///
/// # Examples
///
/// ```
/// use tollgate_rls::quota::share::split;
///
/// // Two Envoys not heard from yet: half each.
/// assert_eq!(split(100, &[None, None]), vec![50, 50]);
/// // One asks for 10 a minute: it gets 15 (its demand and headroom), the other the rest.
/// assert_eq!(split(100, &[Some(10.0), None]), vec![15, 85]);
/// // More Envoys than tokens: some get none (they are denied until the next split).
/// assert_eq!(split(2, &[None, None, None]), vec![1, 1, 0]);
/// ```
pub fn split(limit: u64, demands: &[Option<f64>]) -> Vec<u64> {
    let limit = limit.min(MAX_SPLIT);
    let n = demands.len();
    if n == 0 {
        return Vec::new();
    }
    let total = limit as f64;
    let wants: Vec<f64> = demands
        .iter()
        .map(|d| match d {
            // At least a token: an Envoy quiet for a report keeps room for its next request.
            Some(d) if d.is_finite() && *d >= 0.0 => (d * HEADROOM).max(1.0),
            // Unknown, or nonsense from a client: treated as wanting everything.
            _ => f64::INFINITY,
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| wants[a].total_cmp(&wants[b]).then(a.cmp(&b)));
    let mut given = vec![0.0; n];
    let mut left = total;
    for (k, &i) in order.iter().enumerate() {
        let fair = left / (n - k) as f64;
        given[i] = wants[i].min(fair);
        left -= given[i];
    }
    if left > 0.0 {
        for g in &mut given {
            *g += left / n as f64;
        }
    }
    let mut shares: Vec<u64> = given
        .iter()
        .map(|g| (g.floor() as u64).min(limit))
        .collect();
    let mut handed: u64 = shares.iter().sum();
    // Floors of shares adding up to `limit` fall short by fewer than `n` tokens.
    if handed > limit {
        // Rounding above `limit` cannot happen with finite shares; keep the bound anyway.
        shares.iter_mut().for_each(|s| *s = 0);
        handed = 0;
    }
    let mut by_remainder: Vec<usize> = (0..n).collect();
    // Remainders to a billionth: equal shares reached by different sums of floats
    // still tie, and ties go to the earlier Envoy.
    let remainder = |i: usize| ((given[i] - given[i].floor()) * 1e9).round();
    by_remainder.sort_by(|&a, &b| remainder(b).total_cmp(&remainder(a)).then(a.cmp(&b)));
    for &i in by_remainder.iter().cycle().take(n * 2) {
        if handed >= limit {
            break;
        }
        shares[i] += 1;
        handed += 1;
    }
    if handed < limit {
        // Only when the floors fell short by more than `n`, which finite shares never
        // do: the rest goes to the first Envoy, so that no token is stranded.
        shares[0] += limit - handed;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_limit() {
        for limit in [
            0,
            1,
            2,
            3,
            7,
            10,
            99,
            100,
            1_000,
            1_000_000,
            u64::from(u32::MAX),
            MAX_SPLIT,
        ] {
            for demands in [
                vec![None],
                vec![None, None, None],
                vec![Some(0.0), Some(0.0)],
                vec![Some(1.0), None, Some(1e12)],
                vec![Some(f64::NAN), Some(-5.0), Some(f64::INFINITY)],
                vec![Some(3.0); 17],
            ] {
                let shares = split(limit, &demands);
                assert_eq!(shares.len(), demands.len());
                assert_eq!(shares.iter().sum::<u64>(), limit, "{limit} {demands:?}");
            }
        }
        assert!(split(100, &[]).is_empty());
    }

    #[test]
    fn small_demands_get_headroom_and_the_rest_goes_to_the_others() {
        assert_eq!(
            split(100, &[Some(10.0), Some(10.0), None]),
            vec![15, 15, 70]
        );
        // Nobody wants much: what is left is shared equally.
        assert_eq!(split(100, &[Some(10.0), Some(20.0)]), vec![43, 57]);
        // A quiet Envoy keeps a token.
        assert_eq!(split(100, &[Some(0.0), None]), vec![1, 99]);
        // Everybody wants more than there is: equal shares.
        assert_eq!(
            split(90, &[Some(100.0), Some(200.0), None]),
            vec![30, 30, 30]
        );
    }

    #[test]
    fn fractions_go_to_the_largest_remainders() {
        assert_eq!(split(10, &[None, None, None]), vec![4, 3, 3]);
        assert_eq!(split(1, &[None, None]), vec![1, 0]);
        assert_eq!(split(u64::MAX, &[None]), vec![MAX_SPLIT]);
        assert_eq!(split(u64::MAX, &[None, None]), vec![MAX_SPLIT / 2; 2]);
    }

    #[test]
    fn the_split_is_deterministic() {
        let demands = [Some(3.5), None, Some(0.25), Some(7.0), None];
        assert_eq!(split(1_234, &demands), split(1_234, &demands));
    }
}
