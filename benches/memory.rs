//! Heap accounting for the bench binary: a global allocator that wraps the system's
//! and counts the bytes live and the peak, so a benchmark can say exactly how much a
//! structure holds (`keyed.rs` weighs a keyed limiter filled with a million keys).
//!
//! Counting costs one or two relaxed atomic operations per allocation. The limiters'
//! hot paths allocate nothing, so timings are unaffected.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static COUNTING: Counting = Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe {
            let ptr = System.alloc(layout);
            if !ptr.is_null() {
                grew(layout.size());
            }
            ptr
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe {
            let ptr = System.alloc_zeroed(layout);
            if !ptr.is_null() {
                grew(layout.size());
            }
            ptr
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            System.dealloc(ptr, layout);
            shrank(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe {
            let new = System.realloc(ptr, layout, new_size);
            if !new.is_null() {
                if new_size >= layout.size() {
                    grew(new_size - layout.size());
                } else {
                    shrank(layout.size() - new_size);
                }
            }
            new
        }
    }
}

/// What building something left on the heap.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    /// Bytes still allocated when the build returned.
    pub live: usize,
    /// The most bytes allocated at once during the build, above what was live before.
    pub peak: usize,
}

/// Runs `build` and reports the heap it left allocated and its peak. Only meaningful
/// while no other thread allocates.
pub fn measure<T>(build: impl FnOnce() -> T) -> (T, Usage) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let value = build();
    let after = LIVE.load(Ordering::Relaxed);
    let peak = PEAK.load(Ordering::Relaxed);
    let usage = Usage {
        live: after.saturating_sub(before),
        peak: peak.saturating_sub(before),
    };
    (value, usage)
}
