//! Compile-time checks that limiters and their answers cross threads.

use tollgate::algorithm::{AllOf, Gcra};
use tollgate::clock::{ManualClock, MonotonicClock};
use tollgate::{Admitted, ConfigError, Decision, Denied, Limiter, Reservation};

fn send_sync<T: Send + Sync>() {}

#[test]
fn limiters_are_send_and_sync() {
    send_sync::<Limiter<Gcra>>();
    send_sync::<Limiter<Gcra, ManualClock>>();
    send_sync::<Limiter<AllOf<Gcra>, MonotonicClock>>();
}

#[test]
fn answers_are_send_and_sync() {
    send_sync::<Decision>();
    send_sync::<Admitted>();
    send_sync::<Denied>();
    send_sync::<Reservation>();
    send_sync::<ConfigError>();
}
