//! Work a caller no longer waits for (a refund, a booking whose waiter left), run to
//! its end without the caller: at once if it can end at once, otherwise as a task on
//! the current tokio runtime (the Redis store's).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Wake, Waker};

use crate::sync::Arc;

/// Work that owns what it needs.
pub(crate) type Detached = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Polls `work` once, and hands what is left to the current tokio runtime. Without a
/// runtime to finish it, work that cannot end at once is dropped: what it would have
/// given back then stays unused until its time passes.
pub(crate) fn run_detached(mut work: Detached) {
    let waker = noop_waker();
    if work
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending()
    {
        finish(work);
    }
}

#[cfg(feature = "redis")]
fn finish(work: Detached) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(work);
    }
}

#[cfg(not(feature = "redis"))]
fn finish(work: Detached) {
    drop(work);
}

fn noop_waker() -> Waker {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}
