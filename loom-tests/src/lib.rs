//! Loom models of tollgate's concurrent structures, in `tests/`. Each model checks one
//! property over every interleaving of 2–3 threads, against tollgate built with
//! `--cfg loom` (its atomics, locks and fences then come from loom).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p loom-tests --release
//! ```
//!
//! Without `--cfg loom` the test files compile to nothing.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `future` once with a waker that does nothing: enough to queue a waiter that
/// the model then cancels by dropping it.
pub fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Noop));
    pin!(future).poll(&mut Context::from_waker(&waker))
}
