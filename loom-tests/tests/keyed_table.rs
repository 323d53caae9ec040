//! The keyed table (under `KeyedLimiter` and `MemoryStore`): insertions into a full
//! one-shard table racing each other, a sweep and updates of a key held.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use tollgate::algorithm::Gcra;
use tollgate::time::ManualClock;
use tollgate::{KeyedConfig, KeyedLimiter, Quota, WhenFull};

type Table = KeyedLimiter<u32, Gcra, ManualClock>;

/// One shard of `max_keys`, 10 per second with a burst of 3: a key that took one
/// permit is idle 100 ms later, one that took three 300 ms later.
fn table(max_keys: usize, when_full: WhenFull) -> (Arc<Table>, ManualClock) {
    let clock = ManualClock::new();
    let gcra = Gcra::new(Quota::per_second(10).unwrap().burst(3).unwrap());
    let config = KeyedConfig::new(max_keys).shards(1).when_full(when_full);
    let limiter = KeyedLimiter::with_clock(gcra, config, clock.clone()).unwrap();
    (Arc::new(limiter), clock)
}

/// Acquires one permit for `key` on another thread; the thread checks the bound
/// right after.
fn acquire(table: &Arc<Table>, key: u32) -> thread::JoinHandle<bool> {
    let table = Arc::clone(table);
    thread::spawn(move || {
        let admitted = table.try_acquire(&key, 1).is_ok();
        assert!(table.len() <= table.max_keys());
        admitted
    })
}

/// Two new keys race into a full table of two while a sweep runs: the table never
/// holds more than two keys, and both newcomers are served (the idle key is swept,
/// the live one nearest to idle evicted).
#[test]
fn racing_insertions_and_a_sweep_never_exceed_the_bound() {
    loom::model(|| {
        let (table, clock) = table(2, WhenFull::EvictNearestIdle);
        table.try_acquire(&1, 1).unwrap(); // idle at 100 ms
        table.try_acquire(&2, 3).unwrap(); // idle at 300 ms
        clock.advance(Duration::from_millis(100));
        let (a, b) = (acquire(&table, 3), acquire(&table, 4));
        table.sweep();
        assert!(table.len() <= 2);
        assert!(
            a.join().unwrap() && b.join().unwrap(),
            "a newcomer was denied"
        );
        assert_eq!(table.len(), 2);
    });
}

/// Two threads take a permit each from a key held while a third inserts a new key
/// into the full table: the new key evicts the other key, nearer to idle, and no
/// update of the shared key is lost: it ends with exactly its burst taken.
#[test]
fn a_key_two_threads_update_loses_no_update_to_an_insertion() {
    loom::model(|| {
        let (table, clock) = table(2, WhenFull::EvictNearestIdle);
        table.try_acquire(&2, 1).unwrap(); // idle at 100 ms
        clock.advance(Duration::from_millis(50));
        table.try_acquire(&1, 1).unwrap(); // idle at 150 ms, and later as it takes more
        let (a, b) = (acquire(&table, 1), acquire(&table, 1));
        let newcomer = table.try_acquire(&3, 1).is_ok();
        assert!(a.join().unwrap() && b.join().unwrap());
        assert!(newcomer);
        assert!(
            table.try_acquire(&1, 1).is_err(),
            "an update of key 1 was lost"
        );
        assert_eq!(table.len(), 2);
    });
}

/// Under `Deny`, two threads try to insert new keys into a table full of one live key
/// while a sweep runs: the live key is never evicted (its limit stays where it was),
/// and the newcomers are denied.
#[test]
fn a_denying_table_never_evicts_a_live_key() {
    loom::model(|| {
        let (table, _clock) = table(1, WhenFull::Deny);
        table.try_acquire(&1, 3).unwrap();
        let (a, b) = (acquire(&table, 2), acquire(&table, 3));
        assert_eq!(table.sweep(), 0);
        assert!(!a.join().unwrap() && !b.join().unwrap());
        assert!(table.try_acquire(&1, 1).is_err(), "key 1 was evicted live");
        assert_eq!(table.len(), 1);
    });
}
