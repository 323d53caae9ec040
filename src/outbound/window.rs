//! [`Counts`]: requests and accepts over a sliding window, in a ring of buckets on
//! the clock.

use crate::time::Nanos;

/// One bucket: the counts of one slice of time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bucket {
    requests: u64,
    accepts: u64,
}

/// Counts over the last `buckets` slices of `width` nanoseconds: a count ages out
/// whole, with its slice, once the window has moved past it.
///
/// The sums over the window are kept as running totals: a bucket's counts leave
/// them when the window moves past its slice, so a decision reads two numbers
/// instead of the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    ring: Vec<Bucket>,
    width: u64,
    /// The latest slice seen (`now / width`): the window ends there, and the ring
    /// holds the slices up to it. A reading earlier than it (another thread's, a
    /// little behind) counts as at it.
    head: u64,
    /// The sums of the ring's counts, wide enough never to saturate.
    requests: u128,
    accepts: u128,
}

impl Counts {
    /// `buckets` (at least 1) slices of `width` (at least 1) nanoseconds.
    pub(crate) fn new(buckets: u32, width: u64) -> Counts {
        Counts {
            ring: vec![Bucket::default(); buckets.max(1) as usize],
            width: width.max(1),
            head: 0,
            requests: 0,
            accepts: 0,
        }
    }

    /// Moves the window's end to `now` (never back), taking out of the totals the
    /// buckets it leaves behind; the index of `now`'s bucket.
    fn advance(&mut self, now: Nanos) -> usize {
        let slice = now.as_u64() / self.width;
        let len = self.ring.len() as u64;
        if slice > self.head {
            if slice - self.head >= len {
                // The whole ring has aged out.
                self.ring.fill(Bucket::default());
                self.requests = 0;
                self.accepts = 0;
            } else {
                for s in self.head + 1..=slice {
                    let bucket = &mut self.ring[(s % len) as usize];
                    self.requests -= u128::from(bucket.requests);
                    self.accepts -= u128::from(bucket.accepts);
                    *bucket = Bucket::default();
                }
            }
            self.head = slice;
        }
        (self.head % len) as usize
    }

    pub(crate) fn add_request(&mut self, now: Nanos) {
        let i = self.advance(now);
        if let Some(n) = self.ring[i].requests.checked_add(1) {
            self.ring[i].requests = n;
            self.requests += 1;
        }
    }

    /// Takes back a request not sent (its permit was given back), from the current
    /// bucket if it holds one.
    pub(crate) fn remove_request(&mut self, now: Nanos) {
        let i = self.advance(now);
        if self.ring[i].requests > 0 {
            self.ring[i].requests -= 1;
            self.requests -= 1;
        }
    }

    pub(crate) fn add_accept(&mut self, now: Nanos) {
        let i = self.advance(now);
        if let Some(n) = self.ring[i].accepts.checked_add(1) {
            self.ring[i].accepts = n;
            self.accepts += 1;
        }
    }

    /// Requests and accepts counted in the window ending at `now` (or at the latest
    /// reading, if later).
    pub(crate) fn sums(&mut self, now: Nanos) -> (u64, u64) {
        self.advance(now);
        // As the saturating sum of the buckets.
        let clamp = |total: u128| u64::try_from(total).unwrap_or(u64::MAX);
        (clamp(self.requests), clamp(self.accepts))
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
        // A slice's bucket, reused, starts from zero.
        counts.add_request(Nanos::new(4 * S));
        assert_eq!(counts.sums(Nanos::new(4 * S)), (2, 0));
        counts.remove_request(Nanos::new(4 * S));
        // Only the current bucket gives a request back.
        counts.remove_request(Nanos::new(4 * S));
        assert_eq!(counts.sums(Nanos::new(4 * S)), (1, 0));
        assert_eq!(counts.sums(Nanos::new(5 * S)), (0, 0));
    }

    #[test]
    fn the_end_of_the_clock() {
        let mut counts = Counts::new(3, 7);
        counts.add_request(Nanos::MAX);
        counts.add_accept(Nanos::MAX);
        assert_eq!(counts.sums(Nanos::MAX), (1, 1));
        // A reading earlier than the latest counts as at it: the window never
        // moves back, and no bucket is reset under a later one's counts.
        assert_eq!(counts.sums(Nanos::ZERO), (1, 1));
        counts.add_request(Nanos::ZERO);
        assert_eq!(counts.sums(Nanos::MAX), (2, 1));
    }

    /// The window as it was first written: each bucket remembers its slice, and the
    /// sums scan the ring. The running totals must give the same numbers.
    struct Scanning {
        ring: Vec<(u64, u64, u64)>,
        width: u64,
    }

    impl Scanning {
        fn bucket(&mut self, now: u64) -> &mut (u64, u64, u64) {
            let slice = now / self.width;
            let len = self.ring.len() as u64;
            let b = &mut self.ring[(slice % len) as usize];
            if b.0 != slice {
                *b = (slice, 0, 0);
            }
            b
        }

        fn sums(&self, now: u64) -> (u64, u64) {
            let slice = now / self.width;
            let len = self.ring.len() as u64;
            self.ring
                .iter()
                .filter(|b| b.0 <= slice && slice - b.0 < len)
                .fold((0, 0), |(r, a), b| (r + b.1, a + b.2))
        }
    }

    #[test]
    fn running_totals_equal_the_scanning_sums_on_a_random_sequence() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (buckets, width) in [(1, 5), (4, 1_000), (10, 333), (120, 1_000_000)] {
            let mut counts = Counts::new(buckets, width);
            let mut scanning = Scanning {
                ring: vec![(0, 0, 0); buckets as usize],
                width,
            };
            let mut now = 0u64;
            for _ in 0..20_000 {
                // Mostly small steps, some of a slice or more, a few past the window.
                now += match next() % 100 {
                    0 => next() % (width * u64::from(buckets) * 3),
                    1..=20 => next() % (width * 2),
                    _ => next() % (width / 4 + 1),
                };
                let t = Nanos::new(now);
                match next() % 4 {
                    0 => {
                        counts.add_accept(t);
                        scanning.bucket(now).2 += 1;
                    }
                    1 => {
                        counts.remove_request(t);
                        let b = scanning.bucket(now);
                        b.1 = b.1.saturating_sub(1);
                    }
                    _ => {
                        counts.add_request(t);
                        scanning.bucket(now).1 += 1;
                    }
                }
                assert_eq!(counts.sums(t), scanning.sums(now), "at {now}");
            }
        }
    }
}
