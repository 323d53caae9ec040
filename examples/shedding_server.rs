//! A server with two criticality classes under a 12× surge of the less critical
//! one: per-class admitted and shed counts, printed each second.
//!
//! ```text
//! cargo run --example shedding_server --features http,shed
//! ```
//!
//! An axum server on 127.0.0.1 (a free port) whose every request holds a worker
//! for 50 ms, behind a `ShedLayer` over a `FleetShedder`: 20 requests in flight at
//! most, a quarter of them reserved for the `critical` class. In the same process a
//! load generator sends 40 critical and 40 sheddable requests a second, the class
//! in the request's extensions and written as `x-criticality` by a
//! `PropagateClassLayer`; from the 3rd to the 10th second the sheddable traffic
//! surges to 480 a second. The sheddable class is shed above 15 in flight while
//! critical requests keep their reserve. Runs about 13 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, ServiceExt};

use tollgate::http::shed::{PropagateClassLayer, ShedLayer};
use tollgate::observe::{Event, EventKind, Events};
use tollgate::shed::{Class, Classes, FleetShedder};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long each admitted request holds a worker.
const WORK: Duration = Duration::from_millis(50);
/// Requests a second of each class before and after the surge.
const BASE_RATE: u64 = 40;
/// The sheddable class's surge: 12 times its base rate.
const SURGE: u64 = 12;
/// The seconds of the run, and those (from, to) of the surge.
const RUN_SECS: u64 = 13;
const SURGE_SECS: (u64, u64) = (3, 10);

/// Counts per class, admitted and shed, as the shedder reports them.
#[derive(Default)]
struct Counts {
    admitted: [AtomicU64; 2],
    shed: [AtomicU64; 2],
}

impl Counts {
    fn record(&self, classes: &Classes, event: &Event<'_>) {
        let Some(class) = event.key.and_then(|name| classes.get(name)) else {
            return;
        };
        let index = class.index();
        if event.kind.is_admitted() {
            self.admitted[index].fetch_add(1, Ordering::Relaxed);
        } else if event.kind.is_denied() || event.kind == EventKind::WouldShed {
            self.shed[index].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn read(&self) -> [(u64, u64); 2] {
        [0, 1].map(|i| {
            (
                self.admitted[i].load(Ordering::Relaxed),
                self.shed[i].load(Ordering::Relaxed),
            )
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let classes = Classes::new(["critical", "sheddable"])?;
    let counts = Arc::new(Counts::default());
    let events = Events::new("shedder");
    let _subscription = events.subscribe({
        let (classes, counts) = (classes.clone(), Arc::clone(&counts));
        move |event: &Event<'_>| counts.record(&classes, event)
    });
    // 20 in flight, 5 of them kept for `critical` (the more critical half of the set).
    let fleet = FleetShedder::new(classes.clone(), 20, 0.25)?
        .with_retry_after(Some(Duration::from_secs(1)))
        .with_events(events);

    let app = Router::new()
        .route(
            "/work",
            get(|| async {
                tokio::time::sleep(WORK).await;
                "done\n"
            }),
        )
        .layer(ShedLayer::new(fleet.clone()));
    // The error names the address: "Address already in use" alone does not say which.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!(
        "serving on http://{addr}: {} in flight at most, {} for `critical` alone; \
         each request works {} ms",
        fleet.capacity(),
        fleet.capacity() - fleet.shared_limit(),
        WORK.as_millis()
    );
    println!(
        "load: {BASE_RATE}/s per class; `sheddable` {SURGE}x ({}/s) from {}s to {}s\n",
        BASE_RATE * SURGE,
        SURGE_SECS.0,
        SURGE_SECS.1
    );

    let client = PropagateClassLayer::new()
        .layer(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
    let uri: http::Uri = format!("http://{addr}/work").parse()?;
    let start = Instant::now();
    // What the clients saw: answers of each class, and those that were 200.
    let answered = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let ok = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    for class in classes.iter() {
        let (client, uri, answered, ok) =
            (client.clone(), uri.clone(), answered.clone(), ok.clone());
        tokio::spawn(async move {
            generate(class, start, client, uri, answered, ok).await;
        });
    }

    println!(" t   critical: admitted   shed   sheddable: admitted   shed   in flight");
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::from_std(start) + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    let mut last = counts.read();
    for second in 1..=RUN_SECS {
        ticks.tick().await;
        let now = counts.read();
        let delta = |i: usize| (now[i].0 - last[i].0, now[i].1 - last[i].1);
        let ((ca, cs), (sa, ss)) = (delta(0), delta(1));
        let surge = if (SURGE_SECS.0..SURGE_SECS.1).contains(&(second - 1)) {
            "  surge"
        } else {
            ""
        };
        println!(
            "{second:>2}s {ca:>18} {cs:>6} {sa:>20} {ss:>6} {:>11}{surge}",
            fleet.in_flight()
        );
        last = now;
    }

    // Let the last requests finish before the summary.
    tokio::time::sleep(WORK * 4).await;
    println!();
    for class in classes.iter() {
        let i = class.index();
        let (admitted, shed) = counts.read()[i];
        let (n, good) = (
            answered[i].load(Ordering::Relaxed),
            ok[i].load(Ordering::Relaxed),
        );
        let availability = if n == 0 {
            100.0
        } else {
            100.0 * good as f64 / n as f64
        };
        println!(
            "{:<9} admitted {admitted:>5}, shed {shed:>5}; clients got 200 for {availability:.1} %",
            class.name()
        );
    }
    Ok(())
}

/// Sends requests of `class` at its rate, each in a task of its own, until the run
/// ends; counts the answers and those that were 200.
async fn generate<S>(
    class: Class,
    start: Instant,
    client: S,
    uri: http::Uri,
    answered: Arc<[AtomicU64; 2]>,
    ok: Arc<[AtomicU64; 2]>,
) where
    S: tower::Service<
            http::Request<Empty<Bytes>>,
            Response = http::Response<hyper::body::Incoming>,
        > + Clone
        + Send
        + 'static,
    S::Error: Send,
    S::Future: Send,
{
    let surges = class.index() == 1;
    let end = Duration::from_secs(RUN_SECS);
    let mut next = Duration::ZERO;
    while next < end {
        let in_surge = surges && (SURGE_SECS.0..SURGE_SECS.1).contains(&next.as_secs());
        let rate = if in_surge {
            BASE_RATE * SURGE
        } else {
            BASE_RATE
        };
        next += Duration::from_secs(1) / rate as u32;
        tokio::time::sleep_until(tokio::time::Instant::from_std(start + next)).await;
        let mut request = http::Request::get(uri.clone()).body(Empty::new()).unwrap();
        // The class travels in the extensions; `PropagateClassLayer` writes the header.
        request.extensions_mut().insert(class.clone());
        let (client, answered, ok, i) =
            (client.clone(), answered.clone(), ok.clone(), class.index());
        tokio::spawn(async move {
            if let Ok(response) = client.oneshot(request).await {
                answered[i].fetch_add(1, Ordering::Relaxed);
                if response.status() == 200 {
                    ok[i].fetch_add(1, Ordering::Relaxed);
                }
                let _ = response.into_body().collect().await;
            }
        });
    }
}
