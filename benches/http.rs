//! The server layer's cost per request: tollgate's `RateLimitLayer` next to
//! tower_governor's `GovernorLayer`, both keyed by the client's IP address, both
//! around the same inner service (a `service_fn` answering an empty 200 at once).
//!
//! No network: each request is built before timing (a `SocketAddr` and axum's
//! `ConnectInfo` in its extensions, so that either layer finds the peer where it looks)
//! and sent with `ready().call()` under `futures::executor::block_on`; the time counted
//! is the call, the response and dropping it.
//!
//! - `tollgate`: `RateLimitLayer::keyed(ClientIp::new(), KeyedLimiter::<String, _>::new(
//!   Gcra, KeyedConfig::new(100_000)))`, the in-process keyed limiter, as governor's
//!   keyed limiter is. Every response it answers or passes carries `RateLimit-Policy`
//!   and `RateLimit`; a 429 also `Retry-After`, `Content-Type`, `Cache-Control` and a
//!   JSON body.
//! - `tollgate.memory_store`: the same layer over `SharedLimiter::new(MemoryStore::new(
//!   KeyedConfig::new(100_000), "b"), Gcra)`, the store a deployment can later swap
//!   for Redis.
//! - `tower_governor`: `GovernorLayer` with `PeerIpKeyExtractor` and `use_headers()`:
//!   `X-RateLimit-Limit` and `X-RateLimit-Remaining` on what it passes, those and
//!   `X-RateLimit-After` and `Retry-After` on a 429, with a text body.
//! - `tower_governor.no_headers`: the same without `use_headers()`, for scale (a
//!   topic of its own, so `ratios.py` shows it without comparing tollgate to it).
//!
//! Scenarios (`1_key_*`: every request from one address; `10k_keys_*`: from 10,000
//! addresses in turn), each checked before timing:
//!
//! - `*_admitted`: a quota no run exhausts, 10⁹ per second with a second of burst.
//! - `*_denied`: one request per hour, spent for every address before timing.
//!
//! The group `http_server_parts` (10,000 addresses) takes the tollgate layer apart,
//! each piece next to what tower_governor does in its place where there is one: the
//! key, the check (key, limiter, verdict) over the keyed limiter and over the memory
//! store, the keyed limiter alone, the store through `SharedLimiter` (awaited, and
//! decided at once) and `MemoryStore::execute_now` alone, the fields, the layer
//! around a check already decided, the inner service alone, and the quanta clock
//! tower_governor builds on every denial.
//!
//! Run `cargo bench -p tollgate-benches --bench http --features http`;
//! `benches/README.md` has figures.

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use futures::executor::block_on;
use governor::middleware::{NoOpMiddleware, RateLimitingMiddleware, StateInformationMiddleware};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use tollgate::algorithm::Gcra;
use tollgate::http::server::{self, RateLimitLayer};
use tollgate::http::{
    CheckFuture, ClientIp, KeyExtractor, KeyedLimits, Limits, Policy, Verdict, wire,
};
use tollgate::store::{Check, MemoryStore, Op, Request as StoreRequest, Rule, SharedLimiter};
use tollgate::{KeyedConfig, KeyedLimiter, Quota};
use tower::{Layer, Service, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::{KeyExtractor as _, PeerIpKeyExtractor};

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// The two quotas, in both crates' terms.
#[derive(Clone, Copy)]
enum Outcome {
    /// 10⁹ per second, a second of burst: never exhausted.
    Admitted,
    /// One per hour, spent before timing.
    Denied,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Denied => "denied",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Outcome::Admitted => StatusCode::OK,
            Outcome::Denied => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn quota(self) -> Quota {
        let quota = match self {
            Outcome::Admitted => {
                Quota::per_second(1_000_000_000).and_then(|q| q.burst(1_000_000_000))
            }
            Outcome::Denied => Quota::per_hour(1),
        };
        quota.expect("valid quota")
    }

    fn limiter(self) -> SharedLimiter<MemoryStore> {
        let store = MemoryStore::new(KeyedConfig::new(100_000), "b").expect("valid store");
        SharedLimiter::new(store, Gcra::new(self.quota())).expect("valid limiter")
    }

    fn keyed_limiter(self) -> KeyedLimiter<String, Gcra> {
        KeyedLimiter::new(Gcra::new(self.quota()), KeyedConfig::new(100_000))
            .expect("valid keyed limiter")
    }

    fn tollgate(self) -> RateLimitLayer<KeyedLimits<ClientIp, KeyedLimiter<String, Gcra>>> {
        RateLimitLayer::keyed(ClientIp::new(), self.keyed_limiter())
    }

    fn tollgate_memory_store(
        self,
    ) -> RateLimitLayer<KeyedLimits<ClientIp, SharedLimiter<MemoryStore>>> {
        RateLimitLayer::keyed(ClientIp::new(), self.limiter())
    }

    fn governor<M: RateLimitingMiddleware<governor::clock::QuantaInstant>>(
        self,
        mut builder: GovernorConfigBuilder<PeerIpKeyExtractor, M>,
    ) -> GovernorConfig<PeerIpKeyExtractor, M> {
        match self {
            Outcome::Admitted => builder.per_nanosecond(1).burst_size(1_000_000_000),
            Outcome::Denied => builder.per_second(3_600).burst_size(1),
        };
        builder.finish().expect("valid governor config")
    }

    fn tower_governor(self) -> GovernorLayer<PeerIpKeyExtractor, StateInformationMiddleware, Body> {
        GovernorLayer::new(self.governor(GovernorConfigBuilder::default().use_headers()))
    }

    fn tower_governor_no_headers(self) -> GovernorLayer<PeerIpKeyExtractor, NoOpMiddleware, Body> {
        GovernorLayer::new(self.governor(GovernorConfigBuilder::default()))
    }
}

/// The client addresses of a scenario, visited in turn.
#[derive(Clone, Copy)]
enum Keys {
    One,
    TenThousand,
}

impl Keys {
    fn count(self) -> u64 {
        match self {
            Keys::One => 1,
            Keys::TenThousand => 10_000,
        }
    }

    fn scenario(self, outcome: Outcome) -> String {
        let keys = match self {
            Keys::One => "1_key",
            Keys::TenThousand => "10k_keys",
        };
        format!("{keys}_{}", outcome.name())
    }
}

/// The peer address of the `i`th client: 10.0.0.0 onwards.
fn peer(i: u64) -> SocketAddr {
    let ip = Ipv4Addr::from(0x0a00_0000 + i as u32);
    SocketAddr::new(IpAddr::V4(ip), 40_000)
}

/// A request from client `i`, with its address where either layer looks for it.
fn request(i: u64) -> Request<()> {
    let addr = peer(i);
    let mut request = Request::new(());
    request.extensions_mut().insert(addr);
    request.extensions_mut().insert(ConnectInfo(addr));
    request
}

/// The inner service: an empty 200 at once.
fn inner()
-> impl Service<Request<()>, Response = Response<Body>, Error = Infallible, Future: Send> + Clone {
    tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(Body::empty())) })
}

/// Sends one request through `service` and waits for the response.
fn send<S, B>(service: &mut S, request: Request<()>) -> Response<B>
where
    S: Service<Request<()>, Response = Response<B>>,
    S::Error: Debug,
{
    block_on(async {
        let ready = service.ready().await.expect("ready");
        ready.call(request).await.expect("a response")
    })
}

/// Checks that `service` answers every client of `keys` as `outcome` says (spending
/// the one permit of each first, when denying), with rate-limit fields.
fn prepare<S, B>(service: &mut S, keys: Keys, outcome: Outcome, peer: &str)
where
    S: Service<Request<()>, Response = Response<B>>,
    S::Error: Debug,
{
    for i in 0..keys.count() {
        if let Outcome::Denied = outcome {
            let first = send(service, request(i));
            assert_eq!(first.status(), StatusCode::OK, "{peer}: first request");
        }
        let response = send(service, request(i));
        assert_eq!(
            response.status(),
            outcome.status(),
            "{peer}: {}",
            keys.scenario(outcome)
        );
        let fields = response.headers();
        let has_fields = if peer.starts_with("tollgate") {
            fields.contains_key("ratelimit") && fields.contains_key("ratelimit-policy")
        } else if peer == "tower_governor" {
            fields.contains_key("x-ratelimit-remaining")
        } else {
            true
        };
        assert!(has_fields, "{peer}: rate-limit fields missing: {fields:?}");
    }
}

/// Times `op` on requests built beforehand, from clients `i % keys` in turn. The
/// response is dropped within the time counted: freeing it is part of its cost.
fn bench_requests<R>(
    group: &mut Group<'_>,
    peer: &str,
    scenario: &str,
    keys: u64,
    mut op: impl FnMut(Request<()>) -> R,
) {
    let mut index = 0u64;
    group.bench_function(BenchmarkId::new(peer, scenario), |b| {
        b.iter_batched(
            || {
                index = index.wrapping_add(1);
                request(index % keys)
            },
            |request| drop(black_box(op(request))),
            BatchSize::SmallInput,
        )
    });
}

/// Sends every request through `service`, after [`prepare`].
fn bench_service<S, B>(
    group: &mut Group<'_>,
    peer: &str,
    keys: Keys,
    outcome: Outcome,
    mut service: S,
) where
    S: Service<Request<()>, Response = Response<B>>,
    S::Error: Debug,
{
    prepare(&mut service, keys, outcome, peer);
    let scenario = keys.scenario(outcome);
    bench_requests(group, peer, &scenario, keys.count(), |request| {
        send(&mut service, request)
    });
}

fn group<'a>(c: &'a mut Criterion, name: &str) -> Group<'a> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group
}

fn server(c: &mut Criterion) {
    let mut group = group(c, "http_server");
    for keys in [Keys::One, Keys::TenThousand] {
        for outcome in [Outcome::Admitted, Outcome::Denied] {
            let tollgate = outcome.tollgate().layer(inner());
            bench_service(&mut group, "tollgate", keys, outcome, tollgate);
            let store = outcome.tollgate_memory_store().layer(inner());
            bench_service(&mut group, "tollgate.memory_store", keys, outcome, store);
            let governor = outcome.tower_governor().layer(inner());
            bench_service(&mut group, "tower_governor", keys, outcome, governor);
            let plain = outcome.tower_governor_no_headers().layer(inner());
            bench_service(
                &mut group,
                "tower_governor.no_headers",
                keys,
                outcome,
                plain,
            );
        }
    }
    group.finish();
}

/// A [`Limits`] whose every check is already decided: the layer around no store.
struct Decided(Verdict);

impl Limits for Decided {
    fn check(&self, _: &http::request::Parts) -> CheckFuture {
        CheckFuture::ready(Ok(self.0.clone()))
    }

    fn policies(&self) -> Vec<Policy> {
        self.0.policies.to_vec()
    }
}

/// Polls a future that is ready at once, without an executor.
fn now<F: Future>(future: F) -> F::Output {
    futures::FutureExt::now_or_never(future).expect("ready at once")
}

fn parts(c: &mut Criterion) {
    let mut group = group(c, "http_server_parts");
    let keys = Keys::TenThousand;
    for outcome in [Outcome::Admitted, Outcome::Denied] {
        let scenario = |part: &str| format!("{part}_{}", keys.scenario(outcome));

        // The key: tollgate formats the address into its `Key` (inline, no
        // `String`); tower_governor keeps the `IpAddr`.
        bench_requests(
            &mut group,
            "tollgate",
            &scenario("key"),
            keys.count(),
            |request| {
                let (head, ()) = request.into_parts();
                black_box(ClientIp::new().extract(&head)).is_ok()
            },
        );
        bench_requests(
            &mut group,
            "governor",
            &scenario("key"),
            keys.count(),
            |request| PeerIpKeyExtractor.extract(&request).ok(),
        );

        // The check: key, limiter, verdict (decided at once, the future ready), over
        // the keyed limiter (`tollgate`) and over the memory store
        // (`tollgate.memory_store`), next to tower_governor's key and `check_key` on
        // its config's limiter.
        let keyed = KeyedLimits::new(ClientIp::new(), outcome.keyed_limiter());
        let limits = KeyedLimits::new(ClientIp::new(), outcome.limiter());
        let config = outcome.governor(GovernorConfigBuilder::default().use_headers());
        for i in 0..keys.count() {
            let (head, ()) = request(i).into_parts();
            let tollgate = now(keyed.check(&head)).expect("checked");
            let store = now(limits.check(&head)).expect("checked");
            let governor = config.limiter().check_key(&peer(i).ip());
            if let Outcome::Denied = outcome {
                assert!(tollgate.is_admitted() && store.is_admitted() && governor.is_ok());
            }
        }
        bench_requests(
            &mut group,
            "tollgate",
            &scenario("check"),
            keys.count(),
            |request| {
                let (head, ()) = request.into_parts();
                now(keyed.check(&head))
            },
        );
        bench_requests(
            &mut group,
            "tollgate.memory_store",
            &scenario("check"),
            keys.count(),
            |request| {
                let (head, ()) = request.into_parts();
                now(limits.check(&head))
            },
        );
        bench_requests(
            &mut group,
            "governor",
            &scenario("check"),
            keys.count(),
            |request| {
                let key = PeerIpKeyExtractor.extract(&request).expect("a peer");
                config.limiter().check_key(&key)
            },
        );

        // The limiter alone, its key formatted before timing: the keyed limiter's
        // `try_acquire(&str, 1)` (`tollgate`); the store through `SharedLimiter`
        // (its checks, span, boxed `Store::execute`), through its synchronous
        // `try_acquire` (what the check uses), and `MemoryStore::execute_now`
        // on a request built before timing (the storage key, the map, GCRA).
        let names: Vec<String> = (0..keys.count())
            .map(|i| peer(i).ip().to_string())
            .collect();
        let keyed = keyed.limiter();
        let mut index = 0;
        group.bench_function(BenchmarkId::new("tollgate", scenario("store")), |b| {
            b.iter(|| {
                index = (index + 1) % names.len();
                keyed.try_acquire(names[index].as_str(), 1)
            })
        });
        let limiter = limits.limiter();
        let mut index = 0;
        group.bench_function(
            BenchmarkId::new("tollgate.memory_store", scenario("store")),
            |b| {
                b.iter(|| {
                    index = (index + 1) % names.len();
                    now(limiter.check(&names[index], 1))
                })
            },
        );
        let rule = Rule::from(Gcra::new(outcome.quota()));
        let checks = [Check::new("", &rule)];
        let requests: Vec<StoreRequest<'_>> = names
            .iter()
            .map(|name| StoreRequest::new(name, &checks, Op::Acquire(1)))
            .collect();
        let store = limiter.store();
        let mut index = 0;
        group.bench_function(
            BenchmarkId::new("tollgate.memory_store", scenario("execute_now")),
            |b| {
                b.iter(|| {
                    index = (index + 1) % requests.len();
                    store.execute_now(&requests[index])
                })
            },
        );
        let mut index = 0;
        group.bench_function(
            BenchmarkId::new("tollgate.memory_store", scenario("store_now")),
            |b| {
                b.iter(|| {
                    index = (index + 1) % names.len();
                    limiter.try_acquire(&names[index], 1)
                })
            },
        );
        let mut index = 0;
        group.bench_function(BenchmarkId::new("governor", scenario("store")), |b| {
            b.iter(|| {
                index = (index + 1) % keys.count();
                config.limiter().check_key(&peer(index).ip())
            })
        });

        // The fields: tollgate's structured fields of one verdict, next to the two
        // integer fields tower_governor adds to what it passes.
        let (head, ()) = request(0).into_parts();
        let verdict = now(limits.check(&head)).expect("checked");
        group.bench_function(BenchmarkId::new("tollgate", scenario("fields")), |b| {
            b.iter(|| {
                let mut fields = HeaderMap::new();
                server::insert(&mut fields, &verdict, false);
                fields
            })
        });

        // The layer around a check already decided: the verdict's clone, the inner
        // service's future, fields, body.
        let decided = RateLimitLayer::new(Decided(verdict));
        let mut service = decided.layer(inner());
        bench_requests(
            &mut group,
            "tollgate",
            &scenario("layer_decided"),
            keys.count(),
            |request| send(&mut service, request),
        );
    }
    // tower_governor's denial builds a quanta clock to compute the wait; building
    // one reads CPUID, which traps to the hypervisor in a VM.
    group.bench_function(BenchmarkId::new("governor", "clock_default"), |b| {
        b.iter(governor::clock::DefaultClock::default)
    });
    // No layer at all: the inner service and the executor.
    let mut service = inner();
    bench_requests(&mut group, "inner_only", "10k_keys", 10_000, |request| {
        send(&mut service, request)
    });
    group.finish();
}

/// The `RateLimit` field the server layer writes on every response, one way against
/// the other: through `sfv` (the name checked as an sf-string, then escaped, the
/// integers through `write!`), and by hand as `tollgate::http::wire::ratelimit_value`
/// writes it. Both end in a `HeaderValue`, as the layer needs; the numbers are an
/// admitted request's under the `*_admitted` quota. Run with `-- http_wire`.
fn wire_fields(c: &mut Criterion) {
    let mut group = group(c, "http_wire");
    let policy = Policy::new("default", 1_000_000_000, Duration::from_secs(1));
    let (remaining, t) = (999_999_937_u64, 1_u64);
    let sf_integer = |n: u64| sfv::Integer::try_from(n).unwrap_or(sfv::Integer::MAX);
    group.bench_function("ratelimit_field/sfv", |b| {
        b.iter(|| {
            let name = sfv::StringRef::from_str(&policy.name).expect("printable ASCII");
            let mut out = String::with_capacity(policy.name.len() + 40);
            let _ = sfv::ItemSerializer::with_buffer(&mut out)
                .bare_item(name)
                .parameter(sfv::key_ref("r"), sf_integer(black_box(remaining)))
                .parameter(sfv::key_ref("t"), sf_integer(black_box(t)));
            HeaderValue::try_from(out).expect("printable ASCII")
        })
    });
    group.bench_function("ratelimit_field/hand", |b| {
        b.iter(|| wire::ratelimit_value(&policy, black_box(remaining), black_box(t)))
    });
    group.finish();
}

/// Longer than `main.rs`'s: a request costs a microsecond or so, and the breakdown
/// is read against the whole.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = server, parts, wire_fields
}
criterion_main!(benches);
