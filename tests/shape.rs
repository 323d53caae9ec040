//! Shaping under virtual time: streams throttled by item and by cost, oversized items,
//! limiters shared between streams, and readers and writers (tokio and futures-io)
//! held to bytes per second, split into chunks no larger than the bucket, with the
//! bytes passed counted after every step of a `ManualClock`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::{ArcWake, noop_waker, waker};
use futures::{Stream, StreamExt};
use tollgate::AcquireError;
use tollgate::algorithm::{Gcra, RefreshPeriod};
use tollgate::observe::{Event, EventKind, Events};
use tollgate::shape::{Each, ThrottleExt, Throttled};
use tollgate::time::ManualClock;
use tollgate::{Limiter, Quota};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A limiter of `rate` per second with a bucket of `burst`, on a fresh manual clock.
fn limiter(rate: u64, burst: u64) -> (Limiter<Gcra, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(rate).unwrap().burst(burst).unwrap();
    (Limiter::with_clock(Gcra::new(quota), clock.clone()), clock)
}

/// Resilience4j's limiter: `limit` permits every `period`, starting full, on a fresh
/// manual clock.
fn refresh(limit: u64, period: Duration) -> (Limiter<RefreshPeriod, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let r4j = RefreshPeriod::new(limit, period, Duration::ZERO).unwrap();
    (Limiter::with_clock(r4j, clock.clone()), clock)
}

/// Attaches a hub to `limiter` whose events land in the returned log.
fn logged<A: tollgate::algorithm::Algorithm>(
    limiter: Limiter<A, ManualClock>,
) -> (Limiter<A, ManualClock>, Arc<Mutex<Vec<EventKind>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let events = Events::new("shaped");
    events
        .subscribe({
            let log = Arc::clone(&log);
            move |event: &Event<'_>| log.lock().unwrap().push(event.kind)
        })
        .detach();
    (limiter.with_events(events), log)
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl ArcWake for Count {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls a stream once, with a waker nobody looks at.
fn next<S: Stream + Unpin>(stream: &mut S) -> Poll<Option<S::Item>> {
    stream.poll_next_unpin(&mut Context::from_waker(&noop_waker()))
}

/// Takes every item the stream has ready now.
fn drain<S: Stream + Unpin>(stream: &mut S) -> Vec<S::Item> {
    let mut items = Vec::new();
    while let Poll::Ready(Some(item)) = next(stream) {
        items.push(item);
    }
    items
}

/// The items of a throttled stream, all of which must have been let through.
fn ok<T, E: std::fmt::Debug>(items: Vec<Result<T, E>>) -> Vec<T> {
    items.into_iter().map(|item| item.unwrap()).collect()
}

#[test]
fn by_item_lets_the_burst_through_then_one_item_per_interval() {
    let (limiter, clock) = limiter(10, 2);
    let mut stream = futures::stream::iter(0..100).throttle(limiter);
    assert_eq!(ok(drain(&mut stream)), [0, 1]);
    let mut seen = 2;
    for step in 1..=30 {
        clock.advance(ms(100));
        let items = ok(drain(&mut stream));
        assert_eq!(items, [seen], "at {} ms", step * 100);
        seen += 1;
    }
    // 3 virtual seconds: 10/s × 3 + the burst of 2.
    assert_eq!(seen, 32);
}

#[test]
fn a_waiting_item_is_woken_by_the_clock_not_by_polling() {
    let (limiter, clock) = limiter(10, 1);
    let mut stream = futures::stream::iter(0..3).throttle(limiter);
    let count = Arc::new(Count::default());
    let waker = waker(Arc::clone(&count));
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(
        stream.poll_next_unpin(&mut cx),
        Poll::Ready(Some(Ok(0)))
    ));
    assert!(stream.poll_next_unpin(&mut cx).is_pending());
    assert_eq!(clock.pending_alarms(), 1);
    clock.advance(ms(99));
    assert_eq!(count.0.load(Ordering::SeqCst), 0);
    clock.advance(ms(1));
    assert_eq!(count.0.load(Ordering::SeqCst), 1);
    assert!(matches!(
        stream.poll_next_unpin(&mut cx),
        Poll::Ready(Some(Ok(1)))
    ));
}

#[test]
fn by_cost_charges_each_item_what_the_function_says() {
    // 100 bytes/s, a bucket of 100: chunks of 60, 60, 30, 100, 10.
    let (limiter, clock) = limiter(100, 100);
    let chunks = futures::stream::iter([60u64, 60, 30, 100, 10]);
    let mut stream = chunks.throttle_by(limiter, |&n| n);
    assert_eq!(ok(drain(&mut stream)), [60]);
    // The second 60 needs 20 more than the 40 left: 200 ms.
    clock.advance(ms(199));
    assert!(drain(&mut stream).is_empty());
    clock.advance(ms(1));
    // The 30 then needs 300 ms more, and the 100 a full bucket after it: 1 s.
    assert_eq!(ok(drain(&mut stream)), [60]);
    clock.advance(ms(300));
    assert_eq!(ok(drain(&mut stream)), [30]);
    clock.advance(ms(999));
    assert!(drain(&mut stream).is_empty());
    clock.advance(ms(1));
    assert_eq!(ok(drain(&mut stream)), [100]);
    clock.advance(ms(100));
    assert_eq!(ok(drain(&mut stream)), [10]);
    assert!(matches!(next(&mut stream), Poll::Ready(None)));
}

#[test]
fn an_item_of_cost_zero_passes_without_permits() {
    let (limiter, _clock) = limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut stream = futures::stream::iter([0u64, 0, 0]).throttle_by(limiter, |&n| n);
    assert_eq!(ok(drain(&mut stream)), [0, 0, 0]);
}

#[test]
fn an_oversized_item_comes_back_as_an_error_and_the_stream_goes_on() {
    let (limiter, clock) = limiter(10, 10);
    let stream = futures::stream::iter([vec![1u8; 4], vec![2u8; 11], vec![3u8; 6]]);
    let mut throttled = stream.throttle_by(limiter.clone(), |v| v.len() as u64);
    let items = drain(&mut throttled);
    assert_eq!(
        items.len(),
        3,
        "nothing waits for ever on the oversized item"
    );
    assert_eq!(items[0].as_ref().unwrap(), &[1u8; 4]);
    let refused = items[1].as_ref().unwrap_err();
    assert!(refused.is_oversized());
    assert!(!refused.is_closed());
    assert_eq!(refused.cost(), 11);
    assert!(matches!(refused.reason(), AcquireError::Insufficient(i) if i.capacity() == 10));
    assert_eq!(refused.item(), &[2u8; 11]);
    assert_eq!(items[2].as_ref().unwrap(), &[3u8; 6]);
    // The refused item took nothing: the bucket is empty after 4 + 6, full 1 s later.
    assert!(limiter.peek(1).is_err());
    clock.advance(ms(1000));
    assert!(limiter.peek(10).is_ok());
    assert!(matches!(next(&mut throttled), Poll::Ready(None)));
    assert!(futures::stream::FusedStream::is_terminated(&throttled));
}

#[test]
fn a_closed_limiter_hands_every_item_back() {
    let (limiter, _clock) = limiter(10, 1);
    let mut stream = futures::stream::iter(0..3).throttle(limiter.clone());
    assert_eq!(ok(drain(&mut stream)), [0]);
    assert!(next(&mut stream).is_pending());
    limiter.close();
    let refused: Vec<_> = drain(&mut stream)
        .into_iter()
        .map(|item| item.unwrap_err())
        .collect();
    assert!(refused.iter().all(|e| e.is_closed()));
    assert_eq!(
        refused
            .into_iter()
            .map(|e| e.into_item())
            .collect::<Vec<_>>(),
        [1, 2]
    );
}

#[test]
fn streams_sharing_a_limiter_share_its_rate_in_arrival_order() {
    let (limiter, clock) = limiter(10, 1);
    let mut a = futures::stream::iter(["a0", "a1", "a2"]).throttle(limiter.clone());
    let mut b = futures::stream::iter(["b0", "b1"]).throttle(limiter);
    assert_eq!(ok(drain(&mut a)), ["a0"]);
    // a1 queues first, then b0.
    assert!(drain(&mut a).is_empty());
    assert!(drain(&mut b).is_empty());
    let mut order = Vec::new();
    for _ in 0..4 {
        clock.advance(ms(100));
        order.extend(ok(drain(&mut b)));
        order.extend(ok(drain(&mut a)));
    }
    // One item per 100 ms between them, a1 before b0 although b is polled first.
    assert_eq!(order, ["a1", "b0", "a2", "b1"]);
}

#[test]
fn a_cheap_item_does_not_overtake_an_expensive_one_queued_first() {
    let (limiter, clock) = limiter(10, 5);
    let mut big = futures::stream::iter([5u64, 5]).throttle_by(limiter.clone(), |&n| n);
    let mut small = futures::stream::iter([1u64]).throttle_by(limiter, |&n| n);
    assert_eq!(ok(drain(&mut big)), [5]);
    assert!(drain(&mut big).is_empty()); // the second 5 waits 500 ms
    assert!(drain(&mut small).is_empty());
    clock.advance(ms(100)); // one permit free, but the 5 was first
    assert!(drain(&mut small).is_empty());
    clock.advance(ms(400));
    assert_eq!(ok(drain(&mut big)), [5]);
    assert!(drain(&mut small).is_empty());
    clock.advance(ms(100));
    assert_eq!(ok(drain(&mut small)), [1]);
}

#[test]
fn dropping_a_waiting_stream_gives_back_its_booking() {
    let (limiter, clock) = limiter(10, 1);
    let mut stream = futures::stream::iter(0..3).throttle(limiter.clone());
    assert_eq!(ok(drain(&mut stream)), [0]);
    assert!(drain(&mut stream).is_empty()); // item 1 books the permit due at 100 ms
    drop(stream);
    // Had the booking stayed, the next permit would come at 200 ms.
    clock.advance(ms(100));
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn dropping_a_waiting_stream_lets_the_stream_behind_it_go_at_its_time() {
    let (limiter, clock) = limiter(10, 1);
    let mut first = futures::stream::iter(["a0", "a1"]).throttle(limiter.clone());
    let mut second = futures::stream::iter(["b0"]).throttle(limiter);
    assert_eq!(ok(drain(&mut first)), ["a0"]);
    assert!(drain(&mut first).is_empty()); // a1 books the permit due at 100 ms
    assert!(drain(&mut second).is_empty()); // b0 queues behind it
    drop(first);
    clock.advance(ms(100));
    assert_eq!(ok(drain(&mut second)), ["b0"]);
}

#[test]
fn a_throttled_item_that_waits_reports_one_waited_event_and_no_denial() {
    // The bug: the shaper tried `try_acquire` before queueing, so every item that had
    // to wait was reported as `Denied { Limited }` and then as `Waited`: metrics
    // counted a denial for each item that in fact went.
    let (limiter, clock) = limiter(10, 1);
    let (limiter, log) = logged(limiter);
    let mut stream = futures::stream::iter(0..2).throttle(limiter);
    assert_eq!(ok(drain(&mut stream)), [0]);
    assert!(drain(&mut stream).is_empty());
    clock.advance(ms(100));
    assert_eq!(ok(drain(&mut stream)), [1]);
    assert_eq!(
        *log.lock().unwrap(),
        [EventKind::Admitted, EventKind::Waited { wait: ms(100) }]
    );
}

#[test]
fn an_item_above_one_period_but_within_capacity_waits_instead_of_being_refused() {
    // The bug: the shaper asked `try_acquire` first, which refuses more than one
    // period's permits as `Insufficient`, and handed the item back as oversized;
    // `Limiter::acquire`, whose queue the stream claims to share, waits for them
    // over several periods.
    let (limiter, clock) = refresh(10, ms(1000));
    let mut stream = futures::stream::iter([25u64, 5]).throttle_by(limiter, |&n| n);
    assert!(drain(&mut stream).is_empty());
    clock.advance(ms(1999));
    assert!(drain(&mut stream).is_empty());
    clock.advance(ms(1));
    // 10 at once, 10 more at 1 s and 5 of the 10 at 2 s; the 5 left go next.
    assert_eq!(ok(drain(&mut stream)), [25, 5]);
}

#[test]
fn into_inner_gives_back_the_booking_and_the_rest_of_the_stream() {
    let (limiter, clock) = limiter(10, 1);
    let mut stream = Throttled::new(futures::stream::iter(0..3), limiter.clone());
    assert_eq!(ok(drain(&mut stream)), [0]);
    assert!(drain(&mut stream).is_empty());
    assert_eq!(stream.size_hint(), (2, Some(2)));
    let rest: Vec<i32> = futures::executor::block_on_stream(stream.into_inner()).collect();
    assert_eq!(rest, [2], "the waiting item went with the throttle");
    clock.advance(ms(100));
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn throttled_streams_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Throttled<futures::stream::Iter<std::vec::IntoIter<u8>>, Limiter<Gcra>>>();
    send_sync::<
        Throttled<
            futures::stream::Iter<std::vec::IntoIter<u8>>,
            Limiter<Gcra, ManualClock>,
            fn(&u8) -> u64,
        >,
    >();
    send_sync::<tollgate::shape::Refused<Vec<u8>>>();
    send_sync::<tollgate::shape::Shaped<Vec<u8>, Limiter<Gcra>>>();
}

#[test]
fn throttle_with_cost_names_its_type() {
    let (limiter, _clock) = limiter(10, 10);
    let mut stream: Throttled<_, Limiter<Gcra, ManualClock>, Each> =
        Throttled::with_cost(futures::stream::iter(0..3), limiter, Each);
    assert_eq!(ok(drain(&mut stream)), [0, 1, 2]);
}

/// Polls a future once, with a waker nobody looks at.
#[cfg_attr(not(any(feature = "tokio", feature = "futures-io")), allow(dead_code))]
fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(&noop_waker()))
}

/// A writer that records the length of every write; it takes at most `max` bytes a
/// write, and none (`Pending`) while blocked.
#[derive(Clone)]
#[cfg_attr(not(any(feature = "tokio", feature = "futures-io")), allow(dead_code))]
struct Recorder {
    writes: Arc<std::sync::Mutex<Vec<usize>>>,
    max: usize,
    blocked: Arc<std::sync::atomic::AtomicBool>,
    shut: Arc<std::sync::atomic::AtomicBool>,
}

#[cfg_attr(not(any(feature = "tokio", feature = "futures-io")), allow(dead_code))]
impl Recorder {
    fn new(max: usize) -> Recorder {
        Recorder {
            writes: Arc::default(),
            max,
            blocked: Arc::default(),
            shut: Arc::default(),
        }
    }

    fn writes(&self) -> Vec<usize> {
        self.writes.lock().unwrap().clone()
    }

    fn total(&self) -> usize {
        self.writes().iter().sum()
    }

    fn accept(&self, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.blocked.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        let n = buf.len().min(self.max);
        self.writes.lock().unwrap().push(n);
        Poll::Ready(Ok(n))
    }
}

/// `AsyncWrite` for [`Recorder`] from tokio's or futures-io's trait, whichever
/// `$write` names where it is used; `$close` is the last method's name.
#[cfg(any(feature = "tokio", feature = "futures-io"))]
macro_rules! recorder_write {
    ($write:ident, $close:ident) => {
        impl $write for Recorder {
            fn poll_write(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<std::io::Result<usize>> {
                self.accept(buf)
            }

            fn poll_flush(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
            ) -> Poll<std::io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn $close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                self.shut.store(true, Ordering::SeqCst);
                Poll::Ready(Ok(()))
            }
        }
    };
}

/// A reader of endless zeros that records how much every read asked for.
#[derive(Clone, Default)]
#[cfg_attr(not(any(feature = "tokio", feature = "futures-io")), allow(dead_code))]
struct Zeros {
    asked: Arc<std::sync::Mutex<Vec<usize>>>,
}

#[cfg_attr(not(any(feature = "tokio", feature = "futures-io")), allow(dead_code))]
impl Zeros {
    fn asked(&self) -> Vec<usize> {
        self.asked.lock().unwrap().clone()
    }
}

#[cfg(feature = "tokio")]
mod tokio_io {
    use std::io;

    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
    use tollgate::shape::Shaped;

    use super::*;

    recorder_write!(AsyncWrite, poll_shutdown);

    impl AsyncRead for Zeros {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.asked.lock().unwrap().push(buf.remaining());
            buf.put_slice(&vec![0; buf.remaining()]);
            Poll::Ready(Ok(()))
        }
    }

    fn write<W: AsyncWrite + Unpin>(w: &mut W, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(w).poll_write(&mut Context::from_waker(&noop_waker()), buf)
    }

    fn read<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut buf = ReadBuf::new(buf);
        Pin::new(r)
            .poll_read(&mut Context::from_waker(&noop_waker()), &mut buf)
            .map_ok(|()| buf.filled().len())
    }

    #[test]
    fn a_large_write_goes_in_chunks_no_larger_than_the_bucket() {
        // 1 MiB through a 64 KiB bucket at 1,000,000 bytes/s (1 µs a byte).
        let (limiter, clock) = limiter(1_000_000, 64 << 10);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter);
        let data = vec![1u8; 1 << 20];
        let mut write_all = Box::pin(writer.write_all(&data));
        let mut elapsed = Duration::ZERO;
        while poll(&mut write_all).is_pending() {
            clock.advance(ms(1));
            elapsed += ms(1);
        }
        let writes = recorder.writes();
        assert_eq!(writes.len(), 16);
        assert!(writes.iter().all(|&w| w == 64 << 10), "{writes:?}");
        // The bucket at once, then one bucket every 65.536 ms.
        assert_eq!(elapsed, ms(984));
    }

    #[test]
    fn bytes_written_over_n_virtual_seconds_are_rate_times_n_plus_burst() {
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter);
        let data = vec![1u8; 100_000];
        let mut write_all = Box::pin(writer.write_all(&data));
        for t in 0..=5_000u64 {
            assert!(poll(&mut write_all).is_pending());
            // Whole buckets: the burst, then 100 bytes at every 100 ms.
            assert_eq!(recorder.total() as u64, 100 + t / 100 * 100, "at {t} ms");
            clock.advance(ms(1));
        }
        assert_eq!(recorder.total(), 1000 * 5 + 100);
        assert!(recorder.writes().iter().all(|&w| w <= 100));
    }

    #[test]
    fn a_read_asks_the_inner_reader_for_at_most_the_bucket() {
        let (limiter, clock) = limiter(1000, 100);
        let zeros = Zeros::default();
        let mut reader = Shaped::new(zeros.clone(), limiter);
        let mut buf = [1u8; 1000];
        let mut total = 0;
        for t in 0..=3_000u64 {
            while let Poll::Ready(n) = read(&mut reader, &mut buf) {
                total += n.unwrap();
            }
            assert_eq!(total as u64, 100 + t / 100 * 100, "at {t} ms");
            clock.advance(ms(1));
        }
        assert_eq!(total, 1000 * 3 + 100);
        assert!(
            zeros.asked().iter().all(|&n| n == 100),
            "{:?}",
            zeros.asked()
        );
    }

    #[test]
    fn a_small_read_takes_only_what_it_asks_for() {
        let (limiter, _clock) = limiter(1000, 100);
        let zeros = Zeros::default();
        let mut reader = Shaped::new(zeros.clone(), limiter.clone());
        let mut buf = [1u8; 30];
        assert_eq!(
            read(&mut reader, &mut buf).map(Result::unwrap),
            Poll::Ready(30)
        );
        assert_eq!(zeros.asked(), [30]);
        assert!(limiter.peek(70).is_ok());
        assert!(limiter.peek(71).is_err());
    }

    #[test]
    fn a_short_read_gives_back_the_permits_for_the_bytes_not_read() {
        let (limiter, clock) = limiter(1000, 100);
        let data = [7u8; 40];
        let mut reader = Shaped::new(&data[..], limiter.clone());
        let mut buf = [0u8; 1000];
        assert_eq!(
            read(&mut reader, &mut buf).map(Result::unwrap),
            Poll::Ready(40)
        );
        assert!(limiter.peek(60).is_ok());
        assert!(limiter.peek(61).is_err());
        // End of file: the read waits for its chunk, reads nothing and keeps nothing.
        assert!(read(&mut reader, &mut buf).is_pending());
        clock.advance(ms(40));
        assert_eq!(
            read(&mut reader, &mut buf).map(Result::unwrap),
            Poll::Ready(0)
        );
        assert!(limiter.peek(100).is_ok());
    }

    #[test]
    fn read_to_end_through_a_slice_takes_rate_times_n_plus_burst() {
        let (limiter, clock) = limiter(1000, 250);
        let data = vec![3u8; 2_250];
        let mut reader = Shaped::new(&data[..], limiter);
        let mut out = Vec::new();
        let mut read_to_end = Box::pin(reader.read_to_end(&mut out));
        let mut elapsed = Duration::ZERO;
        let n = loop {
            if let Poll::Ready(n) = poll(&mut read_to_end) {
                break n.unwrap();
            }
            clock.advance(ms(1));
            elapsed += ms(1);
        };
        assert_eq!(n, 2_250);
        // 250 at once, 2,000 at 1,000/s, then the read that finds the end of the
        // slice waits for its chunk of 250 before it learns there is nothing left.
        assert_eq!(elapsed, ms(2_250));
        drop(read_to_end);
        assert_eq!(out, data);
    }

    #[test]
    fn a_short_write_keeps_only_the_permits_for_the_bytes_written() {
        let (limiter, _clock) = limiter(1000, 100);
        let mut writer = Shaped::new(Recorder::new(10), limiter.clone());
        assert_eq!(
            write(&mut writer, &[0; 500]).map(Result::unwrap),
            Poll::Ready(10)
        );
        assert!(limiter.peek(90).is_ok());
        assert!(limiter.peek(91).is_err());
    }

    #[test]
    fn a_pending_write_has_written_nothing_and_holds_no_permit() {
        let (limiter, _clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        recorder.blocked.store(true, Ordering::SeqCst);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        assert!(write(&mut writer, &[0; 500]).is_pending());
        assert!(limiter.peek(100).is_ok());
        recorder.blocked.store(false, Ordering::SeqCst);
        assert_eq!(
            write(&mut writer, &[0; 500]).map(Result::unwrap),
            Poll::Ready(100)
        );
        assert_eq!(recorder.writes(), [100]);
    }

    #[test]
    fn dropping_a_waiting_writer_gives_back_its_booking() {
        let (limiter, clock) = limiter(1000, 100);
        let mut writer = Shaped::new(Recorder::new(usize::MAX), limiter.clone());
        assert!(write(&mut writer, &[0; 500]).is_ready());
        assert!(write(&mut writer, &[0; 400]).is_pending()); // books 100 due at 100 ms
        drop(writer);
        clock.advance(ms(100));
        assert!(limiter.try_acquire(100).is_ok());
    }

    #[test]
    fn a_write_granted_for_more_than_the_next_buffer_gives_back_the_rest() {
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        assert!(write(&mut writer, &[0; 100]).is_ready());
        assert!(write(&mut writer, &[0; 100]).is_pending()); // waits for 100
        clock.advance(ms(100));
        // The caller comes back with a smaller buffer: 30 go, 70 come back.
        assert_eq!(
            write(&mut writer, &[0; 30]).map(Result::unwrap),
            Poll::Ready(30)
        );
        assert!(limiter.peek(70).is_ok());
        assert!(limiter.peek(71).is_err());
    }

    #[test]
    fn a_write_waiting_when_the_bucket_shrinks_goes_in_the_smaller_chunk() {
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        assert!(write(&mut writer, &[0; 100]).is_ready());
        assert!(write(&mut writer, &[0; 100]).is_pending()); // waits for 100
        limiter
            .reconfigure(|gcra, _, _| {
                gcra.set_quota(Quota::per_second(1000)?.burst(50)?);
                Ok::<(), tollgate::ConfigError>(())
            })
            .unwrap();
        let mut written = 0;
        for _ in 0..=400 {
            if let Poll::Ready(n) = write(&mut writer, &[0; 100]) {
                written += n.unwrap();
            }
            clock.advance(ms(1));
        }
        // The chunk booked before the change goes whole; the next ones are 50, and
        // the debt carries over: 50 at 200 ms, then one every 50 ms.
        assert_eq!(recorder.writes(), [100, 100, 50, 50, 50, 50, 50]);
        assert_eq!(written, 350);
    }

    #[test]
    fn a_closed_limiter_fails_reads_and_writes() {
        let (limiter, _clock) = limiter(1000, 100);
        limiter.close();
        let mut writer = Shaped::new(Recorder::new(usize::MAX), limiter.clone());
        let Poll::Ready(Err(e)) = write(&mut writer, &[0; 10]) else {
            panic!("a closed limiter must fail the write")
        };
        assert_eq!(e.kind(), io::ErrorKind::Other);
        let reason = e.get_ref().and_then(|e| e.downcast_ref::<AcquireError>());
        assert_eq!(reason, Some(&AcquireError::Closed));
        let mut reader = Shaped::new(Zeros::default(), limiter);
        assert!(matches!(
            read(&mut reader, &mut [0; 10]),
            Poll::Ready(Err(_))
        ));
    }

    #[test]
    fn empty_writes_flush_and_shutdown_pass_through() {
        let (limiter, _clock) = limiter(1000, 100);
        limiter.try_acquire(100).unwrap();
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter);
        assert_eq!(write(&mut writer, &[]).map(Result::unwrap), Poll::Ready(0));
        assert!(poll(&mut Box::pin(writer.flush())).is_ready());
        assert!(poll(&mut Box::pin(writer.shutdown())).is_ready());
        assert!(recorder.shut.load(Ordering::SeqCst));
        assert_eq!(writer.into_inner().writes(), [0]);
    }

    #[test]
    fn a_write_through_a_refresh_period_limiter_goes_in_chunks_of_one_period() {
        // The bug: a chunk was the smaller of the buffer and `capacity()`, which for
        // a refresh-period limiter is what it grants over 584 years of waiting; a
        // write of more than one period asked `try_acquire` for all of it and failed
        // with `Insufficient` (and, queued instead, would have gone whole after
        // several periods: a burst far above one period's permits).
        let (limiter, clock) = refresh(100, ms(100));
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter);
        let data = vec![1u8; 1000];
        let mut write_all = Box::pin(writer.write_all(&data));
        let mut elapsed = Duration::ZERO;
        while poll(&mut write_all).is_pending() {
            clock.advance(ms(1));
            elapsed += ms(1);
        }
        assert_eq!(recorder.writes(), [100; 10]);
        assert_eq!(elapsed, ms(900));
    }

    #[test]
    fn shutdown_gives_back_a_write_wait_left_behind() {
        // The bug: a write abandoned while it waited (a timeout around `write_all`)
        // kept its booking through shutdown until the writer was dropped, and the
        // limiter's other users lost that chunk meanwhile.
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        assert!(write(&mut writer, &[0; 100]).is_ready());
        assert!(write(&mut writer, &[0; 100]).is_pending()); // books 100 due at 100 ms
        assert!(poll(&mut Box::pin(writer.shutdown())).is_ready());
        assert!(recorder.shut.load(Ordering::SeqCst));
        clock.advance(ms(100));
        assert!(limiter.try_acquire(100).is_ok());
        assert_eq!(writer.get_ref().writes(), [100]);
    }

    #[test]
    fn reader_and_writer_sharing_a_limiter_share_its_rate() {
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        let mut reader = Shaped::new(Zeros::default(), limiter);
        let mut buf = [0u8; 100];
        let mut read_total = 0;
        for _ in 0..=1000 {
            if let Poll::Ready(n) = read(&mut reader, &mut buf) {
                read_total += n.unwrap();
            }
            let _ = write(&mut writer, &[0; 100]);
            clock.advance(ms(1));
        }
        // 1 s and the burst, between the two, one bucket each in turn.
        assert_eq!(read_total + recorder.total(), 1100);
        assert_eq!(read_total, 600);
    }

    #[test]
    fn a_duplex_pipe_carries_exactly_the_shaped_bytes() {
        let (limiter, clock) = limiter(10_000, 1_000);
        let (near, mut far) = tokio::io::duplex(300);
        let mut writer = Shaped::new(near, limiter);
        let data: Vec<u8> = (0..20_000).map(|i| i as u8).collect();
        let mut received = Vec::new();
        {
            let mut write_all = Box::pin(writer.write_all(&data));
            let mut buf = [0u8; 512];
            for t in 0..=1_000u64 {
                let _ = poll(&mut write_all);
                while let Poll::Ready(n) = read(&mut far, &mut buf) {
                    let n = n.unwrap();
                    assert!(n > 0);
                    received.extend_from_slice(&buf[..n]);
                }
                assert!(received.len() as u64 <= 1_000 + t * 10, "at {t} ms");
                clock.advance(ms(1));
            }
        }
        // Each write is granted a chunk of 1,000, the pipe takes 300 and 700 come back:
        // the bucket never empties, so every later write waits 30 ms for the 300 it
        // used. The rate holds (1 s at 10,000/s); only the burst's head start is not
        // used past the first 300.
        assert_eq!(received.len(), 10_200);
        assert_eq!(received, data[..10_200]);
    }
}

#[cfg(feature = "futures-io")]
mod futures_io {
    use std::io;

    use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Cursor};
    use tollgate::shape::Shaped;

    use super::*;

    recorder_write!(AsyncWrite, poll_close);

    impl AsyncRead for Zeros {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            self.asked.lock().unwrap().push(buf.len());
            buf.fill(0);
            Poll::Ready(Ok(buf.len()))
        }
    }

    fn write<W: AsyncWrite + Unpin>(w: &mut W, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(w).poll_write(&mut Context::from_waker(&noop_waker()), buf)
    }

    fn read<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        Pin::new(r).poll_read(&mut Context::from_waker(&noop_waker()), buf)
    }

    #[test]
    fn a_large_write_goes_in_chunks_no_larger_than_the_bucket() {
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter);
        let data = vec![1u8; 100_000];
        let mut write_all = writer.write_all(&data);
        for t in 0..=5_000u64 {
            assert!(poll(&mut write_all).is_pending());
            assert_eq!(recorder.total() as u64, 100 + t / 100 * 100, "at {t} ms");
            clock.advance(ms(1));
        }
        assert_eq!(recorder.total(), 1000 * 5 + 100);
        assert!(recorder.writes().iter().all(|&w| w == 100));
    }

    #[test]
    fn a_cursor_receives_rate_times_n_plus_burst() {
        let (limiter, clock) = limiter(1000, 100);
        let mut writer = Shaped::new(Cursor::new(Vec::new()), limiter);
        let data: Vec<u8> = (0..3_000).map(|i| i as u8).collect();
        let mut elapsed = Duration::ZERO;
        {
            let mut write_all = writer.write_all(&data);
            while poll(&mut write_all).is_pending() {
                clock.advance(ms(1));
                elapsed += ms(1);
            }
        }
        assert_eq!(elapsed, ms(2_900));
        assert!(poll(&mut writer.close()).is_ready());
        assert_eq!(writer.into_inner().into_inner(), data);
    }

    #[test]
    fn a_read_asks_the_inner_reader_for_at_most_the_bucket() {
        let (limiter, clock) = limiter(1000, 100);
        let zeros = Zeros::default();
        let mut reader = Shaped::new(zeros.clone(), limiter);
        let mut buf = [1u8; 1000];
        let mut total = 0;
        for t in 0..=3_000u64 {
            while let Poll::Ready(n) = read(&mut reader, &mut buf) {
                total += n.unwrap();
            }
            assert_eq!(total as u64, 100 + t / 100 * 100, "at {t} ms");
            clock.advance(ms(1));
        }
        assert_eq!(total, 3_100);
        assert!(zeros.asked().iter().all(|&n| n == 100));
    }

    #[test]
    fn read_to_end_from_a_cursor_takes_rate_times_n_plus_burst() {
        let (limiter, clock) = limiter(1000, 100);
        let data: Vec<u8> = (0..1_100).map(|i| i as u8).collect();
        let mut reader = Shaped::new(Cursor::new(data.clone()), limiter.clone());
        let mut out = Vec::new();
        let mut elapsed = Duration::ZERO;
        {
            let mut read_to_end = reader.read_to_end(&mut out);
            while poll(&mut read_to_end).is_pending() {
                clock.advance(ms(1));
                elapsed += ms(1);
            }
        }
        assert_eq!(out, data);
        // 1,100 bytes and the final read of end of file, whose permits came back.
        assert_eq!(elapsed, ms(1_100));
        assert!(limiter.peek(100).is_ok());
    }

    #[test]
    fn a_read_through_a_refresh_period_limiter_asks_for_one_period_at_most() {
        // The bug: as for writes, a read asked for the whole buffer of a
        // refresh-period limiter (its `capacity()`) and failed with `Insufficient`.
        let (limiter, clock) = refresh(100, ms(100));
        let zeros = Zeros::default();
        let mut reader = Shaped::new(zeros.clone(), limiter);
        let mut buf = [1u8; 1000];
        let mut total = 0;
        for _ in 0..=300 {
            while let Poll::Ready(n) = read(&mut reader, &mut buf) {
                total += n.unwrap();
            }
            clock.advance(ms(1));
        }
        assert_eq!(total, 400);
        assert!(zeros.asked().iter().all(|&n| n == 100));
    }

    #[test]
    fn close_gives_back_a_write_wait_left_behind() {
        // The bug: as with tokio's shutdown, a booked write wait outlived `close`.
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        assert!(write(&mut writer, &[0; 100]).is_ready());
        assert!(write(&mut writer, &[0; 100]).is_pending());
        assert!(poll(&mut writer.close()).is_ready());
        assert!(recorder.shut.load(Ordering::SeqCst));
        clock.advance(ms(100));
        assert!(limiter.try_acquire(100).is_ok());
    }

    #[test]
    fn a_pending_write_holds_no_permit_and_dropping_a_wait_gives_it_back() {
        let (limiter, clock) = limiter(1000, 100);
        let recorder = Recorder::new(usize::MAX);
        recorder.blocked.store(true, Ordering::SeqCst);
        let mut writer = Shaped::new(recorder.clone(), limiter.clone());
        assert!(write(&mut writer, &[0; 500]).is_pending());
        assert!(limiter.peek(100).is_ok());
        recorder.blocked.store(false, Ordering::SeqCst);
        assert!(write(&mut writer, &[0; 500]).is_ready());
        assert!(write(&mut writer, &[0; 500]).is_pending()); // books 100 due at 100 ms
        drop(writer);
        clock.advance(ms(100));
        assert!(limiter.try_acquire(100).is_ok());
        assert!(!recorder.shut.load(Ordering::SeqCst));
    }
}
