//! A flood of unique keys against a full keyed table: 10 million random keys against a
//! bound of a million, with 100 well-behaved clients among them, for `KeyedLimiter`
//! and `MemoryStore` (one table under both). Memory stays within the bound, every
//! well-behaved client gets its whole quota with its limit intact, and a flooder
//! cannot reset its own key's limit by flooding others. Smaller floods show what the
//! other policies give newcomers.
//!
//! Time is a `ManualClock` moving 1 µs per flood request, and quotas are per day: a
//! flood key stays live (not idle) for hours, far longer than the flood, so a table
//! that only forgot idle keys would be full of them from the millionth request on.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
#[cfg(feature = "store")]
use std::fmt::Write;
use std::time::Duration;

use tollgate::algorithm::{Algorithm, FixedWindow, Gcra, SlidingCounter, SlidingLog};
#[cfg(feature = "store")]
use tollgate::store::{Check, MemoryStore, Op, Request, Rule};
use tollgate::time::ManualClock;
use tollgate::{KeyedConfig, KeyedLimiter, Quota, WhenFull};

/// Counts the bytes each thread holds on the heap, so that a test can weigh the table
/// it builds while other tests run on other threads.
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn count(bytes: isize) {
    // During thread teardown the counter may be gone: nothing to weigh then.
    let _ = HELD.try_with(|held| held.set(held.get() + bytes));
}

// SAFETY: every call is forwarded unchanged to `System`; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe {
            let ptr = System.alloc(layout);
            if !ptr.is_null() {
                count(layout.size() as isize);
            }
            ptr
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe {
            let ptr = System.alloc_zeroed(layout);
            if !ptr.is_null() {
                count(layout.size() as isize);
            }
            ptr
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            System.dealloc(ptr, layout);
            count(-(layout.size() as isize));
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe {
            let new = System.realloc(ptr, layout, new_size);
            if !new.is_null() {
                count(new_size as isize - layout.size() as isize);
            }
            new
        }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread holds on the heap.
fn held() -> usize {
    HELD.with(Cell::get).max(0) as usize
}

/// Random keys: xorshift64*, seeded, so a failure replays.
struct Keys(u64);

impl Keys {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Each client's quota: ten a day, all at once if it likes.
const QUOTA: u64 = 10;

fn per_day() -> Quota {
    Quota::per_day(QUOTA).unwrap()
}

const STEP: Duration = Duration::from_micros(1);

/// A flood, and clients among it, in proportion.
#[derive(Clone, Copy)]
struct Flood {
    /// Unique keys sent, one request of one permit each.
    keys: u64,
    max_keys: usize,
    /// A thousand keys or fewer each, as by default, whatever the machine.
    shards: usize,
    /// Well-behaved clients, one after another: each sends its quota, one request
    /// every `keys / (clients × (QUOTA + 1))` flood requests, then one more request,
    /// which must be denied.
    clients: u64,
}

/// The full-size flood: 10⁷ keys against 10⁶, with a client request every 9,090
/// flood requests.
const FULL: Flood = Flood {
    keys: 10_000_000,
    max_keys: 1_000_000,
    shards: 1024,
    clients: 100,
};

/// A tenth of it, in the same proportions: ten times the bound in unique keys, and
/// 100 clients each sending their quota and one more request.
const TENTH: Flood = Flood {
    keys: 1_000_000,
    max_keys: 100_000,
    shards: 128,
    clients: 100,
};

/// A hundredth of it, in the same proportions.
const HUNDREDTH: Flood = Flood {
    keys: 100_000,
    max_keys: 10_000,
    shards: 16,
    clients: 100,
};

/// The flood this build runs: the full size in a release build (`cargo test --release
/// --test flood`: 17 s for the whole file on two shared cores), a tenth in a debug
/// build (6 s; the full size takes minutes unoptimised). Either way the flood is ten
/// times the bound.
const FLOOD: Flood = if cfg!(debug_assertions) { TENTH } else { FULL };

/// The flood for the other policies and the flooder, a tenth of [`FLOOD`].
const SMALL: Flood = if cfg!(debug_assertions) {
    HUNDREDTH
} else {
    TENTH
};

/// What a flood did to the clients: how many of their requests within their quota
/// were admitted, and how many beyond it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Served {
    within: u64,
    beyond: u64,
}

impl Flood {
    /// Runs the flood through `decide(key, is_client)`, checking the bound every
    /// 100,000 requests with `len` and weighing the heap; returns what the clients
    /// got and the most bytes held once the table was full.
    fn run(
        self,
        clock: &ManualClock,
        mut decide: impl FnMut(u64, bool) -> bool,
        len: impl Fn() -> usize,
    ) -> (Served, usize) {
        let every = self.keys / (self.clients * (QUOTA + 1));
        let mut keys = Keys(0x9e37_79b9_7f4a_7c15);
        let mut served = Served::default();
        let (mut client, mut sent) = (0, 0);
        let mut heaviest = 0;
        for i in 0..self.keys {
            decide(keys.next(), false);
            clock.advance(STEP);
            if i % every == every - 1 && client < self.clients {
                let admitted = decide(client, true);
                if sent < QUOTA {
                    served.within += u64::from(admitted);
                } else {
                    served.beyond += u64::from(admitted);
                }
                sent += 1;
                if sent > QUOTA {
                    (client, sent) = (client + 1, 0);
                }
            }
            if i % 100_000 == 99_999 {
                let len = len();
                assert!(len <= self.max_keys, "{len} keys held at request {i}");
                if len == self.max_keys {
                    heaviest = heaviest.max(held());
                }
            }
        }
        (served, heaviest)
    }

    fn config(self, when_full: WhenFull) -> KeyedConfig {
        KeyedConfig::new(self.max_keys)
            .shards(self.shards)
            .when_full(when_full)
    }

    fn all_served(self) -> Served {
        Served {
            within: self.clients * QUOTA,
            beyond: 0,
        }
    }
}

fn keyed(flood: Flood, when_full: WhenFull) -> (KeyedLimiter<u64, Gcra, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let config = flood.config(when_full);
    let limiter = KeyedLimiter::with_clock(Gcra::new(per_day()), config, clock.clone()).unwrap();
    (limiter, clock)
}

/// Client keys are small numbers, flood keys random ones: they never meet.
fn keyed_flood(flood: Flood, when_full: WhenFull) -> (Served, usize) {
    let (limiter, clock) = keyed(flood, when_full);
    let before = held();
    let (served, heaviest) = flood.run(
        &clock,
        |key, _| limiter.try_acquire(&key, 1).is_ok(),
        || limiter.len(),
    );
    (served, heaviest.saturating_sub(before))
}

/// The memory store's tags: `c` and the client number, or `f` and a random number in
/// hex, short enough to be held inline in the entry.
#[cfg(feature = "store")]
fn store_flood(flood: Flood, when_full: WhenFull) -> (Served, usize) {
    let clock = ManualClock::new();
    let store = MemoryStore::with_clock(flood.config(when_full), "flood", clock.clone()).unwrap();
    let rule = Rule::from(Gcra::new(per_day()));
    let checks = [Check::new("", &rule)];
    let mut tag = String::with_capacity(32);
    let before = held();
    let (served, heaviest) = flood.run(
        &clock,
        |key, client| {
            tag.clear();
            let _ = write!(tag, "{}{key:x}", if client { 'c' } else { 'f' });
            let request = Request::new(&tag, &checks, Op::Acquire(1));
            store.execute_now(&request).unwrap().is_admitted()
        },
        || store.len(),
    );
    (served, heaviest.saturating_sub(before))
}

/// Checks the heap a full table held against its entries' size. A shard's hash
/// table holds an entry and a control byte per bucket, with up to 16/7 buckets per key
/// rounded up to a power of two: when evictions leave it no free bucket while it is
/// more than half full, hashbrown doubles it once rather than rehash it in place.
fn within_bytes_per_key(heaviest: usize, max_keys: usize, entry: usize) {
    let per_key = (entry + 1) * 32 / 7;
    assert!(heaviest > 0, "the table never filled");
    assert!(
        heaviest <= max_keys * per_key,
        "{heaviest} bytes held for {max_keys} keys: more than {per_key} each"
    );
}

#[test]
fn keyed_flood_of_ten_times_max_keys_serves_every_client_within_the_bound() {
    let (served, heaviest) = keyed_flood(FLOOD, WhenFull::EvictNearestIdle);
    assert_eq!(served, FLOOD.all_served());
    // A `u64` key and a `u64` state.
    within_bytes_per_key(heaviest, FLOOD.max_keys, 16);
}

#[cfg(feature = "store")]
#[test]
fn store_flood_of_ten_times_max_keys_serves_every_client_within_the_bound() {
    let (served, heaviest) = store_flood(FLOOD, WhenFull::EvictNearestIdle);
    assert_eq!(served, FLOOD.all_served());
    // The name inline, its hash, a rule's state and two times: under 96 bytes.
    within_bytes_per_key(heaviest, FLOOD.max_keys, 96);
}

/// Under `Deny`, clients that came before the table filled are served; from then on
/// newcomers get nothing, for as long as the flood's keys stay live: hours here.
#[test]
fn a_denying_table_locks_newcomers_out_once_full() {
    let floods = [
        keyed_flood(SMALL, WhenFull::Deny),
        #[cfg(feature = "store")]
        store_flood(SMALL, WhenFull::Deny),
    ];
    for (served, _) in floods {
        // The table is full after a tenth of the flood: the time of ten clients, give
        // or take the two whose shards fill a little before or after the rest.
        assert!(served.within <= 12 * QUOTA, "{served:?}");
        assert!(served.within >= 9 * QUOTA, "{served:?}");
        assert_eq!(served.beyond, 0, "those stored keep their limits");
    }
}

/// Under `Overflow`, newcomers share the overflow limit with the flood: one permit a
/// millisecond against a flood request every microsecond, so a newcomer's request
/// finds it free about once in a thousand. Clients stored before the table filled
/// keep exact limits; a newcomer has no limit of its own, only the overflow's.
#[test]
fn an_overflowing_table_shares_its_overflow_limit_with_the_flood() {
    let overflow = WhenFull::Overflow(Quota::per_second(1_000).unwrap().burst(1).unwrap());
    let floods = [
        keyed_flood(SMALL, overflow),
        #[cfg(feature = "store")]
        store_flood(SMALL, overflow),
    ];
    for (served, _) in floods {
        let served = served.within + served.beyond;
        assert!(served >= 9 * QUOTA, "{served}");
        assert!(served <= 12 * QUOTA + 10, "{served}");
    }
}

/// A flooder uses its own key up to its limit, then sends a million unique keys,
/// retrying its own key every thousand. The bug this guards against: evicting a live
/// key resets its limit, so a table that evicted the oldest or a random key would
/// hand the flooder a fresh quota.
#[test]
fn a_flooder_cannot_reset_its_own_key_by_flooding_others() {
    for when_full in [
        WhenFull::EvictNearestIdle,
        WhenFull::Deny,
        WhenFull::Overflow(Quota::per_second(1_000).unwrap()),
    ] {
        let (limiter, clock) = keyed(SMALL, when_full);
        let own = u64::MAX;
        limiter.try_acquire(&own, QUOTA).unwrap();
        let mut keys = Keys(7);
        for i in 0..SMALL.keys {
            let _ = limiter.try_acquire(&keys.next(), 1);
            clock.advance(STEP);
            if i % 1_000 == 0 {
                assert!(limiter.try_acquire(&own, 1).is_err(), "{when_full:?}, {i}");
            }
        }
        assert!(limiter.len() <= SMALL.max_keys);
        // One emission interval later the key has regained one permit, and no more.
        clock.advance(per_day().emission_interval());
        assert!(limiter.try_acquire(&own, 1).is_ok(), "{when_full:?}");
        assert!(limiter.try_acquire(&own, 1).is_err(), "{when_full:?}");
    }
}

/// The same for the memory store.
#[cfg(feature = "store")]
#[test]
fn a_flooder_cannot_reset_its_own_store_key_by_flooding_others() {
    let clock = ManualClock::new();
    let store =
        MemoryStore::with_clock(KeyedConfig::new(SMALL.max_keys), "f", clock.clone()).unwrap();
    let rule = Rule::from(Gcra::new(per_day()));
    let checks = [Check::new("", &rule)];
    let decide = |tag: &str, n: u64| {
        let request = Request::new(tag, &checks, Op::Acquire(n));
        store.execute_now(&request).unwrap().is_admitted()
    };
    assert!(decide("own", QUOTA));
    let mut keys = Keys(11);
    let mut tag = String::with_capacity(32);
    for i in 0..SMALL.keys {
        tag.clear();
        let _ = write!(tag, "{:x}", keys.next());
        decide(&tag, 1);
        clock.advance(STEP);
        if i % 1_000 == 0 {
            assert!(!decide("own", 1), "{i}");
        }
    }
    assert!(store.len() <= SMALL.max_keys);
    clock.advance(per_day().emission_interval());
    assert!(decide("own", 1));
    assert!(!decide("own", 1));
}

/// The flooder of [`a_flooder_cannot_reset_its_own_key_by_flooding_others`], against
/// windows of a day: its own key spends the window's quota, then a flood of unique
/// keys sends one request each, and the own key is retried every thousand.
fn own_window_survives_the_flood<A: Algorithm>(name: &str, algorithm: A) {
    let clock = ManualClock::new();
    let config = SMALL.config(WhenFull::EvictNearestIdle);
    let limiter: KeyedLimiter<u64, A, ManualClock> =
        KeyedLimiter::with_clock(algorithm, config, clock.clone()).unwrap();
    let own = u64::MAX;
    limiter.try_acquire(&own, QUOTA).unwrap();
    let mut keys = Keys(13);
    for i in 0..SMALL.keys {
        let _ = limiter.try_acquire(&keys.next(), 1);
        clock.advance(STEP);
        if i % 1_000 == 0 {
            assert!(limiter.try_acquire(&own, 1).is_err(), "{name}, {i}");
        }
    }
    assert!(limiter.len() <= SMALL.max_keys);
}

/// Regression: in a full table, a key of a window spent to its limit was evicted
/// among the first, though forgetting it gave back the whole quota and forgetting a
/// flood key one permit: its sliding log's window ended before any flood key's, and
/// every key of a fixed window tied on the window's end. The flooder's key then
/// started its quota again in the same window.
#[test]
fn a_flooder_cannot_reset_its_own_window_by_flooding_others() {
    let day = Duration::from_secs(86_400);
    own_window_survives_the_flood("sliding log", SlidingLog::new(QUOTA, day).unwrap());
    own_window_survives_the_flood("fixed window", FixedWindow::new(QUOTA, day).unwrap());
    own_window_survives_the_flood(
        "first-hit window",
        FixedWindow::from_first_hit(QUOTA, day).unwrap(),
    );
    own_window_survives_the_flood("sliding counter", SlidingCounter::new(QUOTA, day).unwrap());
}
