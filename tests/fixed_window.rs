//! Fixed windows against a reference that keeps every booked window explicitly.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{Algorithm, FirstHit, FixedWindow};
use tollgate::time::{ManualClock, Nanos};
use tollgate::{ConfigError, Denied, Limiter};

/// Booked windows in time order, each `(start, end, count)`. Bookings are first come,
/// first served: a request goes in the current window only if no later window is
/// booked, and a reservation goes in the last booked window or the one after it.
struct Reference {
    limit: u64,
    window: i128,
    /// `Some(offset)` for aligned windows, `None` for first-hit ones.
    offset: Option<i128>,
    windows: Vec<(i128, i128, u64)>,
}

/// What the reference decides: `Ok((remaining, reset_after))` or
/// `Err(Some(retry_after))`, `Err(None)` for never.
type Outcome = Result<(u64, u64), Option<u64>>;

impl Reference {
    fn new(limit: u64, window: u64, offset: Option<u64>) -> Reference {
        Reference {
            limit,
            window: window as i128,
            offset: offset.map(|o| o as i128),
            windows: Vec::new(),
        }
    }

    fn aligned(&self, t: i128, offset: i128) -> (i128, i128) {
        let index = (t + offset) / self.window;
        (
            index * self.window - offset,
            (index + 1) * self.window - offset,
        )
    }

    /// The window at `now`: its bounds, its count, and whether it is the last booked.
    fn current(&self, now: i128) -> (i128, i128, u64, bool) {
        if let Some(&(_, tail_end, _)) = self.windows.last() {
            if now < tail_end {
                let at = self.windows.iter().position(|w| w.0 <= now && now < w.1);
                let i = at.expect("booked windows are back to back up to the tail");
                let (s, e, c) = self.windows[i];
                return (s, e, c, i + 1 == self.windows.len());
            }
        }
        let (s, e) = match self.offset {
            Some(offset) => self.aligned(now, offset),
            None => (now, now + self.window),
        };
        (s, e, 0, true)
    }

    /// The window a booking of `n` not fitting now goes to: the tail or the next.
    fn target(&self, n: u64) -> (i128, i128, bool) {
        let &(s, e, c) = self.windows.last().expect("something is booked");
        if c + n <= self.limit {
            (s, e, false)
        } else {
            (e, e + self.window, true)
        }
    }

    fn book(&mut self, start: i128, end: i128, n: u64) {
        match self.windows.iter_mut().find(|w| w.0 == start) {
            Some(w) => w.2 += n,
            None => self.windows.push((start, end, n)),
        }
    }

    fn reset_after(&self, now: i128) -> u64 {
        self.windows.last().map_or(0, |w| (w.1 - now).max(0) as u64)
    }

    fn acquire(&mut self, now: u64, n: u64) -> Outcome {
        if n > self.limit {
            return Err(None);
        }
        let now = now as i128;
        let (s, e, c, tail) = self.current(now);
        let remaining = if tail {
            self.limit.saturating_sub(c)
        } else {
            0
        };
        if n == 0 {
            let reset = if c == 0 && tail {
                0
            } else {
                self.reset_after(now)
            };
            return Ok((remaining, reset));
        }
        if tail && c + n <= self.limit {
            self.book(s, e, n);
            return Ok((remaining - n, self.reset_after(now)));
        }
        let (start, _, _) = self.target(n);
        Err(Some((start - now) as u64))
    }

    fn reserve(&mut self, now: u64, n: u64, max_wait: u64) -> Result<u64, Option<u64>> {
        if n > self.limit {
            return Err(None);
        }
        let now = now as i128;
        let (s, e, c, tail) = self.current(now);
        if n == 0 {
            return Ok(0);
        }
        if tail && c + n <= self.limit {
            self.book(s, e, n);
            return Ok(0);
        }
        let (start, end, _) = self.target(n);
        let wait = (start - now) as u64;
        if wait > max_wait {
            return Err(Some(wait - max_wait));
        }
        self.book(start, end, n);
        Ok(wait)
    }

    fn idle_at(&self) -> u64 {
        self.windows.last().map_or(0, |w| w.1 as u64)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Acquire(u64),
    Reserve(u64, u64),
    SetLimit(u64),
}

fn ops(window: u64) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0..window * 2).prop_map(Op::Advance),
            4 => (0u64..6).prop_map(Op::Acquire),
            2 => ((0u64..6), (0..window * 4)).prop_map(|(n, w)| Op::Reserve(n, w)),
            1 => (1u64..8).prop_map(Op::SetLimit),
        ],
        1..120,
    )
}

fn check<A>(
    mut fw: A,
    set_limit: fn(&mut A, u64),
    mut reference: Reference,
    ops: Vec<Op>,
) -> Result<(), TestCaseError>
where
    A: Algorithm,
{
    let mut state = fw.initial_state(Nanos::ZERO);
    let mut now = 1_000u64;
    for op in ops {
        match op {
            Op::Advance(d) => now += d,
            Op::SetLimit(limit) => {
                set_limit(&mut fw, limit);
                reference.limit = limit;
            }
            Op::Acquire(n) => {
                let got = fw.acquire(&mut state, Nanos::new(now), n);
                let got = got
                    .map(|a| (a.remaining(), a.reset_after().as_nanos() as u64))
                    .map_err(|d| d.retry_after().map(|r| r.as_nanos() as u64));
                prop_assert_eq!(got, reference.acquire(now, n), "acquire {} at {}", n, now);
            }
            Op::Reserve(n, max_wait) => {
                let got = fw.reserve(
                    &mut state,
                    Nanos::new(now),
                    n,
                    Duration::from_nanos(max_wait),
                );
                let got = got
                    .map(|r| r.wait().as_nanos() as u64)
                    .map_err(|d| d.retry_after().map(|r| r.as_nanos() as u64));
                prop_assert_eq!(
                    got,
                    reference.reserve(now, n, max_wait),
                    "reserve {} within {} at {}",
                    n,
                    max_wait,
                    now
                );
            }
        }
        prop_assert_eq!(fw.idle_at(&state).as_u64(), reference.idle_at());
    }
    Ok(())
}

/// Permits booked per aligned window never exceed the limit, whatever is refunded,
/// with refunds giving back the newest bookings.
fn never_overfills(
    limit: u64,
    window: u64,
    ops: Vec<(u64, u8, u64, u64)>,
) -> Result<(), TestCaseError> {
    let fw = FixedWindow::new(limit, Duration::from_nanos(window)).unwrap();
    let mut state = fw.initial_state(Nanos::ZERO);
    // (time of use, permits), oldest booking first.
    let mut bookings: Vec<(u64, u64)> = Vec::new();
    let mut now = 0u64;
    for (advance, kind, n, max_wait) in ops {
        now += advance;
        let t = Nanos::new(now);
        match kind % 3 {
            0 => {
                if fw.acquire(&mut state, t, n).is_ok() {
                    bookings.push((now, n));
                }
            }
            1 => {
                if let Ok(r) = fw.reserve(&mut state, t, n, Duration::from_nanos(max_wait)) {
                    let at = now + r.wait().as_nanos() as u64;
                    prop_assert!(r.is_immediate() || at % window == 0, "waits end at an edge");
                    bookings.push((at, n));
                }
            }
            _ => {
                fw.refund(&mut state, t, n);
                let mut left = n;
                while left > 0 {
                    let Some(last) = bookings.last_mut() else {
                        break;
                    };
                    let take = left.min(last.1);
                    last.1 -= take;
                    left -= take;
                    if last.1 == 0 {
                        bookings.pop();
                    }
                }
            }
        }
        let mut per_window = std::collections::BTreeMap::new();
        for &(at, n) in &bookings {
            *per_window.entry(at / window).or_insert(0) += n;
        }
        for (w, used) in per_window {
            prop_assert!(used <= limit, "window {} holds {} > {}", w, used, limit);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn aligned_matches_the_reference(
        limit in 1u64..8,
        // At least 2^4 ns: room in the count field for a limit of 7.
        window in 16u64..5_000,
        offset in 0u64..10_000,
        ops in ops(5_000),
    ) {
        let fw = FixedWindow::new(limit, Duration::from_nanos(window))
            .unwrap()
            .aligned_to_unix_epoch(Duration::from_nanos(offset));
        let set_limit = |fw: &mut FixedWindow, limit| fw.set_limit(limit).unwrap();
        check(fw, set_limit, Reference::new(limit, window, Some(offset % window)), ops)?;
    }

    #[test]
    fn first_hit_matches_the_reference(
        limit in 1u64..8,
        window in 1u64..5_000,
        ops in ops(5_000),
    ) {
        let fw = FixedWindow::from_first_hit(limit, Duration::from_nanos(window)).unwrap();
        let set_limit = |fw: &mut FixedWindow<FirstHit>, limit| fw.set_limit(limit).unwrap();
        check(fw, set_limit, Reference::new(limit, window, None), ops)?;
    }

    #[test]
    fn aligned_windows_never_overfill(
        limit in 1u64..8,
        window in 16u64..1_000,
        ops in prop::collection::vec((0u64..1_500, 0u8..3, 0u64..9, 0u64..4_000), 1..150),
    ) {
        never_overfills(limit, window, ops)?;
    }
}

#[test]
fn threads_share_one_window_exactly() {
    let clock = ManualClock::new();
    let limiter = Arc::new(Limiter::with_clock(
        FixedWindow::new(1_000, Duration::from_secs(1)).unwrap(),
        clock,
    ));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let limiter = Arc::clone(&limiter);
            std::thread::spawn(move || (0..500).filter(|_| limiter.try_acquire(1).is_ok()).count())
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(admitted, 1_000);
}

#[test]
fn limiter_reconfigures_the_limit_lock_free() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(FixedWindow::new(1, Duration::from_secs(1)).unwrap(), clock);
    limiter.try_acquire(1).unwrap();
    limiter.reconfigure(|fw, _, _| fw.set_limit(2)).unwrap();
    assert!(limiter.try_acquire(1).is_ok());
    assert!(limiter.try_acquire(1).is_err());
    assert_eq!(
        limiter.reconfigure(|fw, _, _| fw.set_limit(1 << 40)),
        Err(ConfigError::OutOfRange {
            parameter: "limit",
            expected: "at most FixedWindow::max_limit(window): 2^32 - 1, and below about one per \
                       two nanoseconds of the window",
        })
    );
}

#[test]
fn first_hit_limiter_uses_a_lock() {
    let limiter = Limiter::with_clock(
        FixedWindow::from_first_hit(2, Duration::from_secs(1)).unwrap(),
        ManualClock::new(),
    );
    assert!(limiter.try_acquire(2).is_ok());
    let denied = limiter.try_acquire(1).unwrap_err();
    assert!(matches!(denied, Denied::Limited(_)));
    let _: FixedWindow<FirstHit> = limiter.algorithm();
}

/// Regression: raising the limit while reservations were booked into later windows
/// re-read the packed count under the new limit, and a booked window then admitted
/// more than the new limit.
#[test]
fn raising_the_limit_keeps_booked_windows_within_it() {
    let mut fw = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    let mut s = fw.initial_state(Nanos::ZERO);
    fw.acquire(&mut s, Nanos::ZERO, 10).unwrap();
    let first = fw
        .reserve(&mut s, Nanos::ZERO, 10, Duration::from_secs(1))
        .unwrap();
    let second = fw
        .reserve(&mut s, Nanos::ZERO, 5, Duration::from_secs(2))
        .unwrap();
    assert_eq!(
        (first.wait(), second.wait()),
        (Duration::from_secs(1), Duration::from_secs(2))
    );
    fw.set_limit(20).unwrap();
    // Window 1 holds the 10 booked; 15 more would make 25.
    assert!(
        fw.acquire(&mut s, Nanos::from_duration(Duration::from_secs(1)), 15)
            .is_err()
    );
}
