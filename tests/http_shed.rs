//! The shedding layer over tower `service_fn`s: classes from a header, a route, a
//! method or a closure; 503 (or the status set) with `Retry-After` when shed; the
//! slot held until the response body ends and released on cancellation; shadow mode
//! and the kill switch; the class passed on to an outbound call's header. Every
//! shedder is in process and every clock manual.

#![cfg(all(feature = "http", feature = "shed"))]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::executor::block_on;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt, service_fn};

use tollgate::ConfigError;
use tollgate::http::shed::{
    CLASS_HEADER, ClassByMethod, ClassByRoute, ClassHeader, PropagateClassLayer, ShedLayer,
};
use tollgate::observe::{DenyReason, Event, EventKind, Events};
use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
use tollgate::shed::{Class, Classes, FleetShedder, Measure, Mode, ModeSwitch, UtilisationShedder};
use tollgate::time::ManualClock;

type Body = Full<Bytes>;

/// Answers 200 with the name of the class the layer put in the extensions.
fn echo_class() -> impl Service<
    Request<()>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    service_fn(|request: Request<()>| async move {
        let class = request
            .extensions()
            .get::<Class>()
            .map_or("none".to_owned(), |c| c.name().to_owned());
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(class))))
    })
}

fn get(path: &str) -> Request<()> {
    Request::get(path).body(()).unwrap()
}

fn labelled(class: &str) -> Request<()> {
    Request::get("/")
        .header("x-criticality", class)
        .body(())
        .unwrap()
}

async fn body_of<B: http_body::Body>(response: Response<B>) -> String
where
    B::Error: std::fmt::Debug,
{
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// An in-process fleet shedder of Google's classes: `capacity` in flight, the
/// fraction `reserved` of it kept for `critical_plus` and `critical`.
fn fleet(capacity: u64, reserved: f64) -> FleetShedder {
    FleetShedder::new(Classes::google(), capacity, reserved).unwrap()
}

// ---- Classes from the request ------------------------------------------------------

#[test]
fn the_header_names_the_class_in_any_case_and_defaults_when_missing_or_unknown() {
    block_on(async {
        let service = ShedLayer::new(fleet(10, 0.0)).layer(echo_class());
        for (label, class) in [
            (Some("SHEDDABLE"), "sheddable"),
            (Some("critical_plus"), "critical_plus"),
            (Some(" sheddable_plus "), "sheddable_plus"),
            (Some("gold"), "critical"),
            (None, "critical"),
        ] {
            let request = match label {
                Some(label) => labelled(label),
                None => get("/"),
            };
            let response = service.clone().oneshot(request).await.unwrap();
            assert_eq!(body_of(response).await, class, "{label:?}");
        }
    });
}

#[test]
fn another_header_can_carry_the_class() {
    block_on(async {
        let header = ClassHeader::new(http::HeaderName::from_static("x-priority"));
        let service = ShedLayer::new(fleet(10, 0.0))
            .classify(header)
            .layer(echo_class());
        let request = Request::get("/")
            .header("x-priority", "sheddable")
            .header("x-criticality", "critical_plus")
            .body(())
            .unwrap();
        assert_eq!(
            body_of(service.oneshot(request).await.unwrap()).await,
            "sheddable"
        );
    });
}

#[test]
fn routes_class_by_their_longest_prefix() {
    block_on(async {
        let classes = Classes::google();
        let routes = ClassByRoute::new(&classes)
            .route("/", "sheddable_plus")
            .unwrap()
            .route("/api", "critical")
            .unwrap()
            .route("/api/prefetch", "sheddable")
            .unwrap();
        let service = ShedLayer::new(fleet(10, 0.0))
            .classify(routes)
            .layer(echo_class());
        for (path, class) in [
            ("/api/orders", "critical"),
            ("/api/prefetch/1?x=y", "sheddable"),
            ("/api/prefetchers", "critical"),
            ("/static/app.js", "sheddable_plus"),
        ] {
            let response = service.clone().oneshot(get(path)).await.unwrap();
            assert_eq!(body_of(response).await, class, "{path}");
        }
    });
}

#[test]
fn methods_class_by_table_and_others_take_the_default() {
    block_on(async {
        let classes = Classes::google().with_default("critical_plus").unwrap();
        let methods = ClassByMethod::new(&classes)
            .method(Method::GET, "sheddable_plus")
            .unwrap()
            .method(Method::OPTIONS, "sheddable")
            .unwrap();
        let shedder = FleetShedder::new(classes, 10, 0.0).unwrap();
        let service = ShedLayer::new(shedder)
            .classify(methods)
            .layer(echo_class());
        for (method, class) in [
            (Method::GET, "sheddable_plus"),
            (Method::OPTIONS, "sheddable"),
            (Method::POST, "critical_plus"),
        ] {
            let request = Request::builder().method(method.clone()).body(()).unwrap();
            let response = service.clone().oneshot(request).await.unwrap();
            assert_eq!(body_of(response).await, class, "{method}");
        }
    });
}

#[test]
fn a_closure_classes_requests() {
    block_on(async {
        let by_query = |request: &http::request::Parts, classes: &Classes| -> Class {
            match request.uri.query() {
                Some(query) if query.contains("prefetch=1") => classes.lowest(),
                _ => classes.highest(),
            }
        };
        let service = ShedLayer::new(fleet(10, 0.0))
            .classify(by_query)
            .layer(echo_class());
        let response = service.clone().oneshot(get("/?prefetch=1")).await.unwrap();
        assert_eq!(body_of(response).await, "sheddable");
        let response = service.oneshot(get("/")).await.unwrap();
        assert_eq!(body_of(response).await, "critical_plus");
    });
}

#[test]
fn bad_tables_and_settings_are_typed_errors() {
    let classes = Classes::google();
    assert_eq!(
        ClassByRoute::new(&classes)
            .route("api", "critical")
            .unwrap_err(),
        ConfigError::OutOfRange {
            parameter: "route",
            expected: "a path prefix starting with '/'"
        }
    );
    assert_eq!(
        ClassByRoute::new(&classes)
            .route("/api", "gold")
            .unwrap_err()
            .parameter(),
        "class"
    );
    assert_eq!(
        ClassByMethod::new(&classes)
            .method(Method::GET, "critical")
            .unwrap()
            .method(Method::GET, "sheddable")
            .unwrap_err()
            .parameter(),
        "method"
    );
    let layer = ShedLayer::new(fleet(10, 0.2));
    for status in [StatusCode::OK, StatusCode::NO_CONTENT, StatusCode::FOUND] {
        assert_eq!(
            layer.clone().status(status).unwrap_err().parameter(),
            "status"
        );
    }
    assert_eq!(
        layer.max_retry_after(Duration::ZERO).unwrap_err(),
        ConfigError::Zero {
            parameter: "max_retry_after"
        }
    );
}

// ---- Shed answers -------------------------------------------------------------------

#[test]
fn a_shed_request_gets_503_with_retry_after_rounded_up_and_a_json_body() {
    block_on(async {
        let calls = Arc::new(Mutex::new(0));
        let inner = service_fn({
            let calls = Arc::clone(&calls);
            move |_: Request<()>| {
                *calls.lock().unwrap() += 1;
                async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::new()))) }
            }
        });
        // All reserved: only critical classes are admitted.
        let shedder = fleet(10, 1.0).with_retry_after(Some(Duration::from_millis(2_500)));
        let service = ShedLayer::new(shedder).layer(inner);
        let response = service
            .clone()
            .oneshot(labelled("sheddable"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "3");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.headers()["cache-control"], "no-store");
        assert_eq!(
            body_of(response).await,
            r#"{"error":"shed","message":"the server is overloaded: sheddable requests are shed (reserved), retry after 3 s","class":"sheddable","reason":"reserved","retry_after":3}"#
        );
        assert_eq!(
            *calls.lock().unwrap(),
            0,
            "the inner service saw the shed request"
        );
        let response = service.oneshot(labelled("critical")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(*calls.lock().unwrap(), 1);
    });
}

#[test]
fn no_hint_sends_the_fallback_retry_after_or_none_if_so_configured() {
    block_on(async {
        // The default fallback: 1 s.
        let service = ShedLayer::new(fleet(10, 1.0)).layer(echo_class());
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "1");
        let body = body_of(response).await;
        assert!(body.contains(r#""retry_after":1"#), "{body}");

        // Another fallback, rounded up.
        let service = ShedLayer::new(fleet(10, 1.0))
            .fallback_retry_after(Some(Duration::from_millis(4_200)))
            .unwrap()
            .layer(echo_class());
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.headers()["retry-after"], "5");

        // A hint wins over the fallback.
        let hinted = fleet(10, 1.0).with_retry_after(Some(Duration::from_secs(2)));
        let service = ShedLayer::new(hinted)
            .fallback_retry_after(Some(Duration::from_secs(9)))
            .unwrap()
            .layer(echo_class());
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.headers()["retry-after"], "2");

        // None: no Retry-After without a hint.
        let service = ShedLayer::new(fleet(10, 1.0))
            .fallback_retry_after(None)
            .unwrap()
            .layer(echo_class());
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.status(), 503);
        assert!(response.headers().get("retry-after").is_none());
        let body = body_of(response).await;
        assert!(!body.contains("retry_after"), "{body}");

        assert_eq!(
            ShedLayer::new(fleet(10, 1.0))
                .fallback_retry_after(Some(Duration::ZERO))
                .unwrap_err(),
            ConfigError::Zero {
                parameter: "fallback_retry_after"
            }
        );
    });
}

#[test]
fn the_status_is_configurable_and_retry_after_capped() {
    block_on(async {
        let shedder = fleet(10, 1.0).with_retry_after(Some(Duration::MAX));
        let service = ShedLayer::new(shedder)
            .status(StatusCode::TOO_MANY_REQUESTS)
            .unwrap()
            .max_retry_after(Duration::from_secs(30))
            .unwrap()
            .layer(echo_class());
        let response = service
            .clone()
            .oneshot(labelled("sheddable"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], "30");

        // The default cap is an hour.
        let shedder = fleet(10, 1.0).with_retry_after(Some(Duration::MAX));
        let service = ShedLayer::new(shedder).layer(echo_class());
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.headers()["retry-after"], "3600");
    });
}

#[test]
fn the_utilisation_shedder_hints_its_recovery_hold_on_a_manual_clock() {
    block_on(async {
        let clock = ManualClock::new();
        let classes = Classes::google();
        let shedder = UtilisationShedder::builder(classes, Measure::Reported)
            .escalate_after(Duration::from_secs(1))
            .deescalate_after(Duration::from_millis(7_200))
            .build_with_clock(clock.clone())
            .unwrap();
        let service = ShedLayer::new(shedder.clone()).layer(echo_class());
        shedder.report(100, 100).unwrap();
        clock.advance(Duration::from_secs(1));
        shedder.report(100, 100).unwrap();
        assert_eq!(shedder.level(), 1);
        let response = service
            .clone()
            .oneshot(labelled("sheddable"))
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "8");
        let response = service.oneshot(labelled("sheddable_plus")).await.unwrap();
        assert_eq!(response.status(), 200);
    });
}

#[test]
fn system_protection_answers_503_when_the_cpu_threshold_trips() {
    block_on(async {
        let readings = ManualReadings::new();
        let clock = ManualClock::new();
        let rule = SystemRule::builder()
            .highest_cpu_usage(0.8)
            .build()
            .unwrap();
        let protection =
            SystemProtection::with_clock(Classes::google(), rule, readings.clone(), clock.clone())
                .with_exempt(["critical_plus"])
                .unwrap()
                .with_retry_after(Some(Duration::from_secs(1)));
        let service = ShedLayer::new(protection.clone()).layer(echo_class());

        readings.set_cpu_usage(0.5);
        let response = service.clone().oneshot(labelled("critical")).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(protection.status().in_flight, 1, "held by the body");
        assert_eq!(body_of(response).await, "critical");
        assert_eq!(protection.status().in_flight, 0);

        // The next reading, a second later, is above the threshold: every class but
        // the exempt one is shed, the critical one too.
        readings.set_cpu_usage(0.95);
        clock.advance(Duration::from_secs(1));
        let response = service.clone().oneshot(labelled("critical")).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "1");
        assert_eq!(
            body_of(response).await,
            r#"{"error":"shed","message":"the server is overloaded: critical requests are shed (system_cpu), retry after 1 s","class":"critical","reason":"system_cpu","retry_after":1}"#
        );
        let response = service
            .clone()
            .oneshot(labelled("critical_plus"))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(protection.status().shed, 1);

        // The CPU cools: admitted again at the next reading.
        readings.set_cpu_usage(0.3);
        clock.advance(Duration::from_secs(1));
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.status(), 200);
    });
}

// ---- Slots -----------------------------------------------------------------------

#[test]
fn the_slot_is_held_until_the_response_body_ends() {
    block_on(async {
        let shedder = fleet(2, 0.0);
        let mut service = ShedLayer::new(shedder.clone()).layer(echo_class());
        let first = service.ready().await.unwrap().call(get("/")).await.unwrap();
        assert_eq!(shedder.in_flight(), 1);
        assert!(first.body().holds_slot());
        let second = service.ready().await.unwrap().call(get("/")).await.unwrap();
        assert_eq!(shedder.in_flight(), 2);
        let third = service.ready().await.unwrap().call(get("/")).await.unwrap();
        assert_eq!(third.status(), 503, "full while both bodies are unread");
        assert!(!third.body().holds_slot());

        assert_eq!(body_of(first).await, "critical");
        assert_eq!(shedder.in_flight(), 1, "read to its end: released");
        drop(second);
        assert_eq!(shedder.in_flight(), 0, "dropped unread: released");
        let fourth = service.ready().await.unwrap().call(get("/")).await.unwrap();
        assert_eq!(fourth.status(), 200);
    });
}

#[test]
fn a_dropped_response_future_releases_its_slot() {
    let shedder = fleet(1, 0.0);
    let never =
        service_fn(|_: Request<()>| std::future::pending::<Result<Response<Body>, Infallible>>());
    let mut service = ShedLayer::new(shedder.clone()).layer(never);
    let mut pending = service.call(get("/"));
    assert_eq!(shedder.in_flight(), 1);
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::future::Future::poll(std::pin::Pin::new(&mut pending), &mut cx).is_pending());
    assert_eq!(shedder.in_flight(), 1);
    drop(pending);
    assert_eq!(shedder.in_flight(), 0);
    // Dropped before its first poll, too.
    drop(service.call(get("/")));
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn a_failing_inner_service_releases_its_slot() {
    block_on(async {
        let shedder = fleet(1, 0.0);
        let failing = service_fn(|_: Request<()>| async { Err::<Response<Body>, _>("boom") });
        let service = ShedLayer::new(shedder.clone()).layer(failing);
        assert_eq!(service.oneshot(get("/")).await.unwrap_err(), "boom");
        assert_eq!(shedder.in_flight(), 0);
    });
}

// ---- Modes and events -------------------------------------------------------------

#[test]
fn shadow_mode_passes_what_it_would_shed_and_reports_it_by_class() {
    block_on(async {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let events = Events::new("shed");
        let _subscription = events.subscribe({
            let seen = Arc::clone(&seen);
            move |e: &Event<'_>| {
                seen.lock()
                    .unwrap()
                    .push((e.key.unwrap().to_owned(), e.kind))
            }
        });
        let mode = ModeSwitch::new(Mode::Shadow);
        let shedder = fleet(1, 1.0).with_mode(mode.clone()).with_events(events);
        let service = ShedLayer::new(shedder.clone()).layer(echo_class());
        let response = service
            .clone()
            .oneshot(labelled("sheddable"))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(body_of(response).await, "sheddable");

        mode.set(Mode::Enforce);
        let response = service
            .clone()
            .oneshot(labelled("sheddable"))
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
        let response = service.clone().oneshot(labelled("critical")).await.unwrap();
        assert_eq!(response.status(), 200);
        drop(response);

        mode.set(Mode::Off); // the kill switch
        let response = service.oneshot(labelled("sheddable")).await.unwrap();
        assert_eq!(response.status(), 200);
        drop(response);
        assert_eq!(shedder.in_flight(), 0);

        let denied = EventKind::Denied {
            reason: DenyReason::Shed,
            retry_after: None,
        };
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("sheddable".to_owned(), EventKind::WouldShed),
                ("sheddable".to_owned(), denied),
                ("critical".to_owned(), EventKind::Admitted),
                ("sheddable".to_owned(), EventKind::Admitted),
            ]
        );
    });
}

// ---- Propagation --------------------------------------------------------------------

#[test]
fn the_class_travels_from_the_server_layer_to_an_outbound_header() {
    block_on(async {
        // The downstream service answers with the class header it received.
        let downstream = service_fn(|request: Request<()>| async move {
            let header = request
                .headers()
                .get(CLASS_HEADER)
                .map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned());
            Ok::<_, Infallible>(Response::new(header))
        });
        let client = PropagateClassLayer::new().layer(downstream);
        // The handler passes its request's class on to its outbound call.
        let handler = service_fn(move |request: Request<()>| {
            let client = client.clone();
            async move {
                let mut outbound = Request::new(());
                if let Some(class) = request.extensions().get::<Class>() {
                    outbound.extensions_mut().insert(class.clone());
                }
                let answer = client.oneshot(outbound).await?;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(answer.into_body()))))
            }
        });
        let classes = Classes::google();
        let routes = ClassByRoute::new(&classes)
            .route("/prefetch", "sheddable")
            .unwrap();
        let service = ShedLayer::new(fleet(10, 0.0))
            .classify(routes)
            .layer(handler);
        let response = service.clone().oneshot(get("/prefetch/a")).await.unwrap();
        assert_eq!(body_of(response).await, "sheddable");
        let response = service.oneshot(get("/other")).await.unwrap();
        assert_eq!(body_of(response).await, "critical");
    });
}

#[test]
fn an_explicit_outbound_header_wins_and_no_class_sends_none() {
    block_on(async {
        let downstream = service_fn(|request: Request<()>| async move {
            Ok::<_, Infallible>(request.headers().get_all(CLASS_HEADER).iter().count())
        });
        let client = PropagateClassLayer::new().layer(downstream);
        let mut explicit = Request::get("/")
            .header("x-criticality", "critical_plus")
            .body(())
            .unwrap();
        explicit.extensions_mut().insert(Classes::google().lowest());
        let mut echo = PropagateClassLayer::new().layer(service_fn(|r: Request<()>| async move {
            Ok::<_, Infallible>(r.headers()[CLASS_HEADER].clone())
        }));
        assert_eq!(
            echo.ready().await.unwrap().call(explicit).await.unwrap(),
            "critical_plus"
        );
        assert_eq!(client.oneshot(Request::new(())).await.unwrap(), 0);
    });
}

#[test]
fn the_layer_its_service_future_and_body_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    type Slot = tollgate::shed::FleetSlot;
    send_sync::<ShedLayer<FleetShedder>>();
    send_sync::<tollgate::http::shed::ShedService<(), FleetShedder, ClassHeader>>();
    send_sync::<tollgate::http::shed::ShedFuture<std::future::Ready<()>, Slot>>();
    send_sync::<tollgate::http::shed::ShedBody<Body, Slot>>();
    send_sync::<tollgate::http::shed::PropagateClass<()>>();
}
