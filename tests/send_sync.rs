//! Compile-time checks that limiters, permits and answers cross threads.

use tollgate::algorithm::{
    AllOf, Concurrency, FirstHit, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter,
    SlidingLog, SmoothBursty, SmoothWarmingUp,
};
use tollgate::semaphore::{OwnedPermit, Permit};
use tollgate::time::{ManualClock, MonotonicClock};
use tollgate::{
    Admitted, ConfigError, Decision, Denied, KeyedLimiter, Limiter, Release, Reservation, Semaphore,
};

fn send_sync<T: Send + Sync>() {}

#[test]
fn limiters_are_send_and_sync() {
    send_sync::<Limiter<Gcra>>();
    send_sync::<Limiter<Gcra, ManualClock>>();
    send_sync::<Limiter<LeakyBucket>>();
    send_sync::<Limiter<FixedWindow>>();
    send_sync::<Limiter<FixedWindow<FirstHit>>>();
    send_sync::<Limiter<SlidingLog>>();
    send_sync::<Limiter<SlidingCounter>>();
    send_sync::<Limiter<SmoothBursty>>();
    send_sync::<Limiter<SmoothWarmingUp>>();
    send_sync::<Limiter<RefreshPeriod>>();
    send_sync::<Limiter<Concurrency>>();
    send_sync::<Limiter<AllOf<Gcra>, MonotonicClock>>();
    send_sync::<KeyedLimiter<String, Gcra>>();
    send_sync::<KeyedLimiter<u64, SlidingLog, ManualClock>>();
}

#[test]
fn permits_are_send_and_sync() {
    send_sync::<Semaphore>();
    send_sync::<Permit<'static>>();
    send_sync::<OwnedPermit>();
    // A keyed source's grant, held by a response body on whatever thread serves it.
    send_sync::<Release>();
}

#[test]
fn answers_are_send_and_sync() {
    send_sync::<Decision>();
    send_sync::<Admitted>();
    send_sync::<Denied>();
    send_sync::<Reservation>();
    send_sync::<ConfigError>();
}

#[cfg(feature = "shed")]
#[test]
fn shedders_slots_and_decisions_are_send_and_sync() {
    use tollgate::shed::{
        Classes, FleetShedder, FleetSlot, ModeSwitch, Shed, ShedDecision, UtilisationShedder,
        UtilisationSlot,
    };
    send_sync::<Classes>();
    send_sync::<ModeSwitch>();
    send_sync::<FleetShedder>();
    send_sync::<FleetSlot>();
    send_sync::<UtilisationShedder>();
    send_sync::<UtilisationShedder<ManualClock>>();
    send_sync::<UtilisationSlot>();
    send_sync::<ShedDecision<FleetSlot>>();
    send_sync::<Shed>();
}
