//! The service binary, started for a test on loopback ports, and a plain HTTP client.

#![allow(dead_code)]

pub mod rlqs;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The Go service's environment variables: none leaks from the test's environment.
const GO_ENV: &[&str] = &[
    "HOST",
    "PORT",
    "GRPC_HOST",
    "GRPC_PORT",
    "USE_PROMETHEUS",
    "PROMETHEUS_ADDR",
    "PROMETHEUS_PATH",
    "LOG_LEVEL",
    "LOG_FORMAT",
    "RUNTIME_ROOT",
    "RUNTIME_SUBDIRECTORY",
    "RUNTIME_APPDIRECTORY",
    "RUNTIME_IGNOREDOTFILES",
    "RUNTIME_WATCH_ROOT",
    "MERGE_DOMAIN_CONFIG",
    "FORCE_START_WITHOUT_INITIAL_CONFIG",
    "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    "BACKEND_TYPE",
    "REDIS_TYPE",
    "REDIS_SOCKET_TYPE",
    "REDIS_URL",
    "REDIS_AUTH",
    "REDIS_TLS",
    "REDIS_POOL_SIZE",
    "REDIS_TIMEOUT",
    "NEAR_LIMIT_RATIO",
    "LOCAL_CACHE_SIZE_IN_BYTES",
    "CACHE_KEY_PREFIX",
    "EXPIRATION_JITTER_MAX_SECONDS",
    "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
    "LIMIT_RESPONSE_HEADERS_ENABLED",
    "LIMIT_LIMIT_HEADER",
    "LIMIT_REMAINING_HEADER",
    "LIMIT_RESET_HEADER",
    "SHADOW_MODE",
    "QUOTA_MODE",
    "RESPONSE_DYNAMIC_METADATA",
];

/// How long the service may take to start or to stop.
pub const STARTUP: Duration = Duration::from_secs(30);

/// A running `tollgate-rls`, killed on drop.
pub struct Rls {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    /// The `tollgate-rls listening …` line.
    pub line: String,
    stderr: Arc<Mutex<String>>,
}

/// The command, with loopback ports 0 and a quick watch; no Go variable inherited.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate-rls"));
    for name in GO_ENV {
        command.env_remove(name);
    }
    command
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--grpc-host",
            "127.0.0.1",
            "--grpc-port",
            "0",
            "--watch-interval",
            "50ms",
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

impl Rls {
    /// Serves the domain files of `config`.
    pub fn start(config: &Path, args: &[&str]) -> Rls {
        let mut all = vec!["--config", config.to_str().unwrap()];
        all.extend_from_slice(args);
        Rls::spawn(command(&all))
    }

    /// Starts `command` and waits for its `listening` line.
    pub fn spawn(mut command: Command) -> Rls {
        let mut child = command.spawn().expect("the binary starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines() {
                let Ok(line) = line else { return };
                let mut sink = sink.lock().unwrap();
                sink.push_str(&line);
                sink.push('\n');
            }
        });
        let out_pipe = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out_pipe).lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        let line = match rx.recv_timeout(STARTUP) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no listening line; stderr:\n{}", stderr.lock().unwrap());
            }
        };
        let addr = |name: &str| -> SocketAddr {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
                .parse()
                .unwrap()
        };
        assert!(line.starts_with("tollgate-rls listening "), "{line}");
        Rls {
            grpc: addr("grpc="),
            http: addr("http="),
            line,
            child,
            stderr,
        }
    }

    /// What the service wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, within `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the service did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The gRPC endpoint, for tonic.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.1 answer: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Sends one request on a new connection and reads the answer to its end.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_answer(&mut stream)
}

/// Reads an answer to the end of the connection (the request said `close`).
pub fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a full answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Polls `check` until it is true, within `limit`.
pub fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A domain file: `domain`, one key with `n` requests a `unit`.
pub fn rules(domain: &str, key: &str, n: u32, unit: &str) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit:\n      unit: {unit}\n      requests_per_unit: {n}\n"
    )
}
