//! An axum server limited per client IP and per route by the rules of a YAML file
//! (`examples/rules.yaml`, envoy-ratelimit style).
//!
//! ```text
//! cargo run --example rate_limited_server --features axum,config            # serve on 127.0.0.1:3000
//! cargo run --example rate_limited_server --features axum,config -- --demo  # ask itself, print, exit
//! ```
//!
//! Then `curl -i http://127.0.0.1:3000/login` six times: the sixth gets a 429 with
//! `Retry-After`, `RateLimit-Policy`, `RateLimit` and a JSON body. `--demo` serves on
//! a free port, sends a few requests itself and prints the answers.
//!
//! Options: `--rules FILE` (default: examples/rules.yaml), `--addr HOST:PORT`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use tollgate::KeyedConfig;
use tollgate::config::{ConfigLimiter, ConfigLimits, RuleSet};
use tollgate::http::ClientIp;
use tollgate::http::server::RateLimitLayer;
use tollgate::store::MemoryStore;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Options {
    rules: String,
    addr: SocketAddr,
    demo: bool,
}

fn options() -> Result<Options, Error> {
    let mut options = Options {
        rules: concat!(env!("CARGO_MANIFEST_DIR"), "/rules.yaml").to_owned(),
        addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
        demo: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--demo" => options.demo = true,
            "--rules" => options.rules = args.next().ok_or("--rules needs a file")?,
            "--addr" => options.addr = args.next().ok_or("--addr needs HOST:PORT")?.parse()?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if options.demo {
        options.addr.set_port(0);
    }
    Ok(options)
}

/// The service: a few routes, behind the limits of the rules file.
fn app(rules: RuleSet) -> Result<Router, Error> {
    // 100,000 keys at most: a flood of new client addresses cannot grow memory past it.
    let store = MemoryStore::new(KeyedConfig::new(100_000), rules.domain())?;
    let limiter = ConfigLimiter::new(rules, store)?;
    let shadow_denials = Arc::new(AtomicU64::new(0));
    // Each request counts as [remote_address], [path] and [remote_address, path].
    let limits = ConfigLimits::by_client_and_path(limiter, ClientIp::new()).on_shadow_denial(
        move |denial| {
            let n = shadow_denials.fetch_add(1, Ordering::Relaxed) + 1;
            eprintln!("{denial} (#{n})");
        },
    );
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/login", get(|| async { "welcome\n" }))
        .route("/search", get(|| async { "results\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .route("/export", get(|| async { "export\n" }))
        .layer(RateLimitLayer::new(limits).legacy_headers(true)))
}

/// Runs the server, and on failure prints the error as people read it
/// (`rules.yaml:6:26: requests_per_unit must be greater than zero`), not its `Debug`
/// form, which is what returning it from `main` prints.
#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Error> {
    let options = options()?;
    let rules = RuleSet::from_file(&options.rules)?;
    let app = app(rules)?;
    // The error names the address: "Address already in use" alone does not say which.
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.addr))?;
    let addr = listener.local_addr()?;
    // Serving with `ConnectInfo` records each connection's peer address: `ClientIp`
    // reads it.
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    );
    if !options.demo {
        println!(
            "listening on http://{addr} with the rules of {}",
            options.rules
        );
        server.await?;
        return Ok(());
    }
    tokio::spawn(async move { server.await });
    demo(addr).await
}

/// Six logins (the rules allow five a minute per client), then a health check.
async fn demo(addr: SocketAddr) -> Result<(), Error> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for path in ["/login"; 6].into_iter().chain(["/health"]) {
        let response = client.get(format!("http://{addr}{path}").parse()?).await?;
        println!("GET {path} -> {}", response.status());
        for (name, value) in response.headers() {
            let name = name.as_str();
            if name.contains("ratelimit") || name == "retry-after" {
                println!("  {name}: {}", value.to_str().unwrap_or("?"));
            }
        }
        let body = response.into_body().collect().await?.to_bytes();
        println!("  {}", String::from_utf8_lossy(&body).trim_end());
    }
    Ok(())
}
