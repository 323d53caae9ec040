//! One bucket's limit shared by the replicas of the service: each replica's lease,
//! its want and its grant, and how a grant is decided. Pure: the Rust reference of
//! `lease.lua`, which decides the same way in Redis (a differential test holds the
//! two together).
//!
//! A replica's **want** is what its Envoys of the bucket ask for, in tokens per unit:
//! the sum of their demands with headroom ([`share::HEADROOM`](super::share::HEADROOM),
//! at least a token each), or [`Want::Unbounded`] while one of them is not yet
//! measured. Its **target** is its max-min fair share of the limit on the wants of
//! every live lease, every token handed out ([`targets`]). Its **grant** is its target
//! cut to what the other live leases leave: the grants of live leases never add up to
//! more than the limit ([`Ledger::sync`]).

use std::collections::BTreeMap;

/// The largest limit, want or grant the ledger counts: 2^52, where Lua's doubles
/// still hold every integer and the products the script checks. A limit above it is
/// counted as it (far more than Envoy's `u32` token buckets hold).
pub const MAX_TOKENS: u64 = 1 << 52;

/// What a replica's Envoys of a bucket ask for, in tokens per unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Want {
    /// At most this many (counted up to [`MAX_TOKENS`]).
    Tokens(u64),
    /// Everything: an Envoy not yet measured.
    Unbounded,
}

impl Want {
    /// The want as the script reads it: the integer, or `inf`.
    pub fn to_arg(self) -> String {
        match self {
            Want::Tokens(n) => n.min(MAX_TOKENS).to_string(),
            Want::Unbounded => "inf".into(),
        }
    }

    /// The want the script wrote, if it is one.
    pub fn from_arg(arg: &str) -> Option<Want> {
        match arg {
            "inf" => Some(Want::Unbounded),
            n => n.parse().ok().map(|n: u64| Want::Tokens(n.min(MAX_TOKENS))),
        }
    }

    /// Sort key: unbounded above every count.
    fn key(self) -> u64 {
        match self {
            Want::Tokens(n) => n.min(MAX_TOKENS),
            Want::Unbounded => u64::MAX,
        }
    }
}

/// Each live lease's target, in the order of `leases` ((id, want) pairs): max-min
/// fair on the wants, every token of `limit` handed out.
///
/// Integers only, so that the script computes the same: leases are taken by want,
/// then id, ascending; each is given its want or an equal share of what is left,
/// whichever is less (the floor: the later of equal wants get the remainder); what
/// no one asked for is then shared equally, the remainder one token each to the
/// first in that order.
///
/// # Examples
///
/// ```
/// use tollgate_rls::quota::fleet::{Want, targets};
///
/// // Nobody measured: an equal split, the remainder to the later of equals.
/// assert_eq!(targets(10, &[(1, Want::Unbounded), (2, Want::Unbounded), (3, Want::Unbounded)]), vec![3, 3, 4]);
/// // One asks for 15: it gets 15, the other the rest.
/// assert_eq!(targets(100, &[(1, Want::Tokens(15)), (2, Want::Unbounded)]), vec![15, 85]);
/// // Both ask for little: what is left is shared equally.
/// assert_eq!(targets(100, &[(1, Want::Tokens(10)), (2, Want::Tokens(20))]), vec![45, 55]);
/// ```
pub fn targets(limit: u64, leases: &[(u64, Want)]) -> Vec<u64> {
    let limit = limit.min(MAX_TOKENS);
    let n = leases.len() as u64;
    let mut order: Vec<usize> = (0..leases.len()).collect();
    order.sort_by_key(|&i| (leases[i].1.key(), leases[i].0));
    let mut given = vec![0; leases.len()];
    let mut left = limit;
    for (k, &i) in order.iter().enumerate() {
        let fair = left / (n - k as u64);
        given[i] = leases[i].1.key().min(fair);
        left -= given[i];
    }
    if left > 0 && n > 0 {
        let (each, extra) = (left / n, left % n);
        for (k, &i) in order.iter().enumerate() {
            given[i] += each + u64::from((k as u64) < extra);
        }
    }
    given
}

/// One lease's record in a bucket's ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What the replica asked for at its last call.
    pub want: Want,
    /// What it was granted then, and may hand out until its next call.
    pub granted: u64,
    /// When the record goes, in the ledger's milliseconds.
    pub expires: u64,
}

/// What a call of [`Ledger::sync`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synced {
    /// What the replica may hand out until its next call.
    pub granted: u64,
    /// Its fair share: more than `granted` while others still hold more than theirs.
    pub target: u64,
    /// Live leases, its own included.
    pub live: u64,
}

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdInUse;

/// One bucket's ledger, as `lease.lua` keeps it in a Redis hash: the live leases by
/// id.
///
/// # Examples
///
/// ```
/// use tollgate_rls::quota::fleet::{Ledger, Want};
///
/// let mut ledger = Ledger::default();
/// // The first replica is alone: the whole limit.
/// assert_eq!(ledger.sync(0, 1, true, 100, Want::Unbounded, 15_000).unwrap().granted, 100);
/// // A second one: its target is half, but the first holds everything until its next call.
/// let second = ledger.sync(0, 2, true, 100, Want::Unbounded, 15_000).unwrap();
/// assert_eq!((second.granted, second.target), (0, 50));
/// // The first calls again and keeps half; then the second gets the other half.
/// assert_eq!(ledger.sync(1, 1, false, 100, Want::Unbounded, 15_000).unwrap().granted, 50);
/// assert_eq!(ledger.sync(2, 2, false, 100, Want::Unbounded, 15_000).unwrap().granted, 50);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The records by lease id.
    pub entries: BTreeMap<u64, Entry>,
}

impl Ledger {
    /// Lease `id` asks for `want` of `limit` at `now` (milliseconds), its record
    /// living `ttl` more: expired records go first; the lease is granted its target,
    /// cut to what the other live leases' grants leave, and its record written.
    ///
    /// `take` is a new lease's first call.
    ///
    /// # Errors
    ///
    /// [`IdInUse`] when `take` names a live lease (the caller draws another id).
    pub fn sync(
        &mut self,
        now: u64,
        id: u64,
        take: bool,
        limit: u64,
        want: Want,
        ttl: u64,
    ) -> Result<Synced, IdInUse> {
        self.entries.retain(|_, e| e.expires > now);
        if take && self.entries.contains_key(&id) {
            return Err(IdInUse);
        }
        let limit = limit.min(MAX_TOKENS);
        let mut leases: Vec<(u64, Want)> = self
            .entries
            .iter()
            .filter(|(other, _)| **other != id)
            .map(|(other, e)| (*other, e.want))
            .collect();
        let held: u64 = self
            .entries
            .iter()
            .filter(|(other, _)| **other != id)
            .map(|(_, e)| e.granted)
            .sum();
        leases.push((id, want));
        let target = *targets(limit, &leases).last().unwrap_or(&0);
        let granted = target.min(limit.saturating_sub(held));
        self.entries.insert(
            id,
            Entry {
                want,
                granted,
                expires: now.saturating_add(ttl),
            },
        );
        Ok(Synced {
            granted,
            target,
            live: leases.len() as u64,
        })
    }

    /// Lease `id` is given back: whether it was live.
    pub fn give_back(&mut self, id: u64) -> bool {
        self.entries.remove(&id).is_some()
    }

    /// The grants of the records, expired ones included.
    pub fn granted(&self) -> u64 {
        self.entries.values().map(|e| e.granted).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: u64 = 15_000;
    const ALL: Want = Want::Unbounded;

    #[test]
    fn targets_hand_out_every_token_fairly() {
        assert!(targets(100, &[]).is_empty());
        assert_eq!(targets(100, &[(7, ALL)]), vec![100]);
        assert_eq!(targets(100, &[(7, Want::Tokens(3))]), vec![100]);
        assert_eq!(targets(0, &[(1, ALL), (2, Want::Tokens(5))]), vec![0, 0]);
        // Wants of zero still share what nobody asked for.
        assert_eq!(
            targets(10, &[(1, Want::Tokens(0)), (2, Want::Tokens(0))]),
            vec![5, 5]
        );
        // Ties go by id, whatever the order given.
        assert_eq!(targets(3, &[(9, ALL), (2, ALL)]), vec![2, 1]);
        assert_eq!(targets(3, &[(2, ALL), (9, ALL)]), vec![1, 2]);
        // Extremes: counted up to 2^52, every token handed out.
        assert_eq!(targets(u64::MAX, &[(1, ALL)]), vec![MAX_TOKENS]);
        assert_eq!(
            targets(u64::MAX, &[(1, Want::Tokens(u64::MAX)), (2, ALL)]),
            vec![MAX_TOKENS / 2; 2]
        );
        for limit in [0, 1, 2, 7, 100, 1_000_003, MAX_TOKENS, u64::MAX] {
            let leases: Vec<(u64, Want)> = (0..9)
                .map(|i| (i, if i % 3 == 0 { ALL } else { Want::Tokens(i * i) }))
                .collect();
            let t = targets(limit, &leases);
            assert_eq!(t.iter().sum::<u64>(), limit.min(MAX_TOKENS), "{limit}");
        }
    }

    #[test]
    fn one_replica_has_the_whole_limit() {
        let mut ledger = Ledger::default();
        let s = ledger.sync(0, 1, true, 20, Want::Tokens(3), TTL).unwrap();
        assert_eq!((s.granted, s.target, s.live), (20, 20, 1));
        // Its own record does not hold it back when it calls again.
        let s = ledger.sync(5, 1, false, 20, ALL, TTL).unwrap();
        assert_eq!((s.granted, s.live), (20, 1));
        // A take under a live id is refused; a give back frees the id.
        assert_eq!(ledger.sync(6, 1, true, 20, ALL, TTL), Err(IdInUse));
        assert!(ledger.give_back(1));
        assert!(!ledger.give_back(1));
        assert!(ledger.entries.is_empty());
    }

    #[test]
    fn many_replicas_follow_their_wants_and_never_hold_more_than_the_limit() {
        let mut ledger = Ledger::default();
        for id in 1..=4 {
            ledger.sync(0, id, true, 100, ALL, TTL).unwrap();
            assert!(ledger.granted() <= 100);
        }
        // The first holds everything until it calls again.
        assert_eq!(ledger.entries[&1].granted, 100);
        assert_eq!(ledger.sync(1, 1, false, 100, ALL, TTL).unwrap().granted, 25);
        for id in 2..=4 {
            assert_eq!(
                ledger.sync(1, id, false, 100, ALL, TTL).unwrap().granted,
                25
            );
        }
        // Replica 1 wants 10: it keeps 10, and the others share the rest once they call.
        assert_eq!(
            ledger
                .sync(2, 1, false, 100, Want::Tokens(10), TTL)
                .unwrap()
                .granted,
            10
        );
        let shares: Vec<u64> = (2..=4)
            .map(|id| ledger.sync(3, id, false, 100, ALL, TTL).unwrap().granted)
            .collect();
        assert_eq!(shares, vec![30, 30, 30]);
        assert_eq!(ledger.granted(), 100);
    }

    #[test]
    fn expired_records_are_dropped_and_their_grants_freed() {
        let mut ledger = Ledger::default();
        ledger.sync(0, 1, true, 100, ALL, 1_000).unwrap();
        let s = ledger.sync(10, 2, true, 100, ALL, TTL).unwrap();
        assert_eq!((s.granted, s.live), (0, 2));
        // The first stops calling: after its record's time, the second has it all.
        let s = ledger.sync(1_000, 2, false, 100, ALL, TTL).unwrap();
        assert_eq!((s.granted, s.target, s.live), (100, 100, 1));
        assert!(!ledger.entries.contains_key(&1));
        // An expired id may be taken again.
        assert!(ledger.sync(20_000, 1, true, 100, ALL, TTL).is_ok());
    }

    #[test]
    fn a_limit_of_zero_grants_nothing_and_a_lower_limit_caps_new_grants() {
        let mut ledger = Ledger::default();
        let s = ledger.sync(0, 1, true, 0, ALL, TTL).unwrap();
        assert_eq!((s.granted, s.target), (0, 0));
        let mut ledger = Ledger::default();
        ledger.sync(0, 1, true, 100, ALL, TTL).unwrap();
        // The limit drops to 40 (a reload): the second gets nothing while the first
        // holds 100, and the first, calling again, comes down to its share.
        assert_eq!(ledger.sync(1, 2, true, 40, ALL, TTL).unwrap().granted, 0);
        assert_eq!(ledger.sync(2, 1, false, 40, ALL, TTL).unwrap().granted, 20);
        assert_eq!(ledger.sync(3, 2, false, 40, ALL, TTL).unwrap().granted, 20);
    }

    #[test]
    fn grants_of_live_leases_never_add_up_to_more_than_the_limit() {
        // A small generator: any order of calls, wants, give backs and expiries.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for limit in [0, 1, 5, 100, 1 << 40, u64::MAX] {
            let mut ledger = Ledger::default();
            let mut now = 0;
            for _ in 0..2_000 {
                now += next(400);
                let id = next(6);
                if next(10) == 0 {
                    ledger.give_back(id);
                    continue;
                }
                let want = match next(4) {
                    0 => ALL,
                    _ => Want::Tokens(next(limit.clamp(1, 1 << 20) * 2)),
                };
                let _ = ledger.sync(now, id, false, limit, want, 1_000 + next(2_000));
                let live: u64 = ledger
                    .entries
                    .values()
                    .filter(|e| e.expires > now)
                    .map(|e| e.granted)
                    .sum();
                assert!(live <= limit.min(MAX_TOKENS), "{limit}: {ledger:?}");
            }
        }
    }

    #[test]
    fn wants_read_back_as_written() {
        for want in [
            Want::Tokens(0),
            Want::Tokens(17),
            Want::Tokens(MAX_TOKENS),
            ALL,
        ] {
            assert_eq!(Want::from_arg(&want.to_arg()), Some(want));
        }
        assert_eq!(
            Want::from_arg(&Want::Tokens(u64::MAX).to_arg()),
            Some(Want::Tokens(MAX_TOKENS))
        );
        assert_eq!(Want::from_arg("x"), None);
    }
}
