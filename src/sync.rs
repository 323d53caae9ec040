//! The one place the crate takes its synchronisation primitives from: crate code does
//! not import `std::sync` elsewhere, so these can be swapped in this one spot.

pub(crate) use std::hint::spin_loop;
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};
pub(crate) use std::sync::{Arc, Weak};

/// A mutex that shrugs off poisoning: every critical section in this crate leaves its
/// state consistent before anything that could panic, so a poisoned lock still holds
/// valid data.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(value))
    }

    #[inline]
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
