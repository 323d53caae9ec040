//! Sleeping on a [`Clock`]: a future that resolves once the clock reads a deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{Alarm, Clock, Nanos};
use crate::sync::{Arc, Mutex};

/// A future that resolves once its clock reads the deadline, on any executor: the
/// clock's alarm wakes it ([`ManualClock::advance`](super::ManualClock::advance)
/// in tests, the [`Scheduler`](super::Scheduler) thread otherwise).
///
/// # Examples
///
/// ```
/// use std::future::Future;
/// use std::time::Duration;
/// use tollgate::time::ManualClock;
/// use tollgate::time::Sleep;
///
/// let clock = ManualClock::new();
/// let mut nap = Box::pin(Sleep::new(clock.clone(), Duration::from_secs(1)));
/// let waker = futures::task::noop_waker();
/// let mut cx = std::task::Context::from_waker(&waker);
/// assert!(nap.as_mut().poll(&mut cx).is_pending());
/// clock.advance(Duration::from_secs(1));
/// assert!(nap.as_mut().poll(&mut cx).is_ready());
/// ```
///
/// # Cancel safety
///
/// Dropping it cancels nothing but the alarm, which the clock then may skip.
#[derive(Debug)]
pub struct Sleep<C: Clock> {
    clock: C,
    deadline: Nanos,
    alarm: Option<Arc<Wakeup>>,
}

#[derive(Debug, Default)]
struct Wakeup {
    waker: Mutex<Option<Waker>>,
}

impl Alarm for Wakeup {
    fn ring(&self) {
        let waker = self.waker.lock().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<C: Clock> Sleep<C> {
    /// Sleeps `duration` from now on `clock`.
    pub fn new(clock: C, duration: Duration) -> Sleep<C> {
        let deadline = clock.now() + duration;
        Sleep::until(clock, deadline)
    }

    /// Sleeps until `clock` reads `deadline`.
    pub fn until(clock: C, deadline: Nanos) -> Sleep<C> {
        Sleep {
            clock,
            deadline,
            alarm: None,
        }
    }

    /// When it resolves.
    pub fn deadline(&self) -> Nanos {
        self.deadline
    }
}

impl<C: Clock> Unpin for Sleep<C> {}

impl<C: Clock> Future for Sleep<C> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.clock.now() >= this.deadline {
            this.alarm = None;
            return Poll::Ready(());
        }
        let first = this.alarm.is_none();
        let alarm = this.alarm.get_or_insert_with(Arc::default);
        *alarm.waker.lock() = Some(cx.waker().clone());
        if first {
            // No lock is held here: a clock may ring an alarm that is already due at once.
            this.clock.set_alarm(this.deadline, alarm.clone());
        }
        // The alarm may have rung between the check above and the waker's store.
        if this.clock.now() >= this.deadline {
            this.alarm = None;
            return Poll::Ready(());
        }
        Poll::Pending
    }
}
