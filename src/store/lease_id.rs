//! Lease ids: the one way the crate names a lease it takes in Redis, for the fleet
//! shedder's slots (`shed::RedisUsage`) and the quota slices of
//! [`LeaseLimiter`](super::LeaseLimiter) alike.
//!
//! Ids are drawn in the process, never counted in Redis: a counter in Redis would
//! start again from 1 after a restart without persistence, and a lease from before
//! the restart would then name, give back or renew one taken after it. A random
//! 64-bit id names nothing in the new data set, with odds of about 2^-64 per live
//! lease; the scripts refuse a take under a live lease's id, and the caller draws
//! another.

use std::hash::{BuildHasher, RandomState};

use crate::sync::unmodeled::{AtomicU64, OnceLock, Ordering};

/// Ids drawn for one take before giving up: more than one draw meeting a live
/// lease's id in a row means something else is wrong.
pub(crate) const TAKE_ATTEMPTS: usize = 3;

/// A new lease id: splitmix64 over a count from a random start, so distinct for
/// every lease of this process (the mix is a bijection), random across processes;
/// the process id keeps a forked child off its parent's sequence.
///
/// Public for leases kept outside the crate by the same rules (the rate limit
/// service's quota leases): never counted in Redis, so an id survives a Redis restart
/// without being reused.
///
/// # Examples
///
/// ```
/// let (a, b) = (tollgate::store::lease_id(), tollgate::store::lease_id());
/// assert_ne!(a, b);
/// ```
pub fn lease_id() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        // std seeds each RandomState's keys from the operating system's randomness.
        RandomState::new().hash_one(std::process::id())
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    spread(seed.wrapping_add(n.wrapping_mul(GOLDEN_GAMMA))) ^ spread(u64::from(std::process::id()))
}

/// splitmix64's increment: odd, so `n × GOLDEN_GAMMA` takes 2^64 values.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finaliser, a bijection of `u64`.
fn spread(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ids_of_one_process_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            assert!(seen.insert(lease_id()));
        }
        // The count's first values, mixed, differ in about half their bits.
        let (a, b) = (spread(0), spread(GOLDEN_GAMMA));
        assert!((a ^ b).count_ones() > 16, "{a:x} {b:x}");
    }
}
