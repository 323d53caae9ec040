//! The one place the crate takes its synchronisation primitives from: crate code does
//! not import `std::sync` elsewhere, so these can be swapped in this one spot.
//!
//! Under `--cfg loom` the atomics, the fence, the mutex, `spin_loop` and the thread
//! functions come from [loom](https://docs.rs/loom), so that the models in `loom-tests/`
//! explore every interleaving of the crate's own synchronisation.
//!
//! `Arc` and `Weak` are std's under both: loom's `Arc` has no `Weak` nor `new_cyclic`
//! (the waiter queue holds a `Weak` to itself to arm its alarms) and cannot coerce to
//! `Arc<dyn Alarm>`. The crate never counts references by hand, so std's counts are
//! not what needs checking; the atomics and locks the `Arc`s point to are loom's
//! either way, and loom sees every access to them.
//!
//! [`unmodeled`] holds std's primitives under both, for the scheduler thread: a real
//! thread that loom never runs.

pub(crate) use std::sync::{Arc, Weak};

#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence};

/// Parking and waking threads for the blocking waits.
#[allow(unused_imports)]
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Thread, current, park};

    #[cfg(loom)]
    pub(crate) use loom::thread::{Thread, current, park};
}

#[cfg(not(loom))]
pub(crate) use unmodeled::{Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use loom::sync::MutexGuard;

/// A mutex that shrugs off poisoning: every critical section in this crate leaves its
/// state consistent before anything that could panic, so a poisoned lock still holds
/// valid data.
#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn into_inner(self) -> T {
        self.0
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// As [`unmodeled::Mutex::lock_briefly`], whose spinning is a matter of speed
    /// alone: a model explores the plain lock.
    #[inline]
    pub(crate) fn lock_briefly(&self) -> MutexGuard<'_, T> {
        self.lock()
    }

    /// The lock if it is free now, shrugging off poisoning.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// std's primitives whatever the cfg, for code that runs on a real thread outside any
/// loom model (the scheduler thread). Without loom they are the same as the ones above.
pub(crate) mod unmodeled {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::{Arc, MutexGuard, OnceLock, Weak};

    /// A mutex that shrugs off poisoning: every critical section in this crate leaves
    /// its state consistent before anything that could panic, so a poisoned lock still
    /// holds valid data.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

    /// Attempts [`Mutex::lock_briefly`] makes before it yields, then blocks.
    #[cfg_attr(loom, allow(dead_code))]
    const ATTEMPTS: u32 = 16;

    /// Spin hints between two attempts (2.3 µs where a `pause` takes 9 ns). Closer
    /// attempts hand the lock over more often; see benches/README.md, "Session 5".
    #[cfg_attr(loom, allow(dead_code))]
    const SPINS_BETWEEN_ATTEMPTS: u32 = 256;

    /// Whether another CPU can run the holder while a waiter spins: with one, the
    /// spinning only delays it.
    #[cfg_attr(loom, allow(dead_code))]
    fn spinning_helps() -> bool {
        static SEVERAL_CPUS: OnceLock<bool> = OnceLock::new();
        *SEVERAL_CPUS
            .get_or_init(|| std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1))
    }

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Mutex<T> {
            Mutex(std::sync::Mutex::new(value))
        }

        #[cfg_attr(loom, allow(dead_code))]
        pub(crate) fn into_inner(self) -> T {
            self.0
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        /// Locks a mutex held only for short critical sections (a limiter's
        /// decision: no allocation, I/O or clock read inside), spinning rather than
        /// sleeping while it is taken.
        ///
        /// std's `lock` parks a waiter and marks the lock contended, so every later
        /// unlock is a system call: two threads deciding in a loop then take turns
        /// through the kernel. `try_lock` never marks it contended, and attempts
        /// spaced apart leave the holder its cache line for many decisions. After
        /// the attempts (tens to hundreds of microseconds, by the CPU's `pause`),
        /// this yields, then blocks as `lock` does; on one CPU it blocks at once.
        /// Implementers of [`Algorithm`](crate::algorithm::Algorithm) are expected
        /// to keep decisions that short.
        #[cfg_attr(loom, allow(dead_code))]
        #[inline]
        pub(crate) fn lock_briefly(&self) -> MutexGuard<'_, T> {
            match self.try_lock() {
                Some(guard) => guard,
                None => self.lock_contended(),
            }
        }

        /// [`lock_briefly`](Self::lock_briefly) once a first attempt failed.
        #[cfg_attr(loom, allow(dead_code))]
        #[cold]
        fn lock_contended(&self) -> MutexGuard<'_, T> {
            if !spinning_helps() {
                return self.lock();
            }
            for _ in 0..ATTEMPTS {
                for _ in 0..SPINS_BETWEEN_ATTEMPTS {
                    std::hint::spin_loop();
                }
                if let Some(guard) = self.try_lock() {
                    return guard;
                }
            }
            std::thread::yield_now();
            self.try_lock().unwrap_or_else(|| self.lock())
        }

        /// The lock if it is free now, shrugging off poisoning as
        /// [`lock`](Self::lock) does.
        #[cfg_attr(loom, allow(dead_code))]
        #[inline]
        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }
}

/// A reader-writer lock that shrugs off poisoning, as [`Mutex`] does: for tables read
/// on every decision and written only when a key comes or goes, so that readers on
/// several CPUs do not take turns.
#[derive(Debug, Default)]
pub(crate) struct RwLock<T>(
    #[cfg(not(loom))] std::sync::RwLock<T>,
    #[cfg(loom)] loom::sync::RwLock<T>,
);

#[cfg(not(loom))]
pub(crate) use std::sync::{RwLockReadGuard, RwLockWriteGuard};

#[cfg(loom)]
pub(crate) use loom::sync::{RwLockReadGuard, RwLockWriteGuard};

#[cfg_attr(not(feature = "redis"), allow(dead_code))]
impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> RwLock<T> {
        #[cfg(not(loom))]
        return RwLock(std::sync::RwLock::new(value));
        #[cfg(loom)]
        return RwLock(loom::sync::RwLock::new(value));
    }

    #[inline]
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::unmodeled::Mutex;
    use std::sync::Arc;

    #[test]
    fn lock_briefly_excludes_other_holders() {
        let counter = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut guard = counter.lock_briefly();
                        // A read and a write apart: a second holder would lose counts.
                        let seen = *guard;
                        std::hint::spin_loop();
                        *guard = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*counter.lock(), 80_000);
    }

    #[test]
    fn lock_briefly_waits_out_a_long_holder_and_shrugs_off_poison() {
        let value = Arc::new(Mutex::new(1u64));
        let locked = Arc::new(std::sync::Barrier::new(2));
        let holder = {
            let (value, locked) = (Arc::clone(&value), Arc::clone(&locked));
            std::thread::spawn(move || {
                let _guard = value.lock();
                locked.wait();
                // Held past every spinning attempt, so the waiter ends up blocking;
                // then it poisons the lock.
                std::thread::sleep(std::time::Duration::from_millis(50));
                panic!("poisons the lock");
            })
        };
        locked.wait();
        *value.lock_briefly() += 1;
        assert!(holder.join().is_err());
        assert_eq!(*value.lock_briefly(), 2);
    }
}
