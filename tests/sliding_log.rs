//! The sliding log against ClassDojo's algorithm over an unbounded list, and against a
//! brute-force check that no window of length `W` ever admits more than the limit.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::Limiter;
use tollgate::algorithm::{Algorithm, SlidingLog, SlidingLogState};
use tollgate::time::{ManualClock, Nanos};

/// ClassDojo's rolling-rate-limiter: every recorded attempt in a list that is never
/// trimmed; the gap counts from the newest attempt.
struct Reference {
    limit: u64,
    window: u64,
    gap: u64,
    count_blocked: bool,
    attempts: Vec<u64>,
}

impl Reference {
    fn active(&self, t: u64) -> u64 {
        self.attempts
            .iter()
            .filter(|&&a| a + self.window > t)
            .count() as u64
    }

    fn fits(&self, t: u64, n: u64) -> bool {
        let gap_ok = self
            .attempts
            .last()
            .is_none_or(|&last| t >= last + self.gap);
        gap_ok && self.active(t) + n <= self.limit
    }

    /// The least time from `now` at which `n` fit: some entry's expiry or the gap's end.
    fn allowed_at(&self, now: u64, n: u64) -> u64 {
        let mut candidates: Vec<u64> = self.attempts.iter().map(|&a| a + self.window).collect();
        candidates.extend(self.attempts.last().map(|&a| a + self.gap));
        candidates.push(now);
        candidates
            .into_iter()
            .filter(|&t| t >= now && self.fits(t, n))
            .min()
            .expect("once everything expired, n fits")
    }

    /// `Ok(remaining)`, `Err(Some(retry_after))`, `Err(None)` for never.
    fn acquire(&mut self, now: u64, n: u64) -> Result<u64, Option<u64>> {
        if n > self.limit {
            return Err(None);
        }
        if n == 0 {
            let in_gap = self.gap > 0 && self.attempts.last().is_some_and(|&a| a + self.gap > now);
            return Ok(if in_gap {
                0
            } else {
                self.limit - self.active(now).min(self.limit)
            });
        }
        if self.fits(now, n) {
            let active = self.active(now);
            self.attempts.extend(std::iter::repeat_n(now, n as usize));
            return Ok(if self.gap > 0 {
                0
            } else {
                self.limit - active - n
            });
        }
        if self.count_blocked {
            self.attempts.extend(std::iter::repeat_n(now, n as usize));
        }
        Err(Some(self.allowed_at(now, n) - now))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_classdojo(
        limit in 1u64..6,
        window in 1u64..1_000,
        gap in prop_oneof![Just(0u64), 1u64..1_500],
        count_blocked in any::<bool>(),
        ops in prop::collection::vec((0u64..400, 0u64..7), 1..150),
    ) {
        let log = SlidingLog::new(limit, Duration::from_nanos(window))
            .unwrap()
            .min_gap(Duration::from_nanos(gap))
            .unwrap()
            .count_blocked(count_blocked);
        let mut reference = Reference { limit, window, gap, count_blocked, attempts: Vec::new() };
        let mut state = log.initial_state(Nanos::ZERO);
        let mut now = 0;
        for (advance, n) in ops {
            now += advance;
            let got = log
                .acquire(&mut state, Nanos::new(now), n)
                .map(|a| a.remaining())
                .map_err(|d| d.retry_after().map(|r| r.as_nanos() as u64));
            prop_assert_eq!(got, reference.acquire(now, n), "acquire {} at {}", n, now);
            prop_assert!(state.len() as u64 <= 2 * limit, "the log keeps at most 2 × limit entries");
            let newest = reference.attempts.last().map_or(0, |&a| a + window.max(gap));
            prop_assert_eq!(log.idle_at(&state).as_u64(), newest);
        }
    }

    #[test]
    fn no_window_ever_admits_more_than_the_limit(
        limit in 1u64..6,
        window in 1u64..1_000,
        gap in prop_oneof![Just(0u64), 1u64..300],
        count_blocked in any::<bool>(),
        ops in prop::collection::vec((0u64..400, 0u8..4, 0u64..7, 0u64..2_000, 0u64..30), 1..150),
    ) {
        let log = SlidingLog::new(limit, Duration::from_nanos(window))
            .unwrap()
            .min_gap(Duration::from_nanos(gap))
            .unwrap()
            .count_blocked(count_blocked);
        let mut state = log.initial_state(Nanos::ZERO);
        // (time of use, permits) of every granted request.
        let mut granted: Vec<(u64, u64)> = Vec::new();
        let mut clock = 0;
        for (advance, kind, n, max_wait, late) in ops {
            clock += advance;
            // A thread may decide on a clock reading older than the last one.
            let now = clock.saturating_sub(late);
            let t = Nanos::new(now);
            match kind {
                0 | 1 => match log.acquire(&mut state, t, n) {
                    Ok(_) => granted.push((now, n)),
                    Err(denied) => {
                        if let Some(retry) = denied.retry_after() {
                            let retry = retry.as_nanos() as u64;
                            prop_assert!(retry > 0);
                            prop_assert!(log.peek(&state, Nanos::new(now + retry), n).is_ok());
                            prop_assert!(log.peek(&state, Nanos::new(now + retry - 1), n).is_err());
                        }
                    }
                },
                2 => {
                    let max_wait = Duration::from_nanos(max_wait);
                    match log.reserve(&mut state, t, n, max_wait) {
                        Ok(r) => granted.push((now + r.wait().as_nanos() as u64, n)),
                        Err(denied) => {
                            if let Some(retry) = denied.retry_after() {
                                let at = now + retry.as_nanos() as u64;
                                let mut later = state.clone();
                                prop_assert!(log.reserve(&mut later, Nanos::new(at), n, max_wait).is_ok());
                                let mut sooner = state.clone();
                                prop_assert!(log.reserve(&mut sooner, Nanos::new(at - 1), n, max_wait).is_err());
                            }
                        }
                    }
                }
                _ if !count_blocked => {
                    // Refunds give back the newest entries.
                    log.refund(&mut state, t, n);
                    let mut left = n;
                    while left > 0 {
                        let Some(newest) = granted.iter().enumerate().filter(|g| g.1 .1 > 0).max_by_key(|g| g.1 .0).map(|g| g.0) else { break };
                        let take = left.min(granted[newest].1);
                        granted[newest].1 -= take;
                        left -= take;
                    }
                }
                _ => {}
            }
            prop_assert!(state.len() as u64 <= 2 * limit);
            let mut actions: Vec<(u64, u64)> = granted.iter().copied().filter(|g| g.1 > 0).collect();
            actions.sort();
            for &(start, _) in &actions {
                let inside: u64 = actions
                    .iter()
                    .filter(|a| a.0 >= start && a.0 < start + window)
                    .map(|a| a.1)
                    .sum();
                prop_assert!(inside <= limit, "{} admitted in [{}, {})", inside, start, start + window);
            }
            for pair in actions.windows(2) {
                prop_assert!(pair[1].0 - pair[0].0 >= gap, "actions at {} and {} closer than {}", pair[0].0, pair[1].0, gap);
            }
        }
    }
}

#[test]
fn threads_share_one_log_exactly() {
    let limiter = Arc::new(Limiter::with_clock(
        SlidingLog::new(500, Duration::from_secs(1)).unwrap(),
        ManualClock::new(),
    ));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let limiter = Arc::clone(&limiter);
            std::thread::spawn(move || (0..200).filter(|_| limiter.try_acquire(1).is_ok()).count())
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(admitted, 500);
}

#[test]
fn a_max_size_log_stays_bounded_under_a_flood() {
    let log = SlidingLog::new(SlidingLog::MAX_LIMIT, Duration::from_secs(1))
        .unwrap()
        .count_blocked(true);
    let mut state: SlidingLogState = log.initial_state(Nanos::ZERO);
    for i in 0..5u64 {
        let _ = log.acquire(&mut state, Nanos::new(i), SlidingLog::MAX_LIMIT);
    }
    assert_eq!(state.len() as u64, 2 * SlidingLog::MAX_LIMIT);
}

#[test]
fn limiter_reconfigures_the_window() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(
        SlidingLog::new(1, Duration::from_secs(10)).unwrap(),
        clock.clone(),
    );
    limiter.try_acquire(1).unwrap();
    clock.advance(Duration::from_secs(2));
    assert!(limiter.try_acquire(1).is_err());
    limiter
        .reconfigure(|log, _, _| log.set_window(Duration::from_secs(1)))
        .unwrap();
    assert!(limiter.try_acquire(1).is_ok());
    assert!(limiter.reconfigure(|log, _, _| log.set_limit(0)).is_err());
}
