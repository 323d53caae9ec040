//! Readers and writers held to a limiter in bytes: one permit per byte, read or
//! written in chunks no larger than the limiter grants at once.

use std::fmt;
#[cfg(any(feature = "tokio", feature = "futures-io"))]
use std::io;
#[cfg(any(feature = "tokio", feature = "futures-io"))]
use std::task::{Context, Poll, ready};

#[cfg(any(feature = "tokio", feature = "futures-io"))]
use crate::error::AcquireError;
use crate::permits::PermitSource;
use crate::shape::pacer::Pacer;

/// A reader, writer or both, held to a [`PermitSource`] of bytes (a [`Limiter`](crate::Limiter)(crate::Limiter), a shared limiter on one key, ...): every byte read or
/// written takes one permit.
///
/// It implements tokio's `AsyncRead` and `AsyncWrite` (feature `tokio`) and
/// futures-io's (feature `futures-io`) when the inner type does.
///
/// - **Writes** go in chunks no larger than the limiter grants at once (a
///   [`Gcra`](crate::algorithm::Gcra)'s burst, a
///   [`RefreshPeriod`](crate::algorithm::RefreshPeriod)'s limit for one period):
///   a write of 1 MiB through a 64 KiB
///   bucket writes at most 64 KiB, once the limiter grants them, and reports how
///   much the inner writer took; `write_all` comes back for the rest. So the bytes
///   granted at once never exceed the bucket.
/// - **Reads** ask the inner reader for at most one such chunk, once granted, and give
///   back the permits for the bytes it did not return. So the read that finds the end
///   of the input waits for its chunk before it learns there is nothing left.
/// - **Flush**, **shutdown** and **close** pass through, as do empty reads and writes;
///   shutdown and close first give back a write wait left behind (a write abandoned
///   while it waited), as no write follows to use it.
///
/// Each read or write waits until the limiter grants a whole chunk: the smaller of
/// the buffer and the bucket. Chunks are then as large as the bucket allows, so a
/// flow of large writes makes about `rate / bucket` inner writes a second. An inner
/// writer that takes less than it is offered (a full pipe) still moves at the rate,
/// but never empties the bucket: beyond its first write, it gains nothing from the
/// burst.
///
/// Reading and writing wait separately, each in the limiter's FIFO queue, so one
/// `Shaped` over a duplex stream holds both directions together to one rate. For a
/// rate per direction, split the stream (`tokio::io::split`) and shape each half
/// with its own limiter. Clones of one limiter share it between any number of
/// readers, writers and streams.
///
/// The inner type must be [`Unpin`] (sockets, files and in-memory buffers are);
/// pin one that is not with `Box::pin` first.
///
/// # Errors
///
/// A read or write fails with [`std::io::ErrorKind::Other`], its source the
/// [`AcquireError`](crate::AcquireError), when the limiter is closed, or grants no permit at all; and
/// with whatever error the inner reader or writer returns.
///
/// # Cancel safety
///
/// Reads and writes are poll-based and keep the usual contract: one that returns
/// `Pending` has read or written nothing. Permits granted for bytes the inner
/// reader or writer did not take (a short read or write, an error, or `Pending`) are
/// given back at once. A wait under way stays booked between polls, so the next
/// read or write keeps its place in the queue; dropping the `Shaped` gives it back,
/// and so does shutting down or closing it for a write.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # {
/// use std::time::Duration;
/// use tokio::io::AsyncWriteExt;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::shape::Shaped;
///
/// # futures::executor::block_on(async {
/// // 1,000 bytes/s, at most 100 at once.
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1000)?.burst(100)?), clock.clone());
/// let mut writer = Shaped::new(Vec::new(), limiter);
///
/// assert_eq!(writer.write(&[7; 250]).await?, 100); // one bucket, at once
/// let mut next = Box::pin(writer.write(&[7; 150]));
/// assert!(futures::poll!(next.as_mut()).is_pending());
/// clock.advance(Duration::from_millis(100)); // the bucket refills
/// assert_eq!(next.await?, 100);
/// assert_eq!(writer.get_ref().len(), 200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # }
/// ```
pub struct Shaped<T, P: PermitSource> {
    inner: T,
    read: Pacer<P>,
    write: Pacer<P>,
}

impl<T, P: PermitSource + Clone> Shaped<T, P> {
    /// Holds `inner` to `source`, one permit per byte.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::shape::Shaped;
    ///
    /// // 2 MiB/s, in chunks of at most 64 KiB.
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(2 << 20)?.burst(64 << 10)?));
    /// let shaped = Shaped::new(std::io::Cursor::new(Vec::<u8>::new()), limiter);
    /// assert!(shaped.get_ref().get_ref().is_empty());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(inner: T, source: P) -> Shaped<T, P> {
        Shaped {
            inner,
            read: Pacer::new(source.clone()),
            write: Pacer::new(source),
        }
    }

    /// The source the bytes wait on.
    pub fn source(&self) -> &P {
        self.write.source()
    }

    /// The inner reader or writer.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The inner reader or writer, mutably. Bytes read or written through it directly
    /// bypass the limit.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The inner reader or writer; a wait under way is given back.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

#[cfg(any(feature = "tokio", feature = "futures-io"))]
impl<T, P: PermitSource> Shaped<T, P> {
    /// A write of `buf` through `write`, the inner writer's `poll_write`.
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
        write: impl FnOnce(&mut T, &mut Context<'_>, &[u8]) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return write(&mut self.inner, cx, buf);
        }
        let held = ready!(self.write.poll_hold_chunk(cx, len_u64(buf.len()))).map_err(to_io)?;
        let chunk = usize::try_from(held).map_or(buf.len(), |h| h.min(buf.len()));
        let written = write(&mut self.inner, cx, &buf[..chunk]);
        settle(&mut self.write, written)
    }

    /// A read of at most `max` bytes through `read`, the inner reader's `poll_read`
    /// limited to the given length, which returns how many bytes it read.
    fn poll_read_with(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
        read: impl FnOnce(&mut T, &mut Context<'_>, usize) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if max == 0 {
            return read(&mut self.inner, cx, 0);
        }
        let held = ready!(self.read.poll_hold_chunk(cx, len_u64(max))).map_err(to_io)?;
        let chunk = usize::try_from(held).map_or(max, |h| h.min(max));
        let got = read(&mut self.inner, cx, chunk);
        settle(&mut self.read, got)
    }
}

/// Keeps the permits for the bytes the inner reader or writer took, and gives back
/// the rest.
#[cfg(any(feature = "tokio", feature = "futures-io"))]
fn settle(
    pacer: &mut Pacer<impl PermitSource>,
    outcome: Poll<io::Result<usize>>,
) -> Poll<io::Result<usize>> {
    match &outcome {
        Poll::Ready(Ok(n)) => pacer.spend(len_u64(*n)),
        Poll::Ready(Err(_)) | Poll::Pending => pacer.spend(0),
    }
    outcome
}

#[cfg(any(feature = "tokio", feature = "futures-io"))]
fn len_u64(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

#[cfg(any(feature = "tokio", feature = "futures-io"))]
fn to_io<E: std::error::Error + Send + Sync + 'static>(e: AcquireError<E>) -> io::Error {
    io::Error::other(e)
}

impl<T: fmt::Debug, P: PermitSource + fmt::Debug> fmt::Debug for Shaped<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shaped")
            .field("inner", &self.inner)
            .field("read", &self.read)
            .field("write", &self.write)
            .finish()
    }
}

impl<T: Unpin, P: PermitSource> Unpin for Shaped<T, P> {}

/// `AsyncWrite` for `Shaped` from tokio's or futures-io's trait, whichever `$write`
/// names in the calling module: the two differ only in the name of the last method,
/// `$close` (`poll_shutdown` or `poll_close`). Closing gives back a write wait left
/// behind (a write abandoned while it waited): no write follows to use it.
#[cfg(any(feature = "tokio", feature = "futures-io"))]
macro_rules! async_write {
    ($write:ident, $close:ident) => {
        impl<T: $write + Unpin, P: PermitSource> $write for Shaped<T, P> {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.get_mut().poll_write_with(cx, buf, |inner, cx, chunk| {
                    Pin::new(inner).poll_write(cx, chunk)
                })
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn $close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let this = self.get_mut();
                this.write.release();
                Pin::new(&mut this.inner).$close(cx)
            }
        }
    };
}

#[cfg(feature = "tokio")]
mod tokio_io {
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    use super::Shaped;
    use crate::permits::PermitSource;

    impl<T: AsyncRead + Unpin, P: PermitSource> AsyncRead for Shaped<T, P> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let max = buf.remaining();
            let read = self.get_mut().poll_read_with(cx, max, |inner, cx, limit| {
                let before = buf.filled().len();
                if limit == max {
                    return Pin::new(inner)
                        .poll_read(cx, buf)
                        .map_ok(|()| buf.filled().len().saturating_sub(before));
                }
                let mut part = ReadBuf::new(buf.initialize_unfilled_to(limit));
                let got = Pin::new(inner).poll_read(cx, &mut part);
                let n = part.filled().len();
                if let Poll::Ready(Ok(())) = got {
                    buf.advance(n);
                }
                got.map_ok(|()| n)
            });
            read.map_ok(|_| ())
        }
    }

    async_write!(AsyncWrite, poll_shutdown);
}

#[cfg(feature = "futures-io")]
mod futures_io_impl {
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures_io::{AsyncRead, AsyncWrite};

    use super::Shaped;
    use crate::permits::PermitSource;

    impl<T: AsyncRead + Unpin, P: PermitSource> AsyncRead for Shaped<T, P> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            let max = buf.len();
            self.get_mut().poll_read_with(cx, max, |inner, cx, limit| {
                Pin::new(inner).poll_read(cx, &mut buf[..limit])
            })
        }
    }

    async_write!(AsyncWrite, poll_close);
}
