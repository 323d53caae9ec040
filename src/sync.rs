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
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Parking and waking threads for the blocking waits.
#[allow(unused_imports)]
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{current, park, Thread};

    #[cfg(loom)]
    pub(crate) use loom::thread::{current, park, Thread};
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

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(std::sync::Mutex::new(value))
        }

        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }
    }
}
