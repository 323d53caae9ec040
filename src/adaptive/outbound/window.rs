//! [`Counts`]: requests and accepts over a sliding window, in a ring of buckets on
//! the clock.

use crate::time::Nanos;

/// One bucket: which slice of time it counts, and its counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bucket {
    /// `now / width` when it began counting.
    slice: u64,
    requests: u64,
    accepts: u64,
}

/// Counts over the last `buckets` slices of `width` nanoseconds: a count ages out
/// whole, with its slice, once the window has moved past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    ring: Vec<Bucket>,
    width: u64,
}

impl Counts {
    /// `buckets` (at least 1) slices of `width` (at least 1) nanoseconds.
    pub(crate) fn new(buckets: u32, width: u64) -> Counts {
        Counts {
            ring: vec![Bucket::default(); buckets.max(1) as usize],
            width: width.max(1),
        }
    }

    fn bucket(&mut self, now: Nanos) -> &mut Bucket {
        let slice = now.as_u64() / self.width;
        let len = self.ring.len() as u64;
        let bucket = &mut self.ring[(slice % len) as usize];
        if bucket.slice != slice {
            *bucket = Bucket {
                slice,
                ..Bucket::default()
            };
        }
        bucket
    }

    pub(crate) fn add_request(&mut self, now: Nanos) {
        let b = self.bucket(now);
        b.requests = b.requests.saturating_add(1);
    }

    /// Takes back a request not sent (its permit was given back).
    pub(crate) fn remove_request(&mut self, now: Nanos) {
        let b = self.bucket(now);
        b.requests = b.requests.saturating_sub(1);
    }

    pub(crate) fn add_accept(&mut self, now: Nanos) {
        let b = self.bucket(now);
        b.accepts = b.accepts.saturating_add(1);
    }

    /// Requests and accepts counted in the window ending at `now`.
    pub(crate) fn sums(&self, now: Nanos) -> (u64, u64) {
        let slice = now.as_u64() / self.width;
        let len = self.ring.len() as u64;
        self.ring
            .iter()
            .filter(|b| b.slice <= slice && slice - b.slice < len)
            .fold((0u64, 0u64), |(r, a), b| {
                (r.saturating_add(b.requests), a.saturating_add(b.accepts))
            })
    }

    /// The length of one slice.
    pub(crate) fn width(&self) -> u64 {
        self.width
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn counts_age_out_with_their_slice() {
        let mut counts = Counts::new(4, S);
        counts.add_request(Nanos::new(0));
        counts.add_accept(Nanos::new(0));
        counts.add_request(Nanos::new(S + 1));
        assert_eq!(counts.sums(Nanos::new(3 * S)), (2, 1));
        // At 4 s the slice [0, 1 s) has left the window of 4.
        assert_eq!(counts.sums(Nanos::new(4 * S)), (1, 0));
        assert_eq!(counts.sums(Nanos::new(5 * S)), (0, 0));
        // A slice's bucket, reused, starts from zero.
        counts.add_request(Nanos::new(4 * S));
        assert_eq!(counts.sums(Nanos::new(4 * S)), (2, 0));
        counts.remove_request(Nanos::new(4 * S));
        counts.remove_request(Nanos::new(4 * S));
        assert_eq!(counts.sums(Nanos::new(4 * S)), (1, 0));
    }

    #[test]
    fn the_end_of_the_clock() {
        let mut counts = Counts::new(3, 7);
        counts.add_request(Nanos::MAX);
        counts.add_accept(Nanos::MAX);
        assert_eq!(counts.sums(Nanos::MAX), (1, 1));
        // A reading earlier than the counts sees none of the later ones.
        assert_eq!(counts.sums(Nanos::ZERO), (0, 0));
    }
}
