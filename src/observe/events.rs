//! [`Events`]: a named hub that limiters emit into and listeners subscribe to.

use std::fmt;
use std::time::Duration;

use super::event::{Event, EventKind};
use crate::sync::{Arc, AtomicBool, Mutex, Ordering, Weak};

/// Receives events. Any `Fn(&Event<'_>) + Send + Sync + 'static` is a listener.
///
/// A listener runs on the thread that made the decision, inside the call (a
/// `try_acquire`, the poll that completes an `acquire`), with no lock of the limiter
/// or the hub held: it should be short and must not block. It may use the limiter it
/// listens to, and subscribe or unsubscribe. A listener that panics unwinds into that
/// call, after the decision was made.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tollgate::observe::{Event, Events, Listener};
///
/// #[derive(Default)]
/// struct Denials(AtomicU64);
///
/// impl Listener for Denials {
///     fn on_event(&self, event: &Event<'_>) {
///         if event.kind.is_denied() {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let events = Events::new("api");
/// let _subscription = events.subscribe(Denials::default());
/// ```
pub trait Listener: Send + Sync + 'static {
    /// Called once per event, in the order the emitting thread emits them; an
    /// event emitted by a listener (directly, or by deciding on a limiter that
    /// reports here) reaches the listeners after it before the event it handles.
    fn on_event(&self, event: &Event<'_>);
}

impl<F> Listener for F
where
    F: Fn(&Event<'_>) + Send + Sync + 'static,
{
    fn on_event(&self, event: &Event<'_>) {
        self(event)
    }
}

/// A named hub of [`Listener`]s: limiters emit into it, listeners subscribe to it.
///
/// Attach one to a limiter with [`Limiter::with_events`](crate::Limiter::with_events)
/// (or [`KeyedLimiter`](crate::KeyedLimiter),
/// `SharedLimiter`, [`LeakyQueue`](crate::LeakyQueue),
/// [`Semaphore`](crate::Semaphore)); any other component (an HTTP layer) can hold a
/// clone and [`emit`](Events::emit) its own events. Clones share the hub; several
/// limiters may share one, each event then naming the hub as its
/// [`source`](Event::source). The name should be one of a few fixed names: metrics
/// label their series with it.
///
/// While nobody listens, emitting is one relaxed load of a flag, and a limiter with
/// no `Events` attached checks one `Option`: the deciding path is not slowed.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::observe::{DenyReason, Event, EventKind, Events};
/// use tollgate::{Limiter, Quota};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let events = Events::new("api");
/// let subscription = events.subscribe({
///     let seen = Arc::clone(&seen);
///     move |event: &Event<'_>| seen.lock().unwrap().push(event.kind)
/// });
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new())
///     .with_events(events);
/// limiter.try_acquire(1)?;
/// limiter.try_acquire(1).unwrap_err();
/// drop(subscription); // unsubscribes
/// limiter.try_acquire(1).unwrap_err();
///
/// assert_eq!(*seen.lock().unwrap(), [
///     EventKind::Admitted,
///     EventKind::Denied { reason: DenyReason::Limited, retry_after: Some(Duration::from_secs(1)) },
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Events {
    hub: Arc<Hub>,
}

struct Hub {
    name: Box<str>,
    /// Whether any listener is subscribed: the only thing emitters read when none is.
    observed: AtomicBool,
    listeners: Mutex<Listeners>,
}

type Entry = (u64, Arc<dyn Listener>);

struct Listeners {
    next_id: u64,
    /// Copied on write: emitters take the list out of the lock and call listeners
    /// without it, so a listener may subscribe, unsubscribe or emit.
    list: Arc<[Entry]>,
}

impl Events {
    /// A hub named `name`, with no listener.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::Events;
    ///
    /// let events = Events::new("login");
    /// assert_eq!(events.name(), "login");
    /// assert!(!events.is_observed());
    /// ```
    pub fn new(name: impl Into<String>) -> Events {
        Events {
            hub: Arc::new(Hub {
                name: name.into().into_boxed_str(),
                observed: AtomicBool::new(false),
                listeners: Mutex::new(Listeners {
                    next_id: 0,
                    list: Arc::from(Vec::new()),
                }),
            }),
        }
    }

    /// The hub's name: the [`source`](Event::source) of its events.
    pub fn name(&self) -> &str {
        &self.hub.name
    }

    /// Whether any listener is subscribed.
    #[inline]
    pub fn is_observed(&self) -> bool {
        self.hub.observed.load(Ordering::Relaxed)
    }

    /// Adds `listener`; it receives every event emitted from now until the returned
    /// [`Subscription`] is dropped. An event whose delivery had begun when it was
    /// dropped (on another thread, or by an earlier listener of the same event) may
    /// still reach it; the hub lets go of the listener once those deliveries end.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{Event, Events};
    ///
    /// let events = Events::new("api");
    /// let subscription = events.subscribe(|event: &Event<'_>| println!("{event}"));
    /// assert!(events.is_observed());
    /// drop(subscription);
    /// assert!(!events.is_observed());
    /// ```
    pub fn subscribe(&self, listener: impl Listener) -> Subscription {
        self.subscribe_arc(Arc::new(listener))
    }

    /// As [`subscribe`](Events::subscribe), with a listener already shared (one
    /// listener subscribed to several hubs).
    pub fn subscribe_arc(&self, listener: Arc<dyn Listener>) -> Subscription {
        let mut listeners = self.hub.listeners.lock();
        let id = listeners.next_id;
        listeners.next_id += 1;
        let mut list = listeners.list.to_vec();
        list.push((id, listener));
        listeners.list = Arc::from(list);
        self.hub.observed.store(true, Ordering::Relaxed);
        Subscription {
            hub: Arc::downgrade(&self.hub),
            id,
        }
    }

    /// How many listeners are subscribed.
    pub fn listeners(&self) -> usize {
        self.hub.listeners.lock().list.len()
    }

    /// Sends `kind` for `permits` permits to every listener, with this hub as the
    /// source and no key. Does nothing, cheaply, while nobody listens.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{Event, EventKind, Events};
    ///
    /// let events = Events::new("gateway");
    /// let _subscription = events.subscribe(|event: &Event<'_>| assert_eq!(event.source, "gateway"));
    /// events.emit(1, EventKind::Admitted);
    /// ```
    #[inline]
    pub fn emit(&self, permits: u64, kind: EventKind) {
        if self.is_observed() {
            self.send(&Event::new(&self.hub.name, permits, kind));
        }
    }

    /// As [`emit`](Events::emit), for `key`.
    #[inline]
    pub fn emit_keyed(&self, key: &str, permits: u64, kind: EventKind) {
        if self.is_observed() {
            self.send(&Event::new(&self.hub.name, permits, kind).with_key(key));
        }
    }

    /// Sends `event` as it is (whatever its source) to every listener.
    pub fn emit_event(&self, event: &Event<'_>) {
        if self.is_observed() {
            self.send(event);
        }
    }

    #[cold]
    #[inline(never)]
    fn send(&self, event: &Event<'_>) {
        let list = Arc::clone(&self.hub.listeners.lock().list);
        for (_, listener) in list.iter() {
            listener.on_event(event);
        }
    }

    /// Emits the outcome of a wait (see [`EventKind::of_wait`]).
    /// Reports a wait's end; a permit source's own failure is not a decision and
    /// is not reported.
    pub(crate) fn emit_wait<E>(
        &self,
        key: Option<&str>,
        permits: u64,
        outcome: &Result<Duration, crate::error::AcquireError<E>>,
        queued: bool,
    ) {
        if matches!(outcome, Err(crate::error::AcquireError::Source(_))) {
            return;
        }
        if self.is_observed() {
            let mut event =
                Event::new(&self.hub.name, permits, EventKind::of_wait(outcome, queued));
            event.key = key;
            self.send(&event);
        }
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("name", &self.name())
            .field("listeners", &self.listeners())
            .finish()
    }
}

/// A listener's subscription to an [`Events`] hub: dropping it unsubscribes.
///
/// # Examples
///
/// ```
/// use tollgate::observe::{Event, Events};
///
/// let events = Events::new("api");
/// events.subscribe(|_: &Event<'_>| {}).detach(); // listens for as long as the hub lives
/// assert_eq!(events.listeners(), 1);
/// ```
#[must_use = "dropping a subscription unsubscribes at once; `detach` keeps it"]
pub struct Subscription {
    hub: Weak<Hub>,
    id: u64,
}

impl Subscription {
    /// Keeps the listener subscribed for as long as the hub lives. A detached
    /// listener that holds the hub, or a limiter reporting to it, keeps both alive
    /// for good; keep the subscription instead, and drop it to break the cycle.
    pub fn detach(mut self) {
        self.hub = Weak::new();
    }

    /// Unsubscribes now; the same as dropping the subscription.
    pub fn unsubscribe(self) {
        drop(self)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        let mut listeners = hub.listeners.lock();
        let list: Vec<Entry> = listeners
            .list
            .iter()
            .filter(|(id, _)| *id != self.id)
            .cloned()
            .collect();
        hub.observed.store(!list.is_empty(), Ordering::Relaxed);
        let old = std::mem::replace(&mut listeners.list, Arc::from(list));
        drop(listeners);
        // Outside the lock: the last reference to a listener may run any code.
        drop(old);
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("attached", &(self.hub.strong_count() > 0))
            .finish()
    }
}
