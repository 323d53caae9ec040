//! The lock-free cell (a limiter over a packed algorithm) under a reconfiguration that races with a decision.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use tollgate::algorithm::{Algorithm, CONFIG_WORDS, Concurrency, Packing};
use tollgate::time::{ManualClock, Nanos};
use tollgate::{Decision, Denied, Limiter, Reservation};

static PAUSE_NEXT_ACQUIRE: AtomicBool = AtomicBool::new(false);
type Handshake = (mpsc::Sender<()>, mpsc::Receiver<()>);
static HANDSHAKE: Mutex<Option<Handshake>> = Mutex::new(None);

/// Concurrency permits whose next `acquire` stops, after reading the configuration
/// and state, until the test lets it go on.
#[derive(Clone, Copy, Debug)]
struct Paused(Concurrency);

impl Algorithm for Paused {
    type State = u64;
    const PACKING: Option<Packing<Self>> = Some(Packing::new(pack, unpack));

    fn initial_state(&self, now: Nanos) -> u64 {
        self.0.initial_state(now)
    }

    fn acquire(&self, state: &mut u64, now: Nanos, n: u64) -> Decision {
        if PAUSE_NEXT_ACQUIRE.swap(false, Ordering::SeqCst) {
            let (read, resume) = HANDSHAKE.lock().unwrap().take().unwrap();
            read.send(()).unwrap();
            resume.recv().unwrap();
        }
        self.0.acquire(state, now, n)
    }

    fn reserve(
        &self,
        state: &mut u64,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.0.reserve(state, now, n, max_wait)
    }

    fn refund(&self, state: &mut u64, now: Nanos, n: u64) {
        self.0.refund(state, now, n)
    }

    fn capacity(&self) -> u64 {
        self.0.capacity()
    }

    fn idle_at(&self, state: &u64) -> Nanos {
        self.0.idle_at(state)
    }
}

fn pack(paused: &Paused) -> [u64; CONFIG_WORDS] {
    let packing = Concurrency::PACKING.unwrap();
    (packing.pack)(&paused.0)
}

fn unpack(words: [u64; CONFIG_WORDS]) -> Paused {
    Paused((Concurrency::PACKING.unwrap().unpack)(words))
}

/// The bug: a decision whose compare-and-swap failed retried with the configuration it
/// had read before a reconfiguration finished, and admitted 9 under a max of 2.
#[test]
fn a_retried_decision_uses_the_new_configuration() {
    let cell = Arc::new(Limiter::with_clock(
        Paused(Concurrency::new(10).unwrap()),
        ManualClock::new(),
    ));
    let (read_tx, read_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    *HANDSHAKE.lock().unwrap() = Some((read_tx, resume_rx));
    PAUSE_NEXT_ACQUIRE.store(true, Ordering::SeqCst);

    let racing = Arc::clone(&cell);
    let a = std::thread::spawn(move || racing.try_acquire(9));
    read_rx.recv().unwrap(); // A has read max = 10 and nothing in use.
    cell.reconfigure(|alg, _, _| {
        *alg = Paused(Concurrency::new(2).unwrap());
        Ok::<(), ()>(())
    })
    .unwrap();
    assert!(cell.try_acquire(1).is_ok());
    resume_tx.send(()).unwrap();

    assert!(a.join().unwrap().is_err(), "A must retry under max = 2");
    assert_eq!((cell.algorithm().0.max(), cell.state()), (2, 1));
}
