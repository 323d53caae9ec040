//! Load shedding (issue 13): the cost of the shedding decision per request, next to
//! `tower::load_shed` in the same run.
//!
//! `tower::load_shed::LoadShed` decides nothing of its own: it sheds a request when
//! the service it wraps is not ready. So the comparison is made twice:
//!
//! - scenario `decision`: the bare decision (`Shedder::decide`, the slot dropped at
//!   once) next to one request through the bare `u64` service below (`echo`), the
//!   work a decision sits in front of;
//! - scenarios `admit_layer` and `shed_layer` (feature `http`): one `http::Request`
//!   (built, then `poll_ready`, `call`, the answer polled, the response dropped)
//!   through tollgate's `ShedLayer` over an echo service, next to `LoadShed` over the
//!   same service, and the echo service alone. In `shed_layer` tollgate refuses by
//!   its rule and answers a 503 with `Retry-After` and a JSON body, and `LoadShed`
//!   refuses because its service is not ready and answers an error.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::Criterion;
use futures::task::noop_waker_ref;
use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
use tollgate::shed::{
    Classes, FleetShedder, FleetSlot, Measure, ShedDecision, Shedder, UtilisationShedder,
};
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
fn serve<S: Service<R>, R>(service: &mut S, request: R) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(noop_waker_ref());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(error)) => return Err(error),
        Poll::Pending => panic!("a shedding layer was not ready"),
    }
    now(service.call(request))
}

/// The bare service of the `decision` scenario: answers its request at once.
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

/// Sentinel's system rule with every threshold set (QPS, in flight, RT, load with
/// the BBR check, CPU), on the system clock, fed by manual readings: CPU at 10% to
/// admit, at 90% (above its 80% threshold) to shed.
fn system(classes: &Classes, admit: bool) -> SystemProtection<ManualReadings> {
    let rule = SystemRule::builder()
        .qps(1e12)
        .max_in_flight(1_000_000)
        .avg_rt(Duration::from_secs(10))
        .highest_system_load(64.0)
        .highest_cpu_usage(0.8)
        .build()
        .expect("valid rule");
    let readings = ManualReadings::new();
    readings.set_load_average(1.0);
    readings.set_cpu_usage(if admit { 0.1 } else { 0.9 });
    let protection = SystemProtection::new(classes.clone(), rule, readings);
    let lowest = classes.lowest();
    check(admit, || protection.decide(&lowest));
    protection
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
    let system_admit = system(&classes, true);
    bench_single_thread(&mut group, "tollgate.system", "decision", |_| {
        system_admit.decide(&lowest).is_admitted()
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
    let system_shed = system(&classes, false);
    bench_single_thread(&mut group, "tollgate.system", "shed_decision", |_| {
        system_shed.decide(&lowest)
    });

    #[cfg(feature = "http")]
    {
        // Through a tower layer over an HTTP echo service, admitted, then shed.
        layer::admit(&mut group, "tollgate.fleet", fleet_admit);
        layer::admit(&mut group, "tollgate.utilisation", utilisation_admit);
        layer::admit(&mut group, "tollgate.system", system_admit);
        layer::admit_peers(&mut group);
        layer::shed(&mut group, "tollgate.fleet", fleet_shed);
        layer::shed(&mut group, "tollgate.utilisation", utilisation_shed);
        layer::shed(&mut group, "tollgate.system", system_shed);
        layer::shed_peer(&mut group);
    }
    group.finish();
}

/// Through the real `ShedLayer` over an `http::Request` echo service, next to
/// `LoadShed` over the same service.
#[cfg(feature = "http")]
mod layer {
    use super::*;
    use bytes::Bytes;
    use http::{Request, Response};
    use http_body_util::Empty;
    use tollgate::http::shed::ShedLayer;
    use tower::Layer;
    use tower::load_shed::LoadShed;

    use crate::harness::Group;

    type Body = Empty<Bytes>;

    /// The service below every layer: answers 200 at once.
    #[derive(Clone, Copy)]
    struct HttpEcho;

    impl Service<Request<()>> for HttpEcho {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            ready(Ok(Response::new(Body::new())))
        }
    }

    /// A service that is never ready: what makes `LoadShed` shed.
    struct Busy;

    impl Service<Request<()>> for Busy {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Pending
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            unreachable!("never ready")
        }
    }

    /// The request every peer gets: a GET labelled `sheddable`, the lowest class.
    #[inline]
    fn request() -> Request<()> {
        let mut request = Request::new(());
        request
            .headers_mut()
            .insert("x-criticality", http::HeaderValue::from_static("sheddable"));
        request
    }

    /// The status of the answer, or 0 for `LoadShed`'s error; the response (and a
    /// slot in its body) dropped.
    #[inline]
    fn status<B, E>(answer: Result<Response<B>, E>) -> u16 {
        answer.map_or(0, |response| response.status().as_u16())
    }

    /// `shedder` behind `ShedLayer` over `HttpEcho`, admitting the request.
    pub(super) fn admit<S: Shedder + 'static>(group: &mut Group<'_>, peer: &str, shedder: S) {
        let mut service = ShedLayer::new(shedder).layer(HttpEcho);
        assert_eq!(status(serve(&mut service, request())), 200);
        bench_single_thread(group, peer, "admit_layer", |_| {
            status(serve(&mut service, request()))
        });
    }

    /// `LoadShed` over `HttpEcho`, and `HttpEcho` alone, admitting.
    pub(super) fn admit_peers(group: &mut Group<'_>) {
        let mut service = LoadShed::new(HttpEcho);
        assert_eq!(status(serve(&mut service, request())), 200);
        bench_single_thread(group, "tower_load_shed", "admit_layer", |_| {
            status(serve(&mut service, request()))
        });
        bench_single_thread(group, "echo", "admit_layer", |_| {
            status(serve(&mut HttpEcho, request()))
        });
    }

    /// `shedder` behind `ShedLayer` over `HttpEcho`, shedding the request: a 503.
    pub(super) fn shed<S: Shedder + 'static>(group: &mut Group<'_>, peer: &str, shedder: S) {
        let mut service = ShedLayer::new(shedder).layer(HttpEcho);
        assert_eq!(status(serve(&mut service, request())), 503);
        bench_single_thread(group, peer, "shed_layer", |_| {
            status(serve(&mut service, request()))
        });
    }

    /// `LoadShed` over a service that is never ready, shedding: an error.
    pub(super) fn shed_peer(group: &mut Group<'_>) {
        let mut service = LoadShed::new(Busy);
        assert!(
            serve(&mut service, request()).is_err(),
            "LoadShed over Busy sheds"
        );
        bench_single_thread(group, "tower_load_shed", "shed_layer", |_| {
            status(serve(&mut service, request()))
        });
    }
}
