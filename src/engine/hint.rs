//! [`DenialHint`]: the last denial of one permit, for a locked cell to repeat without
//! its lock.
//!
//! While nothing changes an algorithm's state, a denial of one permit at `t0` with a
//! retry of `r` is, at any `t` in `[t0, t0 + r)`, the same denial counted down by
//! `t - t0`, with nothing remaining (`tests/denials.rs` checks this of every locked
//! algorithm). So a flood of denied requests reads a few words instead of taking the
//! lock, and two threads being denied do not contend.

use crate::decision::{Denied, Limited};
use crate::sync::{AtomicU64, Ordering, fence};
use crate::time::Nanos;

/// One denial under a sequence lock: written only under the cell's mutex, read
/// without it.
#[derive(Debug, Default)]
pub(super) struct DenialHint {
    /// Odd while being written.
    version: AtomicU64,
    /// When the denial was decided; zero `until` means no hint.
    at: AtomicU64,
    /// Its retry instant: the hint holds before it.
    until: AtomicU64,
    reset_at: AtomicU64,
    limit: AtomicU64,
}

impl DenialHint {
    /// The denial of one permit at `now`, if the hint holds then.
    #[inline]
    pub(super) fn deny(&self, now: Nanos) -> Option<Denied> {
        let now = now.as_u64();
        let before = self.version.load(Ordering::Acquire);
        let until = self.until.load(Ordering::Relaxed);
        if now >= until || before & 1 != 0 {
            return None;
        }
        let at = self.at.load(Ordering::Relaxed);
        let reset_at = self.reset_at.load(Ordering::Relaxed);
        let limit = self.limit.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        // Before `at`, the state may have seen a later time than `now`.
        if self.version.load(Ordering::Relaxed) != before || now < at {
            return None;
        }
        Some(Limited::deferred(until - now, limit, 0, 1, reset_at.saturating_sub(now)).into())
    }

    /// Records the denial of one permit at `now`, the latest time the state has seen.
    /// Called under the cell's mutex.
    pub(super) fn record(&self, now: Nanos, denial: &Limited) {
        let Some(retry) = denial.retry_after_nanos() else {
            return;
        };
        let now = now.as_u64();
        let Some(until) = now.checked_add(retry) else {
            return;
        };
        if retry == 0 || denial.remaining() != 0 {
            return;
        }
        self.write(|hint| {
            hint.at.store(now, Ordering::Relaxed);
            hint.until.store(until, Ordering::Relaxed);
            hint.reset_at.store(
                now.saturating_add(denial.reset_after_nanos()),
                Ordering::Relaxed,
            );
            hint.limit.store(denial.limit(), Ordering::Relaxed);
        });
    }

    /// Forgets the hint: the state or the configuration changed. Called under the
    /// cell's mutex; writes nothing when there is no hint.
    pub(super) fn clear(&self) {
        if self.until.load(Ordering::Relaxed) != 0 {
            self.write(|hint| hint.until.store(0, Ordering::Relaxed));
        }
    }

    fn write(&self, f: impl FnOnce(&DenialHint)) {
        let version = self.version.load(Ordering::Relaxed);
        self.version
            .store(version.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        f(self);
        self.version
            .store(version.wrapping_add(2), Ordering::Release);
    }
}
