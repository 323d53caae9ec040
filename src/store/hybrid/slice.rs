//! One key's slice on one node: permits leased from a shared store, spent here with
//! one compare-and-swap each, until they run out or the lease's term ends.
//!
//! The holder of the lease (one task at a time, under the key's lease lock) replaces
//! the slice with [`install`](Slice::install) and empties it with
//! [`drain`](Slice::drain); both swap the count, so the permits they report as unused
//! are exactly those no [`take`](Slice::take) got, and a take racing them either
//! succeeds before the swap (and is not reported unused) or fails.

use crate::sync::{AtomicU64, Ordering};

/// Permits on hand and the instant they stop being usable (on the limiter's clock).
#[derive(Debug)]
pub(crate) struct Slice {
    left: AtomicU64,
    /// Nanoseconds on the limiter's clock: takes at or after it fail.
    until: AtomicU64,
}

#[cfg_attr(not(feature = "redis"), allow(dead_code))]
impl Slice {
    pub(crate) fn new() -> Slice {
        Slice {
            left: AtomicU64::new(0),
            until: AtomicU64::new(0),
        }
    }

    /// Takes `n` permits if the slice holds them and its term has not ended at `now`:
    /// how many are left after, or `None` having taken nothing. `n == 0` looks.
    #[inline]
    pub(crate) fn take(&self, n: u64, now: u64) -> Option<u64> {
        if now >= self.until.load(Ordering::Acquire) {
            return None;
        }
        let mut left = self.left.load(Ordering::Relaxed);
        loop {
            if left < n {
                return None;
            }
            match self.left.compare_exchange_weak(
                left,
                left - n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(left - n),
                Err(actual) => left = actual,
            }
        }
    }

    /// Replaces the slice with `left` permits usable until `until`: the permits the
    /// old one had left, which no take will get.
    ///
    /// The count is swapped before the term is moved: a take that read the old term
    /// then takes from the new permits, which are usable at least as long.
    pub(crate) fn install(&self, left: u64, until: u64) -> u64 {
        let unused = self.left.swap(left, Ordering::AcqRel);
        self.until.store(until, Ordering::Release);
        unused
    }

    /// Empties the slice: the permits it had left, which no take will get.
    pub(crate) fn drain(&self) -> u64 {
        self.left.swap(0, Ordering::AcqRel)
    }

    /// The permits on hand, usable or not.
    pub(crate) fn left(&self) -> u64 {
        self.left.load(Ordering::Acquire)
    }

    /// When the term ends.
    pub(crate) fn until(&self) -> u64 {
        self.until.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn takes_within_the_count_and_the_term() {
        let slice = Slice::new();
        assert_eq!(slice.take(0, 0), None, "a new slice has no term");
        assert_eq!(slice.install(5, 100), 0);
        assert_eq!(slice.take(3, 10), Some(2));
        assert_eq!(slice.take(3, 10), None);
        assert_eq!(slice.take(0, 10), Some(2));
        assert_eq!(slice.take(1, 100), None, "the term ended");
        assert_eq!(slice.install(4, 200), 2);
        assert_eq!(slice.take(4, 150), Some(0));
        assert_eq!(slice.drain(), 0);
        assert_eq!(slice.install(u64::MAX, u64::MAX), 0);
        assert_eq!(slice.take(u64::MAX, u64::MAX - 1), Some(0));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Take(u64),
        Install(u64, u64),
        Drain,
        Advance(u64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u64..6).prop_map(Op::Take),
            1 => (0u64..10, 0u64..50).prop_map(|(n, term)| Op::Install(n, term)),
            1 => Just(Op::Drain),
            2 => (0u64..20).prop_map(Op::Advance),
        ]
    }

    proptest::proptest! {
        /// Against a model of the slice (a count and a term): the same takes succeed,
        /// and every permit installed is either taken or handed back unused.
        #[test]
        fn the_slice_accounts_for_every_permit(ops in proptest::collection::vec(op(), 0..60)) {
            let slice = Slice::new();
            let (mut left, mut until, mut now) = (0u64, 0u64, 0u64);
            let (mut installed, mut taken, mut unused) = (0u64, 0u64, 0u64);
            for op in ops {
                match op {
                    Op::Take(n) => {
                        let expected = (now < until && n <= left).then(|| left - n);
                        proptest::prop_assert_eq!(slice.take(n, now), expected);
                        if expected.is_some() {
                            left -= n;
                            taken += n;
                        }
                    }
                    Op::Install(n, term) => {
                        proptest::prop_assert_eq!(slice.install(n, now + term), left);
                        unused += left;
                        installed += n;
                        left = n;
                        until = now + term;
                    }
                    Op::Drain => {
                        proptest::prop_assert_eq!(slice.drain(), left);
                        unused += left;
                        left = 0;
                    }
                    Op::Advance(d) => now += d,
                }
            }
            proptest::prop_assert_eq!(installed, taken + unused + slice.drain());
        }
    }
}

/// The slice, public under `--cfg loom` only, for the model in
/// `loom-tests/tests/lease_slice.rs`.
#[cfg(loom)]
#[doc(hidden)]
#[derive(Debug)]
pub struct LoomSlice(Slice);

#[cfg(loom)]
#[allow(missing_docs)]
impl LoomSlice {
    pub fn new() -> LoomSlice {
        LoomSlice(Slice::new())
    }

    pub fn take(&self, n: u64, now: u64) -> Option<u64> {
        self.0.take(n, now)
    }

    pub fn install(&self, left: u64, until: u64) -> u64 {
        self.0.install(left, until)
    }

    pub fn drain(&self) -> u64 {
        self.0.drain()
    }
}
