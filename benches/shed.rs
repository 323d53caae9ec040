//! Load shedding (issue 13): the cost of the shedding decision per request, next to
//! `tower::load_shed` in the same run.
//!
//! `tower::load_shed::LoadShed` decides nothing of its own: it sheds a request when
//! the service it wraps is not ready. So the comparison is made twice:
//!
//! - scenario `decision`: the bare decision (`Shedder::decide`, the slot dropped at
//!   once) next to one request through the bare service below (`echo`), the work a
//!   decision sits in front of;
//! - scenarios `admit_layer` and `shed_layer`: one request (`poll_ready`, `call`, the
//!   answer polled) through a tower service that decides before calling the same
//!   service, next to `LoadShed` over it. In `shed_layer` tollgate refuses by its
//!   rule and `LoadShed` because its service is not ready.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::Criterion;
use futures::task::noop_waker_ref;
use tollgate::shed::{
    Class, Classes, FleetShedder, FleetSlot, Measure, Shed, ShedDecision, Shedder,
    UtilisationShedder,
};
use tower::load_shed::LoadShed;
use tower::Service;

use crate::harness::{self, bench_single_thread};

/// Polls `future` once, as an executor would on its first poll; it must be ready.
#[inline]
fn now<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(noop_waker_ref());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a request waited"),
    }
}

/// One request through a tower service: `poll_ready` (which must be ready), `call`,
/// the answer polled once.
#[inline]
fn serve<S: Service<u64>>(service: &mut S, request: u64) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(noop_waker_ref());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(error)) => return Err(error),
        Poll::Pending => panic!("a shedding layer was not ready"),
    }
    now(service.call(request))
}

/// The service below every layer: answers its request at once.
#[derive(Clone, Copy)]
struct Echo;

impl Service<u64> for Echo {
    type Response = u64;
    type Error = Infallible;
    type Future = Ready<Result<u64, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: u64) -> Self::Future {
        ready(Ok(request))
    }
}

/// A service that is never ready: what makes `LoadShed` shed.
struct Busy;

impl Service<u64> for Busy {
    type Response = u64;
    type Error = Infallible;
    type Future = Ready<Result<u64, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Pending
    }

    fn call(&mut self, _: u64) -> Self::Future {
        unreachable!("never ready")
    }
}

/// A shedder in front of a service, as a server layer would put it: the decision
/// in `call`, the slot held until the answer is ready, a refusal answered at once.
/// (tollgate's shedders have no tower layer of their own yet.)
struct Shedding<D> {
    shedder: D,
    class: Class,
    inner: Echo,
}

impl<D: Shedder> Service<u64> for Shedding<D> {
    type Response = u64;
    type Error = Shed;
    type Future = Ready<Result<u64, Shed>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Shed>> {
        match self.inner.poll_ready(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, request: u64) -> Self::Future {
        match self.shedder.decide(&self.class) {
            ShedDecision::Admit(slot) | ShedDecision::WouldShed { slot, .. } => {
                let answer = now(self.inner.call(request));
                drop(slot);
                ready(answer.map_err(|never| match never {}))
            }
            ShedDecision::Shed(shed) => ready(Err(shed)),
        }
    }
}

/// Whether the scenario's decisions go the way its name says.
fn check<S>(admit: bool, mut decide: impl FnMut() -> ShedDecision<S>) {
    let calls = 10_000;
    let admitted = (0..calls).filter(|_| decide().is_admitted()).count();
    assert_eq!(admitted, if admit { calls } else { 0 });
}

/// Stripe's fleet-usage shedder, capacity 100 with 20 reserved; to shed, 80
/// critical requests hold the shared part.
fn fleet(classes: &Classes, admit: bool) -> (FleetShedder, Vec<ShedDecision<FleetSlot>>) {
    let fleet = FleetShedder::new(classes.clone(), 100, 0.2).expect("valid shedder");
    let held = if admit {
        Vec::new()
    } else {
        let critical = classes.parse("critical");
        (0..80).map(|_| fleet.decide(&critical)).collect()
    };
    let lowest = classes.lowest();
    check(admit, || fleet.decide(&lowest));
    (fleet, held)
}

/// Stripe's worker-utilisation shedder, fed utilisation by `report`; to shed, held
/// at 95% until it escalates (it sheds the lowest class from then on).
fn utilisation(classes: &Classes, admit: bool) -> UtilisationShedder {
    let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
        .escalate_after(Duration::from_millis(1))
        .build()
        .expect("valid shedder");
    if !admit {
        shedder.report(95, 100).expect("valid report");
        std::thread::sleep(Duration::from_millis(2));
        shedder.report(95, 100).expect("valid report");
    }
    let lowest = classes.lowest();
    check(admit, || shedder.decide(&lowest));
    shedder
}

pub fn bench(c: &mut Criterion) {
    let classes = Classes::google();
    let lowest = classes.lowest();
    let mut group = harness::group(c, "shed");

    // The bare decision, admitting, next to the bare service.
    let (fleet_admit, _none) = fleet(&classes, true);
    bench_single_thread(&mut group, "tollgate.fleet", "decision", |_| {
        fleet_admit.decide(&lowest).is_admitted()
    });
    let utilisation_admit = utilisation(&classes, true);
    bench_single_thread(&mut group, "tollgate.utilisation", "decision", |_| {
        utilisation_admit.decide(&lowest).is_admitted()
    });
    bench_single_thread(&mut group, "echo", "decision", |i| serve(&mut Echo, i));

    // The bare decision, shedding.
    let (fleet_shed, _held) = fleet(&classes, false);
    bench_single_thread(&mut group, "tollgate.fleet", "shed_decision", |_| {
        fleet_shed.decide(&lowest)
    });
    let utilisation_shed = utilisation(&classes, false);
    bench_single_thread(&mut group, "tollgate.utilisation", "shed_decision", |_| {
        utilisation_shed.decide(&lowest)
    });

    // Through a tower service over `Echo`, admitted.
    let mut service = Shedding {
        shedder: fleet_admit.clone(),
        class: lowest.clone(),
        inner: Echo,
    };
    bench_single_thread(&mut group, "tollgate.fleet", "admit_layer", |i| {
        serve(&mut service, i)
    });
    let mut service = Shedding {
        shedder: utilisation_admit.clone(),
        class: lowest.clone(),
        inner: Echo,
    };
    bench_single_thread(&mut group, "tollgate.utilisation", "admit_layer", |i| {
        serve(&mut service, i)
    });
    let mut service = LoadShed::new(Echo);
    bench_single_thread(&mut group, "tower_load_shed", "admit_layer", |i| {
        serve(&mut service, i)
    });
    bench_single_thread(&mut group, "echo", "admit_layer", |i| serve(&mut Echo, i));

    // Through a tower service, shed.
    let mut service = Shedding {
        shedder: fleet_shed.clone(),
        class: lowest.clone(),
        inner: Echo,
    };
    bench_single_thread(&mut group, "tollgate.fleet", "shed_layer", |i| {
        serve(&mut service, i)
    });
    let mut service = Shedding {
        shedder: utilisation_shed.clone(),
        class: lowest.clone(),
        inner: Echo,
    };
    bench_single_thread(&mut group, "tollgate.utilisation", "shed_layer", |i| {
        serve(&mut service, i)
    });
    let mut service = LoadShed::new(Busy);
    assert!(serve(&mut service, 0).is_err(), "LoadShed over Busy sheds");
    bench_single_thread(&mut group, "tower_load_shed", "shed_layer", |i| {
        serve(&mut service, i)
    });
    group.finish();
}
