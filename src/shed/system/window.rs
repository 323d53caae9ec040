//! The inbound statistics the system rule reads, as Sentinel's `StatisticNode` keeps
//! them over a `LeapArray`: a window cut into equal buckets on the clock, each
//! counting passed, blocked and completed requests, their RT sum and min RT.
//!
//! A pure state machine over `now` (nanoseconds): no clock, lock or I/O here.

use std::time::Duration;

/// Sentinel's min RT is at least 1 ms (`Math.max(1, rt)` over whole milliseconds);
/// kept so that the BBR check's capacity matches Sentinel's for sub-millisecond RTs.
pub(crate) const MIN_RT_FLOOR: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// `None` until first used.
    start: Option<u64>,
    pass: u64,
    block: u64,
    success: u64,
    rt_sum: u64,
    min_rt: u64,
}

/// A sliding window of `buckets` buckets of `bucket_len` nanoseconds.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    bucket_len: u64,
    length: u64,
    statistic_max_rt: u64,
    buckets: Box<[Bucket]>,
}

impl Window {
    /// `length` must divide into `buckets` whole nanoseconds and fit a `u64`; the
    /// rule's builder checks both.
    pub(crate) fn new(length: Duration, buckets: u32, statistic_max_rt: Duration) -> Window {
        let length = nanos(length).max(1);
        let count = u64::from(buckets.max(1));
        let statistic_max_rt = nanos(statistic_max_rt);
        let empty = Bucket {
            start: None,
            pass: 0,
            block: 0,
            success: 0,
            rt_sum: 0,
            min_rt: statistic_max_rt,
        };
        Window {
            bucket_len: (length / count).max(1),
            length,
            statistic_max_rt,
            buckets: vec![empty; count as usize].into_boxed_slice(),
        }
    }

    /// The bucket holding `now`, emptied first if it held an older span (Sentinel's
    /// `currentWindow`). A clock that went back writes to the newer bucket.
    fn current(&mut self, now: u64) -> &mut Bucket {
        let start = now - now % self.bucket_len;
        let index = ((now / self.bucket_len) % self.buckets.len() as u64) as usize;
        let statistic_max_rt = self.statistic_max_rt;
        let bucket = &mut self.buckets[index];
        if bucket.start.is_none_or(|old| old < start) {
            *bucket = Bucket {
                start: Some(start),
                pass: 0,
                block: 0,
                success: 0,
                rt_sum: 0,
                min_rt: statistic_max_rt,
            };
        }
        bucket
    }

    /// Buckets within the window at `now`. Sentinel drops a bucket when
    /// `now - start > interval`, after `currentWindow` has already reset the one at
    /// exactly `interval` (it shares the current slot): together, `< length`.
    fn valid(&self, now: u64) -> impl Iterator<Item = &Bucket> {
        let length = self.length;
        self.buckets.iter().filter(move |bucket| {
            bucket
                .start
                .is_some_and(|start| start <= now && now - start < length)
        })
    }

    /// A request passed the checks.
    pub(crate) fn add_pass(&mut self, now: u64) {
        let bucket = self.current(now);
        bucket.pass = bucket.pass.saturating_add(1);
    }

    /// A request was shed.
    pub(crate) fn add_block(&mut self, now: u64) {
        let bucket = self.current(now);
        bucket.block = bucket.block.saturating_add(1);
    }

    /// A request finished after `rt` (Sentinel's `addRtAndSuccess`).
    pub(crate) fn add_completion(&mut self, now: u64, rt: Duration) {
        let rt = nanos(rt);
        let bucket = self.current(now);
        bucket.success = bucket.success.saturating_add(1);
        bucket.rt_sum = bucket.rt_sum.saturating_add(rt);
        bucket.min_rt = bucket.min_rt.min(rt);
    }

    fn length_secs(&self) -> f64 {
        self.length as f64 / 1e9
    }

    /// Passed requests per second over the window (`passQps`).
    pub(crate) fn pass_qps(&self, now: u64) -> f64 {
        let pass = self
            .valid(now)
            .fold(0u64, |sum, b| sum.saturating_add(b.pass));
        pass as f64 / self.length_secs()
    }

    /// Shed requests per second over the window (`blockQps`).
    pub(crate) fn block_qps(&self, now: u64) -> f64 {
        let block = self
            .valid(now)
            .fold(0u64, |sum, b| sum.saturating_add(b.block));
        block as f64 / self.length_secs()
    }

    /// The busiest bucket's completions as a rate, at least one per bucket
    /// (`maxSuccessQps`: `max(maxSuccess, 1) × sampleCount / intervalInSec`).
    pub(crate) fn max_success_qps(&self, now: u64) -> f64 {
        let max = self.valid(now).map(|b| b.success).max().unwrap_or(0).max(1);
        max as f64 * self.buckets.len() as f64 / self.length_secs()
    }

    /// The least RT in the window, `statistic_max_rt` without completions, at least
    /// [`MIN_RT_FLOOR`] (`minRt`).
    pub(crate) fn min_rt(&self, now: u64) -> Duration {
        let min = self
            .valid(now)
            .map(|b| b.min_rt)
            .fold(self.statistic_max_rt, u64::min);
        Duration::from_nanos(min).max(MIN_RT_FLOOR)
    }

    /// The window's mean RT, zero without completions (`avgRt`).
    pub(crate) fn avg_rt(&self, now: u64) -> Duration {
        let (success, sum) = self.valid(now).fold((0u64, 0u128), |(n, sum), b| {
            (n.saturating_add(b.success), sum + u128::from(b.rt_sum))
        });
        if success == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(u64::try_from(sum / u128::from(success)).unwrap_or(u64::MAX))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
