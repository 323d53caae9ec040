//! The counts behind a [`Partitions`](super::Partitions): the global limit, in-flight
//! per partition and in total, and the partitions' unused reservations. Pure
//! bookkeeping; the caller holds the lock.

use super::mode::{PartitionMode, Refusal, View};

/// One partition's numbers.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The guaranteed fraction of the limit; 0 for the unknown partition.
    share: f64,
    /// `max(1, ceil(limit × share))` as upstream rounds it; 0 for the unknown partition.
    limit: u64,
    /// Admitted and not yet released.
    busy: u64,
}

impl Slot {
    fn unused(&self) -> u128 {
        u128::from(self.limit.saturating_sub(self.busy))
    }
}

/// A partition's limit under a global `limit`, rounded as Netflix's
/// `Partition.updateLimit` does: `(int) Math.max(1, Math.ceil(totalLimit * percent))`,
/// in the same double arithmetic. The cast saturates, so `u64::MAX` is safe.
pub(super) fn share_limit(limit: u64, share: f64) -> u64 {
    // u64 -> f64 rounds above 2^53; upstream's limits are ints, which convert exactly.
    #[allow(clippy::cast_precision_loss)]
    let product = limit as f64 * share;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rounded = product.ceil().max(1.0) as u64;
    rounded
}

/// The counts, with the unknown partition in the last slot.
#[derive(Debug)]
pub(super) struct State {
    mode: PartitionMode,
    limit: u64,
    in_flight: u64,
    slots: Vec<Slot>,
    /// The sum of every slot's unused reservation, kept so a decision is O(1).
    unused: u128,
}

/// What a successful admission reports.
#[derive(Clone, Copy, Debug)]
pub(super) struct Admission {
    /// Global in-flight right after the admission, this request included.
    pub(super) in_flight: u64,
}

/// What a refusal reports: the reason and the counts it was read from.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rejection {
    pub(super) refusal: Refusal,
    pub(super) limit: u64,
    pub(super) in_flight: u64,
    pub(super) share_limit: u64,
    pub(super) busy: u64,
}

impl State {
    /// Counts for partitions of `shares` (already checked) under `limit` (nonzero).
    pub(super) fn new(mode: PartitionMode, limit: u64, shares: &[f64]) -> State {
        let mut slots: Vec<Slot> = shares
            .iter()
            .map(|&share| Slot {
                share,
                limit: 0,
                busy: 0,
            })
            .collect();
        // Upstream's "unknown" partition: percent 0, limit never updated from 0.
        slots.push(Slot {
            share: 0.0,
            limit: 0,
            busy: 0,
        });
        let mut state = State {
            mode,
            limit,
            in_flight: 0,
            slots,
            unused: 0,
        };
        state.set_limit(limit);
        state
    }

    pub(super) fn mode(&self) -> PartitionMode {
        self.mode
    }

    pub(super) fn limit(&self) -> u64 {
        self.limit
    }

    pub(super) fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The slot index of the unknown partition.
    pub(super) fn unknown(&self) -> usize {
        self.slots.len() - 1
    }

    pub(super) fn busy(&self, slot: usize) -> u64 {
        self.slots[slot].busy
    }

    pub(super) fn share_limit(&self, slot: usize) -> u64 {
        self.slots[slot].limit
    }

    /// The most in flight that admissions can reach while the limit stays as it is.
    pub(super) fn in_flight_bound(&self) -> u64 {
        match self.mode {
            PartitionMode::Strict => self.limit,
            // The last moment in-flight was below the limit, at most `limit` were in
            // flight; after it, each partition is admitted only below its own limit.
            PartitionMode::NetflixCompatible => self
                .slots
                .iter()
                .fold(self.limit, |sum, slot| sum.saturating_add(slot.limit)),
        }
    }

    /// Changes the global limit and every named partition's limit with it.
    pub(super) fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
        let unknown = self.unknown();
        for slot in &mut self.slots[..unknown] {
            slot.limit = share_limit(limit, slot.share);
        }
        self.unused = self.slots.iter().map(Slot::unused).sum();
    }

    /// Admits one request of `slot` if the mode's rule allows it, counting it.
    pub(super) fn try_admit(&mut self, slot: usize) -> Result<Admission, Rejection> {
        let current = self.slots[slot];
        let view = View {
            limit: self.limit,
            in_flight: self.in_flight,
            share_limit: current.limit,
            busy: current.busy,
            unused_elsewhere: self.unused - current.unused(),
        };
        // A count at u64::MAX cannot grow: refuse rather than wrap.
        let decision = match self.in_flight.checked_add(1) {
            Some(_) => self.mode.admits(view),
            None => Err(Refusal::Full),
        };
        if let Err(refusal) = decision {
            return Err(Rejection {
                refusal,
                limit: self.limit,
                in_flight: self.in_flight,
                share_limit: current.limit,
                busy: current.busy,
            });
        }
        self.in_flight += 1;
        let entry = &mut self.slots[slot];
        entry.busy += 1;
        self.unused = self.unused - current.unused() + entry.unused();
        Ok(Admission {
            in_flight: self.in_flight,
        })
    }

    /// Gives back one request of `slot` admitted earlier.
    pub(super) fn release(&mut self, slot: usize) {
        let entry = &mut self.slots[slot];
        let before = entry.unused();
        // Only admitted requests are released, so neither count is zero here.
        entry.busy = entry.busy.saturating_sub(1);
        let after = entry.unused();
        self.unused = self.unused - before + after;
        self.in_flight = self.in_flight.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_limits_round_up_to_at_least_one_as_upstream() {
        assert_eq!(share_limit(10, 0.3), 3);
        assert_eq!(share_limit(10, 0.7), 7);
        assert_eq!(share_limit(20, 0.3), 6);
        assert_eq!(share_limit(10, 1.0 / 3.0), 4);
        assert_eq!(share_limit(1, 0.1), 1);
        assert_eq!(share_limit(3, 0.5), 2);
        assert_eq!(share_limit(u64::MAX, 1.0), u64::MAX);
        assert_eq!(share_limit(u64::MAX, 0.5), 1 << 63);
    }

    #[test]
    fn unused_reservations_follow_admissions_and_releases() {
        let mut state = State::new(PartitionMode::Strict, 10, &[0.3, 0.5]);
        assert_eq!(state.unused, 8);
        state.try_admit(0).unwrap();
        assert_eq!(state.unused, 7);
        for _ in 0..4 {
            state.try_admit(0).unwrap();
        }
        // Batch holds 5 (2 past its 3); live's 5 stay reserved.
        assert_eq!(state.unused, 5);
        assert_eq!(state.try_admit(0).unwrap_err().refusal, Refusal::Reserved);
        state.release(0);
        assert_eq!(state.unused, 5);
        for _ in 0..4 {
            state.release(0);
        }
        assert_eq!(state.unused, 8);
        assert_eq!(state.in_flight(), 0);
    }

    #[test]
    fn set_limit_recomputes_reservations_and_keeps_the_counts() {
        let mut state = State::new(PartitionMode::Strict, 10, &[0.3, 0.7]);
        state.try_admit(1).unwrap();
        state.set_limit(20);
        assert_eq!(state.share_limit(0), 6);
        assert_eq!(state.share_limit(1), 14);
        assert_eq!(state.unused, 6 + 13);
        assert_eq!(state.in_flight(), 1);
        assert_eq!(state.share_limit(state.unknown()), 0);
    }

    #[test]
    fn u64_max_limits_neither_panic_nor_wrap() {
        let mut state = State::new(PartitionMode::NetflixCompatible, u64::MAX, &[0.5, 0.5]);
        assert_eq!(state.in_flight_bound(), u64::MAX);
        state.in_flight = u64::MAX;
        assert_eq!(state.try_admit(0).unwrap_err().refusal, Refusal::Full);
        let mut strict = State::new(PartitionMode::Strict, u64::MAX, &[1.0]);
        assert!(strict.try_admit(0).is_ok());
        // The unknown partition may not take the named one's reserved room.
        assert_eq!(strict.try_admit(1).unwrap_err().refusal, Refusal::Reserved);
    }
}
