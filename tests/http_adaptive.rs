//! The adaptive tower layers over real tower services, on a `ManualClock` limiter:
//! refusals, outcomes reaching the limit algorithm, classifiers, cancel safety.

#![cfg(all(feature = "http", feature = "adaptive"))]

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::executor::block_on;
use futures::poll;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use tollgate::adaptive::limit::AimdLimit;
use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
use tollgate::http::adaptive::{
    AdaptiveClientLayer, AdaptiveLayer, ClassifyResponse, ClientError, GrpcStatus, HttpStatus,
    RejectStatus, classify_fn,
};
use tollgate::observe::Outcome;
use tollgate::time::ManualClock;
use tollgate::{AcquireError, ConfigError};
use tower::{Layer, Service, ServiceExt, service_fn};

type Limiter = Arc<AdaptiveLimiter<AimdLimit, ManualClock>>;

/// An AIMD limiter from `initial` (minimum 1, ×0.9 on a drop, +1 on a success
/// while at least half the limit is in use; a sample slower than 1 s is a drop).
fn limiter(initial: u64, mode: WhenLimited) -> (Limiter, ManualClock) {
    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(initial)
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let limiter = AdaptiveLimiter::with_clock(aimd, mode, clock.clone()).unwrap();
    (Arc::new(limiter), clock)
}

fn answer(status: u16) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .body(Full::new(Bytes::from_static(b"body")))
        .unwrap()
}

/// A service answering `status` with a one-frame body, counting its calls.
fn status_service(
    status: u16,
    calls: &Arc<AtomicUsize>,
) -> impl Service<
    Request<()>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send + use<>,
> + Clone
+ use<> {
    let calls = Arc::clone(calls);
    service_fn(move |_: Request<()>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Infallible>(answer(status)) }
    })
}

fn grpc_head(status: &'static str) -> Response<Empty<Bytes>> {
    Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", status)
        .body(Empty::new())
        .unwrap()
}

#[test]
fn fail_fast_refuses_with_503_and_a_one_second_retry_after_by_default() {
    let (limiter, _) = limiter(1, WhenLimited::FailFast);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(200, &calls));
    block_on(async {
        let held = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        assert_eq!(limiter.inflight(), 1, "the body holds the permit");
        let refused = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "1");
        assert_eq!(refused.headers()["content-type"], "application/json");
        assert_eq!(refused.headers()["cache-control"], "no-store");
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            body,
            r#"{"error":"overloaded","message":"concurrency limit reached"}"#
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "the refused request was not sent"
        );
        // The refusal itself is not a sample.
        assert_eq!(limiter.limit(), 1);
        assert_eq!(held.into_body().collect().await.unwrap().to_bytes(), "body");
        assert_eq!(limiter.inflight(), 0);
    });
}

#[test]
fn refusals_can_be_429_with_retry_after_rounded_up() {
    let (limiter, _) = limiter(1, WhenLimited::FailFast);
    let calls = Arc::new(AtomicUsize::new(0));
    let layer = AdaptiveLayer::new(Arc::clone(&limiter))
        .reject_with(RejectStatus::TooManyRequests)
        .retry_after(Duration::from_millis(1_500))
        .unwrap();
    let mut service = layer.layer(status_service(200, &calls));
    block_on(async {
        let _held = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let refused = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["retry-after"], "2");
    });
}

#[test]
fn retry_after_out_of_range_is_a_typed_error() {
    let (limiter, _) = limiter(1, WhenLimited::FailFast);
    let layer = AdaptiveLayer::new(limiter);
    assert_eq!(
        layer.clone().retry_after(Duration::ZERO).unwrap_err(),
        ConfigError::Zero {
            parameter: "retry_after"
        }
    );
    for too_long in [
        AdaptiveLayer::<AimdLimit, ManualClock>::MAX_RETRY_AFTER + Duration::from_nanos(1),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ] {
        assert!(matches!(
            layer.clone().retry_after(too_long),
            Err(ConfigError::TooLong { .. })
        ));
    }
    assert!(layer.clone().retry_after(Duration::from_nanos(1)).is_ok());
    assert!(
        layer
            .retry_after(AdaptiveLayer::<AimdLimit, ManualClock>::MAX_RETRY_AFTER)
            .is_ok()
    );
}

#[test]
fn a_closed_limiter_is_503_whatever_the_reject_status() {
    let (limiter, _) = limiter(1, WhenLimited::FailFast);
    limiter.close();
    let calls = Arc::new(AtomicUsize::new(0));
    let service = AdaptiveLayer::new(Arc::clone(&limiter))
        .reject_with(RejectStatus::TooManyRequests)
        .retry_after(Duration::from_secs(1))
        .unwrap()
        .layer(status_service(200, &calls));
    let refused = block_on(service.oneshot(Request::new(()))).unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().get("retry-after").is_none());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// 429, 503 and 504 cut the AIMD limit by 10 %; a 500 and a 404 are successes.
#[test]
fn overload_statuses_reach_the_algorithm_as_drops() {
    for (status, limit) in [
        (503, 9),
        (429, 9),
        (504, 9),
        (500, 10),
        (404, 10),
        (200, 10),
    ] {
        let (limiter, _) = limiter(10, WhenLimited::FailFast);
        let calls = Arc::new(AtomicUsize::new(0));
        let service =
            AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(status, &calls));
        let response = block_on(service.oneshot(Request::new(()))).unwrap();
        assert_eq!(response.status(), status);
        block_on(response.into_body().collect()).unwrap();
        assert_eq!(limiter.limit(), limit, "status {status}");
        assert_eq!(limiter.inflight(), 0);
    }
}

/// Repeated drops walk the limit down to its minimum, and refusals start.
#[test]
fn repeated_drops_shrink_the_limit_to_its_minimum() {
    let (limiter, _) = limiter(4, WhenLimited::FailFast);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(503, &calls));
    block_on(async {
        let mut limits = Vec::new();
        for _ in 0..4 {
            let response = service
                .ready()
                .await
                .unwrap()
                .call(Request::new(()))
                .await
                .unwrap();
            response.into_body().collect().await.unwrap();
            limits.push(limiter.limit());
        }
        assert_eq!(limits, [3, 2, 1, 1]);
    });
}

/// The latency is measured to the end of the body: a head at once and a body
/// 2 s later is a sample of 2 s, over the AIMD timeout of 1 s, so a drop.
#[test]
fn the_latency_ends_when_the_body_ends() {
    let (limiter, clock) = limiter(10, WhenLimited::FailFast);
    let calls = Arc::new(AtomicUsize::new(0));
    let service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(200, &calls));
    let response = block_on(service.oneshot(Request::new(()))).unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(limiter.limit(), 10, "nothing recorded at the head");
    block_on(response.into_body().collect()).unwrap();
    assert_eq!(limiter.limit(), 9, "a 2 s sample: over the timeout");
}

/// An empty body ends the request with its head: hyper does not poll such a body.
#[test]
fn an_empty_body_ends_the_request_at_the_head() {
    let (limiter, _) = limiter(2, WhenLimited::FailFast);
    let service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(service_fn(|_: ()| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let response = block_on(service.oneshot(())).unwrap();
    assert_eq!(limiter.inflight(), 0);
    assert_eq!(limiter.limit(), 3, "a success with 1 of 2 in use: +1");
    drop(response);
    assert_eq!(limiter.limit(), 3);
}

/// A body dropped before its end: ignored after a good head, dropped after a 503.
#[test]
fn a_body_dropped_early_keeps_only_a_drop() {
    for (status, limit) in [(200, 2), (503, 1)] {
        let (limiter, _) = limiter(2, WhenLimited::FailFast);
        let calls = Arc::new(AtomicUsize::new(0));
        let service =
            AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(status, &calls));
        let response = block_on(service.oneshot(Request::new(()))).unwrap();
        assert_eq!(limiter.inflight(), 1);
        drop(response);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.limit(), limit, "status {status}");
    }
}

/// A body that fails half way is a drop, whatever its head said; a streamed body
/// without trailers keeps the head's outcome, recorded at its end.
#[test]
fn a_body_that_fails_is_a_drop() {
    for (fails, limit) in [(true, 1), (false, 3)] {
        let (limiter, clock) = limiter(2, WhenLimited::FailFast);
        let service =
            AdaptiveLayer::new(Arc::clone(&limiter)).layer(service_fn(move |_: ()| async move {
                let last = match fails {
                    true => Err(io::Error::from(io::ErrorKind::ConnectionReset)),
                    false => Ok(Frame::data(Bytes::from_static(b"two"))),
                };
                let frames = vec![Ok(Frame::data(Bytes::from_static(b"one"))), last];
                Ok::<_, Infallible>(Response::new(StreamBody::new(futures::stream::iter(
                    frames,
                ))))
            }));
        let response = block_on(service.oneshot(())).unwrap();
        clock.advance(Duration::from_millis(10));
        let collected = block_on(response.into_body().collect());
        assert_eq!(collected.is_err(), fails);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.limit(), limit, "fails: {fails}");
    }
}

#[test]
fn grpc_status_in_the_head_of_a_trailers_only_response() {
    // AIMD from 2, one call in flight: a success grows the limit to 3, a drop cuts
    // it to 1, an ignored call leaves it.
    for (grpc, limit) in [("0", 3), ("14", 1), ("4", 1), ("8", 1), ("1", 2), ("5", 3)] {
        let (limiter, _) = limiter(2, WhenLimited::FailFast);
        let service = AdaptiveLayer::new(Arc::clone(&limiter))
            .classify(GrpcStatus::new())
            .layer(service_fn(move |_: ()| async move {
                Ok::<_, Infallible>(grpc_head(grpc))
            }));
        let response = block_on(service.oneshot(())).unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(limiter.limit(), limit, "grpc-status {grpc}");
    }
}

#[test]
fn grpc_status_in_the_trailers_overrides_the_head() {
    for (grpc, limit) in [("0", 3), ("14", 1), ("1", 2)] {
        let (limiter, _) = limiter(2, WhenLimited::FailFast);
        let service = AdaptiveLayer::new(Arc::clone(&limiter))
            .classify(GrpcStatus::new())
            .layer(service_fn(move |_: ()| async move {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", grpc.parse().unwrap());
                let frames = vec![
                    Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"message"))),
                    Ok(Frame::trailers(trailers)),
                ];
                let body = StreamBody::new(futures::stream::iter(frames));
                Ok::<_, Infallible>(
                    Response::builder()
                        .header("content-type", "application/grpc")
                        .body(body)
                        .unwrap(),
                )
            }));
        let response = block_on(service.oneshot(())).unwrap();
        assert_eq!(limiter.inflight(), 1, "streaming");
        let collected = block_on(response.into_body().collect()).unwrap();
        assert_eq!(collected.trailers().unwrap()["grpc-status"], grpc);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.limit(), limit, "grpc-status {grpc} in the trailers");
    }
}

#[test]
fn a_closure_classifier_replaces_the_status_rules() {
    let (limiter, _) = limiter(10, WhenLimited::FailFast);
    let classify = classify_fn(|response: &http::response::Parts| {
        match response.headers.get("x-overloaded") {
            Some(_) => Outcome::Dropped,
            None => Outcome::Success,
        }
    });
    let service = AdaptiveLayer::new(Arc::clone(&limiter))
        .classify(classify)
        .layer(service_fn(|overloaded: bool| async move {
            let mut response = answer(503);
            *response.status_mut() = StatusCode::OK;
            if overloaded {
                response
                    .headers_mut()
                    .insert("x-overloaded", "1".parse().unwrap());
            }
            Ok::<_, Infallible>(response)
        }));
    let response = block_on(service.clone().oneshot(false)).unwrap();
    block_on(response.into_body().collect()).unwrap();
    assert_eq!(limiter.limit(), 10);
    let response = block_on(service.oneshot(true)).unwrap();
    block_on(response.into_body().collect()).unwrap();
    assert_eq!(limiter.limit(), 9);
}

#[test]
fn an_error_of_the_inner_service_is_a_drop_unless_told_otherwise() {
    let failing = || {
        service_fn(|kind: io::ErrorKind| async move {
            Err::<Response<Empty<Bytes>>, _>(io::Error::from(kind))
        })
    };
    let (limiter, _) = limiter(10, WhenLimited::FailFast);
    let service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(failing());
    let error = block_on(service.oneshot(io::ErrorKind::TimedOut)).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(limiter.limit(), 9);
    assert_eq!(limiter.inflight(), 0);

    // Only timeouts count; a refused connection is the request's own failure.
    let classify = HttpStatus::new().on_error(|e: &io::Error| match e.kind() {
        io::ErrorKind::TimedOut => Outcome::Dropped,
        _ => Outcome::Ignored,
    });
    let service = AdaptiveLayer::new(Arc::clone(&limiter))
        .classify(classify)
        .layer(failing());
    block_on(service.clone().oneshot(io::ErrorKind::ConnectionRefused)).unwrap_err();
    assert_eq!(limiter.limit(), 9);
    block_on(service.oneshot(io::ErrorKind::TimedOut)).unwrap_err();
    assert_eq!(limiter.limit(), 8);
}

/// tower's `Timeout` fails with its `Elapsed` inside a `BoxError`; any boxed error
/// is a drop by default, whatever it holds.
#[test]
fn a_boxed_error_such_as_a_tower_timeout_is_a_drop() {
    let (limiter, _) = limiter(10, WhenLimited::FailFast);
    let timed_out = service_fn(|_: ()| async {
        let error: tower::BoxError = "request timed out".into();
        Err::<Response<Empty<Bytes>>, _>(error)
    });
    let service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(timed_out);
    block_on(service.oneshot(())).unwrap_err();
    assert_eq!(limiter.limit(), 9);
}

#[test]
fn dropping_a_response_future_during_the_call_gives_the_permit_back() {
    let (limiter, _) = limiter(2, WhenLimited::FailFast);
    let never = service_fn(|_: ()| {
        futures::future::pending::<Result<Response<Empty<Bytes>>, Infallible>>()
    });
    let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(never);
    block_on(async {
        let mut call = Box::pin(service.ready().await.unwrap().call(()));
        assert!(poll!(call.as_mut()).is_pending());
        assert_eq!(limiter.inflight(), 1);
        drop(call);
    });
    assert_eq!(limiter.inflight(), 0);
    assert_eq!(limiter.available_permits(), 2);
    assert_eq!(limiter.limit(), 2, "ignored: no sample");
}

#[test]
fn a_waiting_request_is_admitted_when_a_body_ends_and_leaves_the_queue_when_dropped() {
    // One permit, whatever the samples say.
    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(1)
        .max_limit(1)
        .build()
        .unwrap();
    let mode = WhenLimited::fifo(Duration::from_secs(10)).unwrap();
    let limiter = Arc::new(AdaptiveLimiter::with_clock(aimd, mode, clock.clone()).unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(200, &calls));
    block_on(async {
        let held = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let mut waiting = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(waiting.as_mut()).is_pending());
        assert_eq!(limiter.waiters(), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "not sent while it waits");

        // Cancelled while waiting: it leaves the queue.
        let mut cancelled = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(cancelled.as_mut()).is_pending());
        assert_eq!(limiter.waiters(), 2);
        drop(cancelled);
        assert_eq!(limiter.waiters(), 1);

        held.into_body().collect().await.unwrap();
        let response = waiting.await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        // Granted but never polled again: the permit goes back when dropped.
        let mut granted = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(granted.as_mut()).is_pending());
        drop(response);
        assert_eq!(limiter.inflight(), 1, "handed to the waiter");
        drop(granted);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), limiter.limit());

        // A wait that times out is refused.
        let _held = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let mut late = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(late.as_mut()).is_pending());
        clock.advance(Duration::from_secs(10));
        assert_eq!(late.await.unwrap().status(), 503);
    });
}

#[test]
fn a_full_lifo_backlog_is_refused_at_once() {
    let (limiter, _) = limiter(1, WhenLimited::lifo(1, Duration::from_secs(1)).unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(200, &calls));
    block_on(async {
        let _held = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let mut waiting = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(waiting.as_mut()).is_pending());
        let refused = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        assert_eq!(refused.status(), 503);
    });
}

#[test]
fn the_client_layer_refuses_with_a_typed_error_and_sends_nothing() {
    let (limiter, _) = limiter(1, WhenLimited::FailFast);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut client =
        AdaptiveClientLayer::new(Arc::clone(&limiter)).layer(status_service(200, &calls));
    block_on(async {
        let held = client
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let error = client
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap_err();
        assert!(matches!(
            error,
            ClientError::Refused(AcquireError::TimedOut)
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drop(held);
    });
    limiter.close();
    let error = block_on(client.oneshot(Request::new(()))).unwrap_err();
    assert!(matches!(error, ClientError::Refused(AcquireError::Closed)));
}

#[test]
fn the_client_layer_learns_from_the_partners_answers() {
    let (limiter, _) = limiter(10, WhenLimited::FailFast);
    let calls = Arc::new(AtomicUsize::new(0));
    for status in [503, 429, 200] {
        let client =
            AdaptiveClientLayer::new(Arc::clone(&limiter)).layer(status_service(status, &calls));
        let response = block_on(client.oneshot(Request::new(()))).unwrap();
        block_on(response.into_body().collect()).unwrap();
    }
    assert_eq!(
        limiter.limit(),
        8,
        "10 × 0.9 = 9, × 0.9 = 8, then unchanged"
    );

    // A gRPC partner: UNAVAILABLE is a drop; a timed-out call (an error) too.
    let client = AdaptiveClientLayer::new(Arc::clone(&limiter))
        .classify(GrpcStatus::new())
        .layer(service_fn(|_: ()| async {
            Ok::<_, Infallible>(grpc_head("14"))
        }));
    block_on(client.oneshot(())).unwrap();
    assert_eq!(limiter.limit(), 7);
    let client = AdaptiveClientLayer::new(Arc::clone(&limiter)).layer(service_fn(|_: ()| async {
        Err::<Response<Empty<Bytes>>, _>(io::Error::from(io::ErrorKind::TimedOut))
    }));
    let error = block_on(client.oneshot(())).unwrap_err();
    assert_eq!(error.into_inner().unwrap().kind(), io::ErrorKind::TimedOut);
    assert_eq!(limiter.limit(), 6);
}

#[test]
fn the_classifiers_are_usable_alone() {
    let (parts, ()) = Response::builder()
        .status(503)
        .body(())
        .unwrap()
        .into_parts();
    assert_eq!(HttpStatus::new().classify(&parts), Outcome::Dropped);
    assert_eq!(GrpcStatus::new().classify(&parts), Outcome::Dropped);
}

fn send_sync<T: Send + Sync>() {}

#[test]
fn layers_services_and_futures_cross_threads() {
    type Inner = tower::util::BoxCloneSyncService<(), Response<Full<Bytes>>, Infallible>;
    send_sync::<AdaptiveLayer<AimdLimit, ManualClock>>();
    send_sync::<AdaptiveClientLayer<AimdLimit, ManualClock, GrpcStatus>>();
    send_sync::<tollgate::http::adaptive::AdaptiveService<Inner, AimdLimit, ManualClock>>();
    send_sync::<tollgate::http::adaptive::AdaptiveBody<Full<Bytes>, AimdLimit, ManualClock>>();
    fn send<T: Send>() {}
    send::<tollgate::http::adaptive::AdaptiveFuture<Inner, (), AimdLimit, ManualClock>>();
    send::<tollgate::http::adaptive::ClientFuture<Inner, (), AimdLimit, ManualClock>>();
}

/// Over real HTTP: axum behind the layer, on loopback, and a hyper client.
#[cfg(feature = "axum")]
#[tokio::test]
async fn over_http_the_layer_refuses_past_the_limit_and_learns_from_503s() {
    use axum::routing::get;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tokio::sync::Notify;

    let (limiter, _) = limiter(1, WhenLimited::FailFast);
    let release = Arc::new(Notify::new());
    let app = axum::Router::new()
        .route(
            "/slow",
            get({
                let release = Arc::clone(&release);
                move || async move {
                    release.notified().await;
                    "done"
                }
            }),
        )
        .route(
            "/overloaded",
            get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "busy") }),
        )
        .layer(
            AdaptiveLayer::new(Arc::clone(&limiter))
                .retry_after(Duration::from_secs(3))
                .unwrap(),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |path: &str| {
        let request = Request::get(format!("http://{addr}{path}"))
            .body(Empty::new())
            .unwrap();
        client.request(request)
    };
    let slow = tokio::spawn(get("/slow"));
    while limiter.inflight() == 0 {
        tokio::task::yield_now().await;
    }
    let refused = get("/slow").await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "3");
    release.notify_one();
    let done = slow.await.unwrap().unwrap();
    assert_eq!(done.into_body().collect().await.unwrap().to_bytes(), "done");
    while limiter.inflight() != 0 {
        tokio::task::yield_now().await;
    }

    let (limiter_before, overloaded) = (limiter.limit(), get("/overloaded").await.unwrap());
    assert_eq!(overloaded.status(), 503);
    overloaded.into_body().collect().await.unwrap();
    while limiter.inflight() != 0 {
        tokio::task::yield_now().await;
    }
    assert!(limiter_before >= 2, "the slow success grew it");
    assert!(limiter.limit() < limiter_before, "the 503 cut it");
}

/// Each request is one decision in the limiter's events, in the waiting modes too
/// (the layer does not try, fail, then wait), and each admitted one ends once,
/// with the outcome its response was read as.
#[test]
fn the_limiters_events_count_each_request_once() {
    use std::sync::Mutex;
    use tollgate::observe::{Event, EventKind, Events};

    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = Events::new("backend");
    let _subscription = events.subscribe({
        let seen = Arc::clone(&seen);
        move |event: &Event<'_>| seen.lock().unwrap().push(event.kind)
    });
    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(1)
        .max_limit(1)
        .build()
        .unwrap();
    let mode = WhenLimited::fifo(Duration::from_secs(1)).unwrap();
    let limiter = Arc::new(
        AdaptiveLimiter::with_clock(aimd, mode, clock.clone())
            .unwrap()
            .with_events(events),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(status_service(503, &calls));
    block_on(async {
        let first = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let mut second = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(second.as_mut()).is_pending());
        clock.advance(Duration::from_millis(300));
        first.into_body().collect().await.unwrap();
        let second = second.await.unwrap();
        let mut third = Box::pin(service.ready().await.unwrap().call(Request::new(())));
        assert!(poll!(third.as_mut()).is_pending());
        clock.advance(Duration::from_secs(1));
        assert_eq!(third.await.unwrap().status(), 503);
        drop(second);
    });
    let seen = seen.lock().unwrap();
    let decisions: Vec<_> = seen
        .iter()
        .filter(|k| {
            matches!(
                k,
                EventKind::Admitted | EventKind::Waited { .. } | EventKind::Denied { .. }
            )
        })
        .collect();
    assert_eq!(decisions.len(), 3, "{seen:?}");
    assert!(matches!(decisions[0], EventKind::Admitted));
    assert!(
        matches!(decisions[1], EventKind::Waited { wait } if *wait == Duration::from_millis(300))
    );
    assert!(matches!(decisions[2], EventKind::Denied { .. }));
    let finished: Vec<_> = seen
        .iter()
        .filter_map(|k| match k {
            EventKind::Finished { outcome, rtt, .. } => Some((*outcome, *rtt)),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [
            (Outcome::Dropped, Duration::from_millis(300)),
            (Outcome::Dropped, Duration::from_secs(1)),
        ],
        "the second's body was dropped early after a 503 head: still a drop"
    );
}
