//! The service binary, started on loopback ports, asked over gRPC and HTTP as Envoy
//! and the Go service's clients ask it.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::{Rls, eventually, http, read_answer, rules};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use serde_json::Value;
use tonic::transport::Channel;

const RELOAD: Duration = Duration::from_secs(15);

fn request(domain: &str, key: &str, value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.to_owned(),
                value: value.to_owned(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

fn json_request(domain: &str, key: &str, value: &str) -> String {
    format!(
        r#"{{"domain":"{domain}","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    )
}

fn write(dir: &Path, name: &str, text: &str) {
    // Written outside the watched directory and renamed in, so the watch never reads
    // half a file.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = std::env::temp_dir().join(format!("tollgate-rls-{}-{n}.tmp", std::process::id()));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// The limit the service answers `user=value` of domain `test` with, over `/json`.
fn limit_over_json(rls: &Rls, value: &str) -> Option<u64> {
    let answer = http(
        rls.http,
        "POST",
        "/json",
        &json_request("test", "user", value),
    );
    let body: Value = serde_json::from_str(&answer.body).ok()?;
    body["statuses"][0]["currentLimit"]["requestsPerUnit"].as_u64()
}

async fn client(rls: &Rls) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(rls.grpc_url())
        .await
        .unwrap()
}

/// 21 requests for `value`: `Err` if they do not count down from 19 to OVER_LIMIT.
async fn count_down(
    client: &mut RateLimitServiceClient<Channel>,
    value: &str,
) -> Result<(), String> {
    for i in 0..21u32 {
        let response: RateLimitResponse = client
            .should_rate_limit(request("test", "user", value))
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        let status = &response.statuses[0];
        let limit = status.current_limit.as_ref().ok_or("no current limit")?;
        if limit.requests_per_unit != 20 {
            return Err(format!("limit {}", limit.requests_per_unit));
        }
        let (want_code, want_remaining) = if i < 20 {
            (Code::Ok, 20 - (i + 1))
        } else {
            (Code::OverLimit, 0)
        };
        if response.overall_code != want_code as i32
            || status.code != want_code as i32
            || status.limit_remaining != want_remaining
        {
            return Err(format!("request {i}: {response:?}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_counts_down_to_over_limit() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let rls = Rls::start(dir.path(), &[]);
    let mut client = client(&rls).await;
    // The window is the clock's minute: a run that straddles its end starts again
    // with a fresh key; two straddles in a row cannot happen.
    let first = count_down(&mut client, "alice").await;
    if let Err(e) = first {
        eprintln!("first run: {e}; again");
        count_down(&mut client, "bob").await.unwrap();
    }
    // Another key of the same descriptor is counted apart.
    let response = client
        .should_rate_limit(request("test", "user", "carol"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.overall_code, Code::Ok as i32);
    // A domain with no rules answers OK, without a limit.
    let response = client
        .should_rate_limit(request("nobody", "user", "alice"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.overall_code, Code::Ok as i32);
    assert_eq!(response.statuses[0].current_limit, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_errors_are_the_go_services() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let rls = Rls::start(dir.path(), &[]);
    let mut client = client(&rls).await;

    let empty_domain = client
        .should_rate_limit(request("", "user", "alice"))
        .await
        .unwrap_err();
    assert_eq!(empty_domain.code(), tonic::Code::Unknown);
    assert_eq!(
        empty_domain.message(),
        "rate limit domain must not be empty"
    );

    let no_descriptors = client
        .should_rate_limit(RateLimitRequest {
            domain: "test".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(no_descriptors.code(), tonic::Code::Unknown);
    assert_eq!(
        no_descriptors.message(),
        "rate limit descriptor list must not be empty"
    );

    // The standard health service, under the Go service's name.
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let channel = Channel::from_shared(rls.grpc_url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["ratelimit", ""] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }
}

#[test]
fn json_round_trip_and_status_codes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "test.yaml", &rules("test", "user", 1, "hour"));
    let rls = Rls::start(dir.path(), &[]);

    let ok = http(
        rls.http,
        "POST",
        "/json",
        &json_request("test", "user", "alice"),
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(
        ok.head
            .to_ascii_lowercase()
            .contains("content-type: application/json")
    );
    let body: Value = serde_json::from_str(&ok.body).unwrap();
    assert_eq!(body["overallCode"], "OK");
    assert_eq!(body["statuses"][0]["code"], "OK");
    assert_eq!(body["statuses"][0]["currentLimit"]["requestsPerUnit"], 1);
    assert_eq!(body["statuses"][0]["currentLimit"]["unit"], "HOUR");
    // Zero values are left out, as protojson writes them.
    assert!(
        body["statuses"][0].get("limitRemaining").is_none(),
        "{body}"
    );
    let reset = body["statuses"][0]["durationUntilReset"].as_str().unwrap();
    assert!(reset.ends_with('s'), "{reset}");

    let over = http(
        rls.http,
        "POST",
        "/json",
        &json_request("test", "user", "alice"),
    );
    // The hour may have turned between the two: then the second is OK again.
    if over.status == 200 {
        let again = http(
            rls.http,
            "POST",
            "/json",
            &json_request("test", "user", "alice"),
        );
        assert_eq!(again.status, 429, "{again:?}");
    } else {
        assert_eq!(over.status, 429, "{over:?}");
        let body: Value = serde_json::from_str(&over.body).unwrap();
        assert_eq!(body["overallCode"], "OVER_LIMIT");
        assert_eq!(body["statuses"][0]["code"], "OVER_LIMIT");
    }

    // The proto's own field names are read too.
    let snake = http(
        rls.http,
        "POST",
        "/json",
        r#"{"domain":"test","descriptors":[{"entries":[{"key":"user","value":"dave"}]}],"hits_addend":1}"#,
    );
    assert_eq!(snake.status, 200, "{snake:?}");

    let bad = http(rls.http, "POST", "/json", "{not json");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body, "Bad Request\n");
    let unknown_field = http(rls.http, "POST", "/json", r#"{"domian":"test"}"#);
    assert_eq!(unknown_field.status, 400);
    let empty_domain = http(rls.http, "POST", "/json", &json_request("", "user", "x"));
    assert_eq!(empty_domain.status, 400);
    let no_descriptors = http(rls.http, "POST", "/json", r#"{"domain":"test"}"#);
    assert_eq!(no_descriptors.status, 400);
}

#[test]
fn healthcheck_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "test.yaml", &rules("test", "user", 1, "hour"));
    let rls = Rls::start(dir.path(), &[]);
    let health = http(rls.http, "GET", "/healthcheck", "");
    assert_eq!((health.status, health.body.as_str()), (200, "OK"));
    let metrics = http(rls.http, "GET", "/metrics", "");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.head.contains("text/plain; version=0.0.4"),
        "{}",
        metrics.head
    );
    assert_eq!(http(rls.http, "GET", "/nothing", "").status, 404);
}

#[test]
fn healthy_with_at_least_one_config_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let rls = Rls::start(dir.path(), &["--healthy-with-at-least-one-config-loaded"]);
    assert_eq!(http(rls.http, "GET", "/healthcheck", "").status, 500);
    write(dir.path(), "test.yaml", &rules("test", "user", 1, "hour"));
    eventually(RELOAD, "healthy once a domain loads", || {
        http(rls.http, "GET", "/healthcheck", "").status == 200
    });
}

#[test]
fn an_edited_file_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let rls = Rls::start(dir.path(), &[]);
    assert_eq!(limit_over_json(&rls, "alice"), Some(20));
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 50, "minute"),
    );
    eventually(RELOAD, "the new limit", || {
        limit_over_json(&rls, "alice") == Some(50)
    });
    // A new file in a subdirectory adds its domain.
    std::fs::create_dir(dir.path().join("more")).unwrap();
    write(
        &dir.path().join("more"),
        "other",
        &rules("other", "user", 7, "second"),
    );
    eventually(RELOAD, "the new domain", || {
        let answer = http(
            rls.http,
            "POST",
            "/json",
            &json_request("other", "user", "a"),
        );
        answer.body.contains(r#""requestsPerUnit":7"#)
    });
}

#[test]
fn a_broken_file_keeps_the_old_rules() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let rls = Rls::start(dir.path(), &[]);
    assert_eq!(limit_over_json(&rls, "alice"), Some(20));

    write(
        dir.path(),
        "test.yaml",
        "domain: test\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n",
    );
    // Along with the broken edit, a good new file: it is applied.
    write(dir.path(), "more.yaml", &rules("more", "user", 3, "second"));
    let path = dir.path().join("test.yaml").display().to_string();
    eventually(RELOAD, "the error on stderr", || {
        rls.stderr().lines().any(|line| {
            // `path:line:column: message`, the numbers those of the bad unit.
            line.find(&format!("{path}:")).is_some_and(|at| {
                let mut rest = line[at + path.len() + 1..].splitn(3, ':');
                rest.next().and_then(|n| n.parse::<u32>().ok()) == Some(5)
                    && rest.next().and_then(|n| n.parse::<u32>().ok()).is_some()
            })
        })
    });
    eventually(RELOAD, "the good file applied", || {
        http(
            rls.http,
            "POST",
            "/json",
            &json_request("more", "user", "a"),
        )
        .body
        .contains(r#""requestsPerUnit":3"#)
    });
    assert_eq!(limit_over_json(&rls, "alice"), Some(20));
}

#[test]
fn the_runtime_root_symlink_swapped() {
    let base = tempfile::tempdir().unwrap();
    for (version, n) in [("v1", 20), ("v2", 30)] {
        let dir = base.path().join(version).join("ratelimit").join("config");
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "test.yaml", &rules("test", "user", n, "minute"));
    }
    let current = base.path().join("current");
    std::os::unix::fs::symlink(base.path().join("v1"), &current).unwrap();
    let mut command = common::command(&[]);
    command
        .env("RUNTIME_ROOT", &current)
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .env("RUNTIME_WATCH_ROOT", "true");
    let rls = Rls::spawn(command);
    assert_eq!(limit_over_json(&rls, "alice"), Some(20));

    let next = base.path().join("next");
    std::os::unix::fs::symlink(base.path().join("v2"), &next).unwrap();
    std::fs::rename(&next, &current).unwrap();
    eventually(RELOAD, "the swapped root", || {
        limit_over_json(&rls, "alice") == Some(30)
    });
}

#[test]
fn sigterm_drains_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let mut rls = Rls::start(dir.path(), &[]);

    // A request in flight: its head and half its body sent.
    let body = json_request("test", "user", "alice");
    let (first, second) = body.split_at(body.len() / 2);
    let mut in_flight = TcpStream::connect(rls.http).unwrap();
    in_flight
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        in_flight,
        "POST /json HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{first}",
        body.len()
    )
    .unwrap();
    in_flight.flush().unwrap();
    // Let the server read the head before the signal.
    eventually(Duration::from_secs(5), "a healthy service", || {
        http(rls.http, "GET", "/healthcheck", "").status == 200
    });

    rls.sigterm();
    // New connections are refused once the listener is closed.
    eventually(common::STARTUP, "the listener closed", || {
        TcpStream::connect(rls.http).is_err()
    });
    // The request in flight still completes.
    in_flight.write_all(second.as_bytes()).unwrap();
    let answer = read_answer(&mut in_flight);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains(r#""overallCode":"OK""#), "{answer:?}");

    let status = rls.wait_exit(common::STARTUP);
    assert_eq!(status.code(), Some(0), "stderr:\n{}", rls.stderr());
}

#[test]
fn bad_settings_exit_with_code_2() {
    let out = common::command(&["--port", "http"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    let mut command = common::command(&["--config", "/nonexistent"]);
    command.env("BACKEND_TYPE", "memcache");
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("BACKEND_TYPE"), "{stderr}");

    let mut command = common::command(&["--config", "/nonexistent"]);
    command.env("SHADOW_MODE", "yes");
    assert_eq!(command.output().unwrap().status.code(), Some(2));

    for threads in ["0", "-1", "4097", "18446744073709551616", "many"] {
        let out = common::command(&[&format!("--worker-threads={threads}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--worker-threads {threads}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("thread count"), "{threads}: {stderr}");
    }
}

/// A unary gRPC call made by hand over `h2`: the status and message of its answer
/// (from the trailers, or from the headers of a trailers-only answer) and its body.
async fn raw_call(
    rls: &Rls,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (String, String, bytes::Bytes) {
    let tcp = tokio::net::TcpStream::connect(rls.grpc).await.unwrap();
    let (mut send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::post(format!(
        "http://{}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        rls.grpc
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let (response, mut stream) = send.send_request(request.body(()).unwrap(), false).unwrap();
    // The service may answer from the headers alone (an unsupported encoding) and
    // close the stream before the message goes: its answer is what is checked.
    let _ = stream.send_data(body.into(), true);
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let head = response.headers().clone();
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    let field = |name: &str| {
        trailers
            .get(name)
            .or_else(|| head.get(name))
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    (field("grpc-status"), field("grpc-message"), data.into())
}

fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// `ShouldRateLimit` skips tonic's router and codec (`hot_path`); what it answers to
/// good and bad messages is still what tonic answered, on both runtimes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hot_path_answers_as_tonic_did() {
    use prost::Message as _;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    for args in [&[][..], &["--worker-threads", "1"][..]] {
        let rls = Rls::start(dir.path(), args);
        let good = request("test", "user", "alice").encode_to_vec();

        let (status, _, body) = raw_call(&rls, &[("grpc-timeout", "5S")], framed(0, &good)).await;
        assert_eq!(status, "0", "{args:?}");
        let answer = RateLimitResponse::decode(&body[5..]).unwrap();
        assert_eq!(answer.overall_code, Code::Ok as i32);
        assert_eq!(answer.statuses[0].limit_remaining, 19, "{answer:?}");

        // Compressed without saying how: INTERNAL, as gRPC asks.
        let (status, message, _) = raw_call(&rls, &[], framed(1, &good)).await;
        assert_eq!(status, "13");
        assert!(message.contains("compressed-flag"), "{message}");
        // Said to be gzip: tonic's routes answer that it is not supported.
        let (status, _, _) = raw_call(&rls, &[("grpc-encoding", "gzip")], framed(1, &good)).await;
        assert_eq!(status, "12");
        // Not a protobuf, cut short, or absent: INTERNAL, with tonic's words.
        let (status, _, _) = raw_call(&rls, &[], framed(0, &[0xff, 0xff, 0xff])).await;
        assert_eq!(status, "13");
        let (status, message, _) = raw_call(&rls, &[], framed(0, &good)[..4].to_vec()).await;
        assert_eq!(
            (status.as_str(), message.as_str()),
            ("13", "Unexpected%20EOF%20decoding%20stream.")
        );
        let (status, message, _) = raw_call(&rls, &[], Vec::new()).await;
        assert_eq!(
            (status.as_str(), message.as_str()),
            ("13", "Missing%20request%20message.")
        );
        // A length above tonic's 4 MiB: OUT_OF_RANGE, and nothing more is read.
        let (status, _, _) = raw_call(&rls, &[], vec![0, 0xff, 0xff, 0xff, 0xff]).await;
        assert_eq!(status, "11");
        // The Go service's errors keep their words on the hot path.
        let empty = RateLimitRequest::default().encode_to_vec();
        let (status, message, _) = raw_call(&rls, &[], framed(0, &empty)).await;
        assert_eq!(status, "2");
        assert_eq!(message, "rate%20limit%20domain%20must%20not%20be%20empty");
    }
}

#[test]
fn a_missing_directory_stops_the_start_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = common::command(&["--config", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));

    let mut command = common::command(&["--config", missing.to_str().unwrap()]);
    command.env("FORCE_START_WITHOUT_INITIAL_CONFIG", "true");
    let rls = Rls::spawn(command);
    std::fs::create_dir(&missing).unwrap();
    write(&missing, "test.yaml", &rules("test", "user", 20, "minute"));
    eventually(RELOAD, "the directory once it exists", || {
        limit_over_json(&rls, "alice") == Some(20)
    });
}

#[test]
fn a_request_that_never_finishes_is_cut_at_the_drain_timeout() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let mut rls = Rls::start(dir.path(), &["--drain-timeout", "300ms"]);
    let mut stuck = TcpStream::connect(rls.http).unwrap();
    write!(
        stuck,
        "POST /json HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n{{"
    )
    .unwrap();
    eventually(Duration::from_secs(5), "a healthy service", || {
        http(rls.http, "GET", "/healthcheck", "").status == 200
    });
    rls.sigterm();
    let status = rls.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", rls.stderr());
    // The pipe's last lines may reach the reader thread after the exit.
    eventually(Duration::from_secs(5), "the drain timeout logged", || {
        rls.stderr().contains("drain timeout")
    });
}

#[test]
fn prometheus_listener_and_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "test.yaml",
        &rules("test", "user", 20, "minute"),
    );
    let mut command = common::command(&["--config", dir.path().to_str().unwrap()]);
    command
        .env("USE_PROMETHEUS", "1")
        .env("PROMETHEUS_ADDR", "127.0.0.1:0")
        .env("PROMETHEUS_PATH", "/stats/prometheus")
        .env("LOG_FORMAT", "json")
        .env("LOG_LEVEL", "info");
    let rls = Rls::spawn(command);
    let prometheus: std::net::SocketAddr = rls
        .line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("prometheus="))
        .expect("the Prometheus address")
        .parse()
        .unwrap();
    eventually(Duration::from_secs(5), "the listening line logged", || {
        rls.stderr().contains("listening")
    });
    for line in rls.stderr().lines() {
        let logged: Value = serde_json::from_str(line).expect("a JSON log line");
        assert!(logged["fields"]["message"].is_string(), "{line}");
    }
    let metrics = http(prometheus, "GET", "/stats/prometheus", "");
    assert_eq!(metrics.status, 200);
    assert!(metrics.head.contains("text/plain; version=0.0.4"));
    assert_eq!(http(prometheus, "GET", "/json", "").status, 404);
}
