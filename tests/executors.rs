//! Waiting works on any executor: tokio's multi-thread and current-thread runtimes,
//! `futures::executor`, and plain threads blocking in `acquire_blocking`.
//!
//! Virtual time is moved by a driver thread that advances a `ManualClock` one emission
//! interval whenever the limiter's alarm is set; each move rings it, which grants
//! exactly one permit. Tests on the real clock use tiny waits and assert completion
//! only, never timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use futures::executor::{LocalPool, block_on};
use futures::task::LocalSpawnExt;
use tollgate::AcquireError;
use tollgate::algorithm::Gcra;
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{LeakyQueue, Limiter, Quota, Semaphore};

const TASKS: u64 = 200;
const BURST: u64 = 10;
const INTERVAL: Duration = Duration::from_millis(10);

type Virtual = Limiter<Gcra, ManualClock>;

fn virtual_limiter() -> (Virtual, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::with_period(INTERVAL).unwrap().burst(BURST).unwrap();
    (Limiter::with_clock(Gcra::new(quota), clock.clone()), clock)
}

/// Moves `clock` one interval at a time while a waiter on `limiter` waits for an alarm, checking
/// that never more than the burst plus one permit per interval were granted, until
/// `granted` reaches `total`. Returns how many intervals passed.
fn drive(clock: ManualClock, granted: Arc<AtomicU64>, total: u64) -> u64 {
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut steps = 0;
    while granted.load(Ordering::SeqCst) < total {
        assert!(Instant::now() < give_up, "the waiters never finished");
        // Only while an alarm is set and not yet due: an alarm being rung on a
        // waiter's thread has not granted its permit yet.
        if clock.next_alarm().is_some_and(|at| at > clock.now()) {
            clock.advance(INTERVAL);
            steps += 1;
        } else {
            thread::yield_now();
        }
        let seen = granted.load(Ordering::SeqCst);
        assert!(
            seen <= BURST + steps,
            "{seen} granted after {steps} intervals"
        );
    }
    steps
}

/// Runs `drive` on its own thread.
fn driver(clock: &ManualClock, granted: &Arc<AtomicU64>) -> thread::JoinHandle<u64> {
    let (clock, granted) = (clock.clone(), Arc::clone(granted));
    thread::spawn(move || drive(clock, granted, TASKS))
}

/// After every waiter was served: exactly the limit was admitted.
fn assert_admitted_exactly_the_limit(limiter: &Virtual, clock: &ManualClock, steps: u64) {
    assert_eq!(
        steps,
        TASKS - BURST,
        "one interval per permit past the burst"
    );
    let spent = INTERVAL * u32::try_from(TASKS - BURST).unwrap();
    assert_eq!(clock.now(), Nanos::from_duration(spent));
    assert_eq!(limiter.waiters(), 0);
    assert!(limiter.try_acquire(1).is_err(), "the limit is spent");
    assert_eq!(clock.pending_alarms(), 0);
}

#[test]
fn many_tasks_on_tokio_multi_thread_all_complete_within_the_limit() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    let (limiter, clock) = virtual_limiter();
    let granted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (limiter, granted) = (limiter.clone(), Arc::clone(&granted));
            runtime.spawn(async move {
                limiter.acquire(1).await.unwrap();
                granted.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let steps = driver(&clock, &granted).join().unwrap();
    runtime.block_on(async {
        for task in tasks {
            task.await.unwrap();
        }
    });
    assert_admitted_exactly_the_limit(&limiter, &clock, steps);
}

#[test]
fn many_tasks_on_tokio_current_thread_all_complete_within_the_limit() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (limiter, clock) = virtual_limiter();
    let granted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (limiter, granted) = (limiter.clone(), Arc::clone(&granted));
            runtime.spawn(async move {
                limiter.acquire(1).await.unwrap();
                granted.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let drive = driver(&clock, &granted);
    runtime.block_on(async {
        for task in tasks {
            task.await.unwrap();
        }
    });
    let steps = drive.join().unwrap();
    assert_admitted_exactly_the_limit(&limiter, &clock, steps);
}

#[test]
fn many_tasks_on_a_futures_local_pool_all_complete_within_the_limit() {
    let (limiter, clock) = virtual_limiter();
    let granted = Arc::new(AtomicU64::new(0));
    let mut pool = LocalPool::new();
    for _ in 0..TASKS {
        let (limiter, granted) = (limiter.clone(), Arc::clone(&granted));
        pool.spawner()
            .spawn_local(async move {
                limiter.acquire(1).await.unwrap();
                granted.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    let drive = driver(&clock, &granted);
    pool.run();
    let steps = drive.join().unwrap();
    assert_eq!(granted.load(Ordering::SeqCst), TASKS);
    assert_admitted_exactly_the_limit(&limiter, &clock, steps);
}

#[test]
fn block_on_waits_for_a_clock_moved_by_another_thread() {
    let (limiter, clock) = virtual_limiter();
    let granted = Arc::new(AtomicU64::new(0));
    let drive = driver(&clock, &granted);
    block_on(async {
        for _ in 0..TASKS {
            limiter.acquire(1).await.unwrap();
            granted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let steps = drive.join().unwrap();
    assert_admitted_exactly_the_limit(&limiter, &clock, steps);
}

#[test]
fn acquire_blocking_from_plain_threads_all_complete_within_the_limit() {
    let (limiter, clock) = virtual_limiter();
    let granted = Arc::new(AtomicU64::new(0));
    let drive = driver(&clock, &granted);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (limiter, granted) = (limiter.clone(), Arc::clone(&granted));
            thread::spawn(move || {
                for _ in 0..TASKS / 8 {
                    limiter.acquire_blocking(1).unwrap();
                    granted.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let steps = drive.join().unwrap();
    assert_admitted_exactly_the_limit(&limiter, &clock, steps);
}

#[test]
fn semaphore_acquire_blocking_from_threads_never_exceeds_the_maximum() {
    let semaphore = Arc::new(Semaphore::new(3).unwrap());
    let holding = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (semaphore, holding, most) = (
                Arc::clone(&semaphore),
                Arc::clone(&holding),
                Arc::clone(&most),
            );
            thread::spawn(move || {
                for _ in 0..200 {
                    let permit = semaphore.acquire_blocking(1).unwrap();
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::yield_now();
                    holding.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(most.load(Ordering::SeqCst) <= 3);
    assert_eq!(semaphore.available_permits(), 3);
    assert_eq!(semaphore.waiters(), 0);
}

#[test]
fn semaphore_acquire_owned_on_tokio_serves_every_task() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    let semaphore = Arc::new(Semaphore::new(2).unwrap());
    let holding = Arc::new(AtomicU64::new(0));
    runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (semaphore, holding) = (Arc::clone(&semaphore), Arc::clone(&holding));
                tokio::spawn(async move {
                    let permit = semaphore.acquire_owned(1).await.unwrap();
                    assert!(holding.fetch_add(1, Ordering::SeqCst) < 2);
                    tokio::task::yield_now().await;
                    holding.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    assert_eq!(semaphore.available_permits(), 2);
}

#[test]
fn tokio_timeout_drops_the_wait_and_gives_its_booking_back() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (limiter, clock) = virtual_limiter();
    limiter.try_acquire(BURST).unwrap();
    let before = limiter.state();
    runtime.block_on(async {
        // The manual clock never moves: tokio's timer gives up on it.
        let waited = tokio::time::timeout(Duration::from_millis(5), limiter.acquire(1)).await;
        assert!(waited.is_err());
    });
    assert_eq!(limiter.waiters(), 0);
    assert_eq!(limiter.state(), before, "the booking was given back");
    clock.advance(INTERVAL);
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn aborting_a_waiting_tokio_task_moves_the_next_waiter_up() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (limiter, clock) = virtual_limiter();
    limiter.try_acquire(BURST).unwrap();
    runtime.block_on(async {
        let first = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.acquire(1).await })
        };
        while limiter.waiters() < 1 {
            tokio::task::yield_now().await;
        }
        let second = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.acquire(1).await })
        };
        while limiter.waiters() < 2 {
            tokio::task::yield_now().await;
        }
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        assert_eq!(limiter.waiters(), 1);
        // The second took the first's place: one interval serves it.
        clock.advance(INTERVAL);
        assert_eq!(second.await.unwrap(), Ok(INTERVAL));
    });
}

#[test]
fn tokio_select_drops_the_losing_wait() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (limiter, _clock) = virtual_limiter();
    limiter.try_acquire(BURST).unwrap();
    let before = limiter.state();
    runtime.block_on(async {
        tokio::select! {
            biased;
            _ = limiter.acquire(1) => panic!("no permit is free"),
            () = tokio::task::yield_now() => {}
        }
    });
    assert_eq!(limiter.waiters(), 0);
    assert_eq!(limiter.state(), before);
}

#[test]
fn close_wakes_tasks_on_every_executor() {
    let (limiter, _clock) = virtual_limiter();
    limiter.try_acquire(BURST).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tokio_waiter = {
        let limiter = limiter.clone();
        runtime.spawn(async move { limiter.acquire(1).await })
    };
    let thread_waiter = {
        let limiter = limiter.clone();
        thread::spawn(move || limiter.acquire_blocking(1))
    };
    let block_on_waiter = {
        let limiter = limiter.clone();
        thread::spawn(move || block_on(limiter.acquire(1)))
    };
    let give_up = Instant::now() + Duration::from_secs(30);
    while limiter.waiters() < 3 {
        assert!(Instant::now() < give_up);
        thread::yield_now();
    }
    limiter.close();
    assert_eq!(
        runtime.block_on(tokio_waiter).unwrap(),
        Err(AcquireError::Closed)
    );
    assert_eq!(thread_waiter.join().unwrap(), Err(AcquireError::Closed));
    assert_eq!(block_on_waiter.join().unwrap(), Err(AcquireError::Closed));
}

// ---------------------------------------------------------------------------------
// The real clock and the global scheduler: completion only.
// ---------------------------------------------------------------------------------

/// 1,000 per second with a burst of 5: 50 requests wait about 45 ms in all.
fn real_limiter() -> Limiter<Gcra> {
    Limiter::new(Gcra::new(
        Quota::per_second(1000).unwrap().burst(5).unwrap(),
    ))
}

#[test]
fn real_clock_tasks_complete_on_tokio_multi_thread() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    let limiter = real_limiter();
    let done = runtime.block_on(async {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.acquire(1).await })
            })
            .collect();
        let mut done = 0;
        for task in tasks {
            task.await.unwrap().unwrap();
            done += 1;
        }
        done
    });
    assert_eq!(done, 50);
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn real_clock_tasks_complete_on_tokio_current_thread() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let limiter = real_limiter();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.acquire(1).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    });
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn real_clock_waits_complete_under_block_on_and_on_threads() {
    let limiter = real_limiter();
    block_on(async {
        for _ in 0..20 {
            limiter.acquire(1).await.unwrap();
        }
    });
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let limiter = limiter.clone();
            thread::spawn(move || {
                for _ in 0..5 {
                    limiter.acquire_blocking(1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn real_clock_leaky_queue_drains_every_request() {
    let queue = Arc::new(LeakyQueue::new(20, Quota::per_second(1000).unwrap()).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let left = Arc::new(AtomicU64::new(0));
    runtime.block_on(async {
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (queue, left) = (Arc::clone(&queue), Arc::clone(&left));
                tokio::spawn(async move {
                    queue.enqueue(1).await.unwrap();
                    left.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    let blocked = queue.enqueue_blocking(1);
    assert!(blocked.is_ok() || blocked == Err(AcquireError::QueueFull { capacity: 20 }));
    assert_eq!(left.load(Ordering::SeqCst), 20);
    assert_eq!(queue.waiters(), 0);
}

#[test]
fn a_thread_blocked_before_close_sees_it() {
    let (limiter, _clock) = virtual_limiter();
    limiter.try_acquire(BURST).unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (limiter, started) = (limiter.clone(), Arc::clone(&started));
        thread::spawn(move || {
            started.store(true, Ordering::SeqCst);
            limiter.acquire_blocking(1)
        })
    };
    while !started.load(Ordering::SeqCst) || limiter.waiters() == 0 {
        thread::yield_now();
    }
    limiter.close();
    assert_eq!(waiter.join().unwrap(), Err(AcquireError::Closed));
}
