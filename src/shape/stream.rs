//! Any `Stream` held to a limiter: each item waits for its permits.

use std::convert::Infallible;
use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_core::stream::{FusedStream, Stream};

use crate::error::AcquireError;
use crate::permits::PermitSource;
use crate::shape::pacer::Pacer;

/// What an item costs in permits.
///
/// Implemented by [`Each`] (one permit per item) and by any `FnMut(&T) -> u64`.
///
/// # Examples
///
/// ```
/// use tollgate::shape::{Each, ItemCost};
///
/// assert_eq!(Each.cost(&"anything"), 1);
/// let mut by_len = |s: &&str| s.len() as u64;
/// assert_eq!(by_len.cost(&"four"), 4);
/// ```
pub trait ItemCost<T> {
    /// The permits `item` takes. An item of cost 0 passes without asking the limiter.
    fn cost(&mut self, item: &T) -> u64;
}

/// One permit per item: the cost of [`ThrottleExt::throttle`].
///
/// # Examples
///
/// ```
/// use tollgate::shape::{Each, ItemCost};
///
/// assert_eq!(Each.cost(&[0u8; 1024]), 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Each;

impl<T> ItemCost<T> for Each {
    #[inline]
    fn cost(&mut self, _item: &T) -> u64 {
        1
    }
}

impl<T, F: FnMut(&T) -> u64> ItemCost<T> for F {
    #[inline]
    fn cost(&mut self, item: &T) -> u64 {
        self(item)
    }
}

/// A stream whose items each wait for their permits from a [`PermitSource`] (a [`Limiter`](crate::Limiter)(crate::Limiter), or any other): the stream of
/// [`ThrottleExt::throttle`] and [`ThrottleExt::throttle_by`].
///
/// It takes an item from the inner stream, asks what it costs, and yields it once
/// the limiter grants that many permits. Every inner item comes out exactly once:
/// `Ok(item)` when its permits were granted, or `Err` carrying the item when they
/// never will be (see [`Refused`]), after which the stream goes on with the
/// next item. It never splits an item, never waits for ever on one, and never lets
/// one through unpaid.
///
/// Streams sharing a limiter (clones of one `Limiter`) share its rate, and wait in
/// its FIFO queue with every other caller of [`Limiter::acquire`](crate::Limiter::acquire): an expensive item
/// is not starved by a flow of cheap ones.
///
/// The inner stream must be [`Unpin`]; pin one that is not with `Box::pin` first.
///
/// # Errors
///
/// An item comes out as [`Refused`], with the item inside, when its cost
/// exceeds what the limiter can ever grant one request, as [`Limiter::acquire`](crate::Limiter::acquire)
/// refuses it ([`Refused::is_oversized`]), or once the limiter is closed
/// ([`Refused::is_closed`]). Neither consumes a permit. An item that costs more
/// than the limiter grants without waiting, but no more than it grants by waiting (a
/// [`RefreshPeriod`](crate::algorithm::RefreshPeriod)'s several periods), waits.
///
/// # Cancel safety
///
/// Dropping the stream while an item waits gives back the permits booked for it
/// (the item is dropped with it). Items already yielded stay paid for.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures::StreamExt;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::shape::ThrottleExt;
///
/// # futures::executor::block_on(async {
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?.burst(2)?), clock.clone());
/// let mut items = futures::stream::iter(1..=3).throttle(limiter);
///
/// assert_eq!(items.next().await.transpose()?, Some(1)); // the burst
/// assert_eq!(items.next().await.transpose()?, Some(2));
/// assert!(futures::poll!(items.next()).is_pending()); // the third waits 100 ms
/// clock.advance(Duration::from_millis(100));
/// assert_eq!(items.next().await.transpose()?, Some(3));
/// assert_eq!(items.next().await.transpose()?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Throttled<S: Stream, P: PermitSource, F = Each> {
    stream: S,
    cost: F,
    pacer: Pacer<P>,
    /// The item taken from `stream` that waits for its permits, and its cost.
    item: Option<(S::Item, u64)>,
    /// `stream` has ended.
    done: bool,
}

impl<S: Stream, P: PermitSource> Throttled<S, P> {
    /// Throttles `stream` to one permit of `limiter` per item.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::shape::Throttled;
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(100)?));
    /// let throttled = Throttled::new(futures::stream::iter([1, 2, 3]), limiter);
    /// # drop(throttled);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(stream: S, source: P) -> Throttled<S, P> {
        Throttled::with_cost(stream, source, Each)
    }
}

impl<S: Stream, P: PermitSource, F: ItemCost<S::Item>> Throttled<S, P, F> {
    /// Throttles `stream`, each item taking `cost(&item)` permits of `limiter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::shape::Throttled;
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(1024)?));
    /// let chunks = futures::stream::iter([vec![0u8; 100], vec![0u8; 200]]);
    /// let throttled = Throttled::with_cost(chunks, limiter, |chunk: &Vec<u8>| chunk.len() as u64);
    /// # drop(throttled);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_cost(stream: S, source: P, cost: F) -> Throttled<S, P, F> {
        Throttled {
            stream,
            cost,
            pacer: Pacer::new(source),
            item: None,
            done: false,
        }
    }
}

impl<S: Stream, P: PermitSource, F> Throttled<S, P, F> {
    /// The source the items wait on.
    pub fn source(&self) -> &P {
        self.pacer.source()
    }

    /// The inner stream.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The inner stream, mutably. Taking items from it directly bypasses the limit.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The inner stream. An item waiting for its permits is dropped, and the permits
    /// booked for it are given back.
    pub fn into_inner(self) -> S {
        self.stream
    }
}

impl<S: Stream + Unpin, P: PermitSource, F> Unpin for Throttled<S, P, F> {}

impl<S, P, F> Stream for Throttled<S, P, F>
where
    S: Stream + Unpin,
    P: PermitSource,
    F: ItemCost<S::Item>,
{
    type Item = Result<S::Item, Refused<S::Item, P::Error>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let (item, cost) = match this.item.take() {
            Some(waiting) => waiting,
            None => {
                if this.done {
                    return Poll::Ready(None);
                }
                let Some(item) = ready!(Pin::new(&mut this.stream).poll_next(cx)) else {
                    this.done = true;
                    return Poll::Ready(None);
                };
                let cost = this.cost.cost(&item);
                if cost == 0 {
                    return Poll::Ready(Some(Ok(item)));
                }
                (item, cost)
            }
        };
        match this.pacer.poll_hold(cx, cost) {
            Poll::Pending => {
                this.item = Some((item, cost));
                Poll::Pending
            }
            Poll::Ready(Ok(_)) => {
                this.pacer.spend(cost);
                Poll::Ready(Some(Ok(item)))
            }
            Poll::Ready(Err(reason)) => Poll::Ready(Some(Err(Refused { item, cost, reason }))),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let waiting = usize::from(self.item.is_some());
        let (low, high) = self.stream.size_hint();
        (
            low.saturating_add(waiting),
            high.and_then(|h| h.checked_add(waiting)),
        )
    }
}

impl<S, P, F> FusedStream for Throttled<S, P, F>
where
    S: Stream + Unpin,
    P: PermitSource,
    F: ItemCost<S::Item>,
{
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<S, P, F> fmt::Debug for Throttled<S, P, F>
where
    S: Stream + fmt::Debug,
    S::Item: fmt::Debug,
    P: PermitSource + fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttled")
            .field("stream", &self.stream)
            .field("pacer", &self.pacer)
            .field("item", &self.item)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// Adds [`throttle`](ThrottleExt::throttle) and
/// [`throttle_by`](ThrottleExt::throttle_by) to every [`Stream`].
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::shape::ThrottleExt;
///
/// # futures::executor::block_on(async {
/// // 1 KiB/s with 4 KiB of burst: these three chunks go at once.
/// let limiter = Limiter::new(Gcra::new(Quota::per_second(1024)?.burst(4096)?));
/// let chunks = futures::stream::iter([vec![0u8; 1000], vec![0u8; 2000], vec![0u8; 1000]]);
/// let sizes: Vec<usize> = chunks
///     .throttle_by(limiter, |chunk| chunk.len() as u64)
///     .map(|chunk| chunk.map(|c| c.len()))
///     .collect::<Vec<_>>()
///     .await
///     .into_iter()
///     .collect::<Result<_, _>>()?;
/// assert_eq!(sizes, [1000, 2000, 1000]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub trait ThrottleExt: Stream + Sized {
    /// Each item waits for one permit of `limiter`; see [`Throttled`].
    ///
    /// Pass a clone of a limiter to share its rate with other streams and callers.
    ///
    /// # Errors
    ///
    /// The stream yields [`Refused`] (carrying the item) for an item the
    /// limiter will never grant: when it is closed.
    ///
    /// # Cancel safety
    ///
    /// As [`Throttled`]: dropping the stream gives back what it booked.
    fn throttle<P: PermitSource>(self, source: P) -> Throttled<Self, P> {
        Throttled::new(self, source)
    }

    /// Each item waits for `cost(&item)` permits of `limiter`; see [`Throttled`].
    ///
    /// # Errors
    ///
    /// The stream yields [`Refused`] (carrying the item) for an item the
    /// limiter will never grant: one that costs more than it can ever grant one
    /// request ([`Refused::is_oversized`]), or any item once it is closed.
    ///
    /// # Cancel safety
    ///
    /// As [`Throttled`]: dropping the stream gives back what it booked.
    ///
    /// # Examples
    ///
    /// ```
    /// use futures::StreamExt;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::shape::ThrottleExt;
    ///
    /// # futures::executor::block_on(async {
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(100)?));
    /// let words = futures::stream::iter(["short", "far too long for the bucket"]);
    /// let mut throttled = words.throttle_by(limiter, |w| if w.len() > 10 { 1000 } else { 1 });
    /// assert_eq!(throttled.next().await.unwrap()?, "short");
    /// let refused = throttled.next().await.unwrap().unwrap_err();
    /// assert!(refused.is_oversized());
    /// assert_eq!(refused.into_item(), "far too long for the bucket");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    fn throttle_by<P, F>(self, source: P, cost: F) -> Throttled<Self, P, F>
    where
        P: PermitSource,
        F: FnMut(&Self::Item) -> u64,
    {
        Throttled::with_cost(self, source, cost)
    }
}

impl<S: Stream> ThrottleExt for S {}

/// An item a [`Throttled`] could not let through, handed back with the reason.
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::shape::ThrottleExt;
///
/// # futures::executor::block_on(async {
/// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?));
/// limiter.close();
/// let refused = futures::stream::iter(["hello"]).throttle(limiter).next().await.unwrap().unwrap_err();
/// assert!(refused.is_closed());
/// assert_eq!(refused.to_string(), "item of cost 1 not let through: the limiter is closed");
/// assert_eq!(*refused.item(), "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused<T, E = Infallible> {
    item: T,
    cost: u64,
    reason: AcquireError<E>,
}

impl<T, E> Refused<T, E> {
    /// The item that was not let through.
    pub fn item(&self) -> &T {
        &self.item
    }

    /// The item that was not let through, to split or send elsewhere.
    pub fn into_item(self) -> T {
        self.item
    }

    /// The permits the item cost.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// Why the limiter will never grant them.
    pub fn reason(&self) -> &AcquireError<E> {
        &self.reason
    }

    /// Whether the item costs more than the limiter can ever grant one request.
    pub fn is_oversized(&self) -> bool {
        matches!(self.reason, AcquireError::Insufficient(_))
    }

    /// Whether the limiter was closed.
    pub fn is_closed(&self) -> bool {
        matches!(self.reason, AcquireError::Closed)
    }
}

impl<T, E: fmt::Display> fmt::Display for Refused<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "item of cost {} not let through: {}",
            self.cost, self.reason
        )
    }
}

impl<T: fmt::Debug, E: Error + 'static> Error for Refused<T, E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.reason)
    }
}
