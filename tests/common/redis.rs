//! Real `redis-server` processes for the Redis tests: one server, or a small Cluster, each
//! on free loopback ports with a throwaway data directory, killed when dropped.
//!
//! Every port is picked fresh, so a test never talks to an instance that happens to run on
//! 6379. Start with [`require_redis`], which applies the CI rule (with `CI=true` a missing
//! Redis fails the run; otherwise the test is skipped with a note):
//!
//! ```ignore
//! let Some(()) = require_redis() else { return };
//! let mut server = RedisServer::start();
//! let client = redis::Client::open(server.url()).unwrap();
//! server.kill();    // SIGKILL: connections drop, new ones are refused
//! server.restart(); // same port, empty data set
//! ```
//!
//! Also a TLS-only server with an ACL user ([`RedisServer::start_tls`]), and a master with
//! a replica watched by Sentinels ([`RedisSentinels`]), for failovers.
//!
//! The methods block (they poll the server over plain TCP), so in an async test call them
//! from `#[tokio::test(flavor = "multi_thread")]` or `spawn_blocking` when requests are in
//! flight. The harness speaks RESP itself, needing no client crate and no runtime.

use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a server may take to answer `PING` after it is spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new cluster may take to agree on its slots and turn ok.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(20);
/// The pause between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// Fresh ports tried before giving up, should another process take ours first.
const START_ATTEMPTS: usize = 10;
/// How long a Sentinel waits on a silent master before it calls it down.
const SENTINEL_DOWN_AFTER_MS: u64 = 1_000;
/// How long a Sentinel's failover may take (generous: a promotion takes about 1 s, and
/// CI machines are busy).
const SENTINEL_FAILOVER_TIMEOUT_MS: u64 = 3_000;
/// How long a new replica and new Sentinels may take to find each other.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(20);
/// Distinguishes the data directories of the servers of one test process.
static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// Checks that `redis-server` is on `PATH`.
///
/// Returns `Some(())` when it is. When it is missing it panics if the `CI`
/// environment variable is `true` (or `1`), so that CI never passes by skipping, and
/// otherwise prints a note to stderr and returns `None`: the caller returns early.
///
/// # Panics
///
/// With `CI=true`, if it is missing, with
/// "redis-server not found; install it (apt-get install -y redis-server)".
pub fn require_redis() -> Option<()> {
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    require_binaries(&["redis-server"], ci)
}

/// [`require_redis`] with the binaries and the CI flag given, so that both branches can
/// be tested.
///
/// # Panics
///
/// If `ci` and one of `binaries` cannot be run.
pub fn require_binaries(binaries: &[&str], ci: bool) -> Option<()> {
    let Some(missing) = binaries.iter().find(|b| !runs(b)) else {
        return Some(());
    };
    let message = format!("{missing} not found; install it (apt-get install -y redis-server)");
    if ci {
        panic!("{message} (CI=true: a missing Redis fails the run instead of skipping)");
    }
    eprintln!("note: skipping a Redis test: {message}");
    None
}

/// Whether `binary --version` can be spawned (found on `PATH` and executable).
fn runs(binary: &str) -> bool {
    Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// What a server is started with.
#[derive(Debug, Clone, Default)]
struct Options {
    password: Option<String>,
    cluster: bool,
    /// More `--name value` arguments, e.g. `--replicaof`.
    extra: Vec<String>,
    /// TLS only (`--port 0`): the port is the TLS port.
    tls: Option<TlsFiles>,
    /// An ACL user, with the default user turned off.
    user: Option<(String, String)>,
    /// A Sentinel rather than a server.
    sentinel: Option<SentinelConf>,
}

/// The PEM files of a TLS server: its certificate, its key, and the CA it trusts.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// What a Sentinel monitors, and how fast it gives up on a master.
#[derive(Debug, Clone)]
struct SentinelConf {
    master_name: String,
    master_port: u16,
    quorum: usize,
    /// The master speaks TLS only: the Sentinel reaches it with these files.
    tls: Option<TlsFiles>,
    /// The master's ACL user.
    user: Option<(String, String)>,
}

/// The arguments every server gets from the environment: with
/// `TOLLGATE_TEST_REDIS_FUNCTIONS=off`, `FUNCTION` and `FCALL` renamed away, as on
/// Redis 6, so that a run of the Redis tests takes the stores' `EVALSHA` path.
fn environment_args() -> Vec<String> {
    let off = std::env::var("TOLLGATE_TEST_REDIS_FUNCTIONS").is_ok_and(|v| v == "off");
    if !off {
        return Vec::new();
    }
    [
        "--rename-command",
        "FUNCTION",
        "",
        "--rename-command",
        "FCALL",
        "",
    ]
    .map(String::from)
    .to_vec()
}

/// A `redis-server` child process on `127.0.0.1` with no persistence, killed and its
/// data directory removed on drop.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    options: Options,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be spawned, or no server is ready within 10 s after
    /// [`START_ATTEMPTS`] ports (the message carries the server's log).
    pub fn start() -> RedisServer {
        Self::launch(Options {
            extra: environment_args(),
            ..Options::default()
        })
    }

    /// Starts a server that requires `password` (`requirepass`); [`url`](Self::url)
    /// carries it.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with_password(password: &str) -> RedisServer {
        Self::launch(Options {
            password: Some(password.to_owned()),
            extra: environment_args(),
            ..Options::default()
        })
    }

    /// Starts a TLS-only server (`--port 0 --tls-port …`) with the certificate and key
    /// of `tls`, not asking clients for certificates (`--tls-auth-clients no`), and,
    /// with `user`, that ACL user allowed everything and the default user turned off.
    /// [`url`](Self::url) is `rediss://[user:password@]127.0.0.1:port/`. It is ready
    /// when its log says so (the harness's probes speak plain TCP).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_tls(tls: &TlsFiles, user: Option<(&str, &str)>) -> RedisServer {
        Self::launch(Options {
            tls: Some(tls.clone()),
            user: user.map(|(u, p)| (u.to_owned(), p.to_owned())),
            extra: environment_args(),
            ..Options::default()
        })
    }

    /// Starts a server with more arguments (`["--replicaof", "127.0.0.1", "6379"]`),
    /// and not those of the environment.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with_args(args: &[&str]) -> RedisServer {
        Self::launch(Options {
            extra: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Options::default()
        })
    }

    /// Tries fresh ports until a server is ready on one: between our probe binding a
    /// port and the server binding it, another process may take it.
    fn launch(options: Options) -> RedisServer {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port(options.cluster);
            let dir = std::env::temp_dir().join(format!(
                "tollgate-redis-{}-{}-{port}",
                std::process::id(),
                NEXT_DIR.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
            let mut server = RedisServer {
                port,
                options: options.clone(),
                dir,
                child: None,
            };
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(e) => failures.push(e), // dropping `server` cleans up
            }
        }
        panic!(
            "redis-server did not start in {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    /// The URL to connect with, `redis://[:password@]127.0.0.1:port/`
    /// (`rediss://[user:password@]…` for [`start_tls`](Self::start_tls)).
    pub fn url(&self) -> String {
        if self.options.tls.is_some() {
            return match &self.options.user {
                Some((user, password)) => format!(
                    "rediss://{}:{}@127.0.0.1:{}/",
                    percent_encode(user),
                    percent_encode(password),
                    self.port
                ),
                None => format!("rediss://127.0.0.1:{}/", self.port),
            };
        }
        match &self.options.password {
            Some(password) => format!(
                "redis://:{}@127.0.0.1:{}/",
                percent_encode(password),
                self.port
            ),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    /// The port the server listens on; it keeps it across [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the process is running (not [`kill`](Self::kill)ed, not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Kills the server with SIGKILL, as a crash would, and waits for it to exit; its
    /// connections drop and new ones are refused. Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, with an empty data set (nothing is
    /// persisted, so scripts must be reloaded too), and waits until it is ready. Kills
    /// it first if it is running.
    ///
    /// # Panics
    ///
    /// If it is not ready within 10 s, e.g. because another process took the port.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.spawn_and_wait() {
            panic!("redis-server did not restart: {e}");
        }
    }

    /// Spawns `redis-server` on `self.port` and waits until it answers `PING`, as
    /// itself: an error with its log if it exits (e.g. the port is taken) or times out.
    /// Panics if it cannot be spawned at all.
    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let log_path = self.dir.join("redis.log");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        // The log is appended to across restarts: only a new line says ready.
        let ready_line = "Ready to accept connections";
        let readies = |path: &PathBuf| {
            fs::read_to_string(path)
                .unwrap_or_default()
                .matches(ready_line)
                .count()
        };
        let readies_before = readies(&log_path);
        let mut command = Command::new("redis-server");
        if let Some(sentinel) = &self.options.sentinel {
            // A Sentinel rewrites its configuration file, so it gets one of its own.
            let conf = self.dir.join("sentinel.conf");
            let name = &sentinel.master_name;
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 sentinel monitor {name} 127.0.0.1 {master} {quorum}\n\
                 sentinel down-after-milliseconds {name} {SENTINEL_DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {name} {SENTINEL_FAILOVER_TIMEOUT_MS}\n",
                port = self.port,
                dir = self.dir.display(),
                master = sentinel.master_port,
                quorum = sentinel.quorum,
            );
            let mut text = text;
            if let Some(tls) = &sentinel.tls {
                text.push_str(&format!(
                    "tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-replication yes\n",
                    tls.cert.display(),
                    tls.key.display(),
                    tls.ca.display()
                ));
            }
            if let Some((user, password)) = &sentinel.user {
                text.push_str(&format!(
                    "sentinel auth-user {name} {user}\nsentinel auth-pass {name} \"{password}\"\n"
                ));
            }
            fs::write(&conf, text).map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
            command.arg(&conf).arg("--sentinel");
        } else {
            match &self.options.tls {
                None => {
                    command.args(["--port", &self.port.to_string()]);
                }
                Some(tls) => {
                    command
                        .args(["--port", "0", "--tls-port", &self.port.to_string()])
                        .arg("--tls-cert-file")
                        .arg(&tls.cert)
                        .arg("--tls-key-file")
                        .arg(&tls.key)
                        .arg("--tls-ca-cert-file")
                        .arg(&tls.ca)
                        .args(["--tls-auth-clients", "no"]);
                }
            }
            command
                .args(["--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(&self.dir);
            if let Some((user, password)) = &self.options.user {
                command
                    .args([
                        "--user",
                        user,
                        "on",
                        &format!(">{password}"),
                        "~*",
                        "&*",
                        "+@all",
                    ])
                    .args(["--user", "default", "off"]);
            }
            if let Some(password) = &self.options.password {
                command.args(["--requirepass", password]);
            }
            if self.options.cluster {
                // The cluster bus listens on port + 10000 (see `free_port`).
                command.args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ]);
            }
            command.args(&self.options.extra);
        }
        command.stdin(Stdio::null()).stdout(log).stderr(log_err);
        // Not a port race, so not worth retrying.
        let child = command.spawn().unwrap_or_else(|e| {
            panic!("cannot run redis-server: {e}; install it (apt-get install -y redis-server)")
        });
        let pid = child.id();
        self.child = Some(child);

        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                self.child = None;
                return Err(self.failure(&format!("exited with {status}")));
            }
            let ready = if self.options.tls.is_some() {
                // A TLS-only server cannot be probed in plain TCP: its log tells.
                readies(&log_path) > readies_before
            } else {
                // Probe for our own process: a server of another test may have won the
                // port.
                self.query(&["PING"]).is_ok_and(|reply| reply == "PONG")
                    && self
                        .query(&["INFO", "server"])
                        .unwrap_or_default()
                        .contains(&format!("process_id:{pid}\r"))
            };
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(self.failure(&format!("not ready within {READY_TIMEOUT:?}")));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Runs a command that must succeed.
    fn expect_ok(&self, args: &[&str]) {
        if let Err(e) = self.query(args) {
            panic!(
                "{} {} on port {}: {e}",
                args[0],
                args.get(1).unwrap_or(&""),
                self.port
            );
        }
    }

    fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Describes a failed start, with the end of the server's log.
    fn failure(&self, what: &str) -> String {
        let log = fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "redis-server on port {} {what}; log:\n{}",
            self.port,
            tail.join("\n")
        )
    }

    /// Sends one command (authenticating first if a password is set) and returns the
    /// reply: a simple, bulk (nil as "") or integer reply as text, a Redis error as an
    /// `io::Error`. Short timeouts: this is only for probes.
    fn query(&self, args: &[&str]) -> io::Result<String> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let stream = TcpStream::connect_timeout(&address, Duration::from_millis(200))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.set_write_timeout(Some(Duration::from_secs(1)))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = stream;
        if let Some(password) = &self.options.password {
            writer.write_all(&encode(&["AUTH", password]))?;
            read_reply(&mut reader)?;
        }
        writer.write_all(&encode(args))?;
        read_reply(&mut reader)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of masters without replicas, each a [`RedisServer`]; dropping it
/// kills them all.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` cluster-enabled servers, splits the slots evenly among them, joins
    /// them, and waits until every node knows the others and reports `cluster_state:ok`
    /// (about 2 s).
    ///
    /// # Panics
    ///
    /// If `masters < 3` (the least Redis accepts), if a server does not start, or if the
    /// cluster is not ok within 20 s.
    pub fn start(masters: usize) -> RedisCluster {
        Self::launch(masters, &environment_args())
    }

    /// As [`start`](Self::start), each server with `args` added to its command line
    /// (and not those of the environment).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with_args(masters: usize, args: &[&str]) -> RedisCluster {
        let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
        Self::launch(masters, &args)
    }

    fn launch(masters: usize, args: &[String]) -> RedisCluster {
        assert!(masters >= 3, "a Redis Cluster needs at least 3 masters");
        let nodes: Vec<RedisServer> = (0..masters)
            .map(|_| {
                RedisServer::launch(Options {
                    cluster: true,
                    extra: args.to_vec(),
                    ..Options::default()
                })
            })
            .collect();
        let cluster = RedisCluster { nodes };
        cluster.create();
        cluster.wait_ok(Instant::now() + CLUSTER_TIMEOUT);
        cluster
    }

    /// Does what `redis-cli --cluster create --cluster-replicas 0 --cluster-yes` does,
    /// without its one-second polls: gives each node an even share of the slots and a
    /// distinct config epoch, then introduces every pair. The cluster is then ok in
    /// about 2 s, the delay a new master waits before accepting writes; through
    /// redis-cli it took 2 to 5 s.
    fn create(&self) {
        const SLOTS: usize = 16384;
        let count = self.nodes.len();
        for (i, node) in self.nodes.iter().enumerate() {
            let slots: Vec<String> = (i * SLOTS / count..(i + 1) * SLOTS / count)
                .map(|slot| slot.to_string())
                .collect();
            let mut args = vec!["CLUSTER", "ADDSLOTS"];
            args.extend(slots.iter().map(String::as_str));
            node.expect_ok(&args);
            node.expect_ok(&["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]);
        }
        // Each pair meets directly: learning of nodes through gossip takes seconds.
        for (i, node) in self.nodes.iter().enumerate() {
            for other in &self.nodes[i + 1..] {
                node.expect_ok(&["CLUSTER", "MEET", "127.0.0.1", &other.port.to_string()]);
            }
        }
    }

    /// Waits until every node knows every other and sees all slots served.
    fn wait_ok(&self, deadline: Instant) {
        let known = format!("cluster_known_nodes:{}\r", self.nodes.len());
        for node in &self.nodes {
            loop {
                let info = node.query(&["CLUSTER", "INFO"]);
                if info
                    .as_ref()
                    .is_ok_and(|i| i.contains("cluster_state:ok\r") && i.contains(&known))
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node 127.0.0.1:{} not ok within {CLUSTER_TIMEOUT:?}: {info:?}",
                    node.port
                );
                thread::sleep(POLL_INTERVAL);
            }
        }
    }

    /// The URL of every node, to seed a cluster client with.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes, e.g. to [`kill`](RedisServer::kill) one.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }
}

/// A master, one replica and Sentinels watching them, each a [`RedisServer`] on a free
/// loopback port; dropping it kills them all, the Sentinels first.
///
/// Started in order, so that the first failover has a candidate at once: the master
/// (with `repl-diskless-sync-delay 0`), the replica, which syncs within a second, then
/// the Sentinels (quorum: a majority of them), once they all know the replica and each
/// other. A Sentinel calls the master down after 1 s of silence.
#[derive(Debug)]
pub struct RedisSentinels {
    sentinels: Vec<RedisServer>,
    master: RedisServer,
    replica: Option<RedisServer>,
    master_name: String,
}

impl RedisSentinels {
    /// Starts the master, its replica and `sentinels` Sentinels watching it under
    /// `master_name`, and waits until every Sentinel knows the replica and the other
    /// Sentinels (about 2 s: they introduce themselves every 2 s).
    ///
    /// # Panics
    ///
    /// If `sentinels` is 0, a server does not start, or the group is not ready within
    /// 20 s.
    pub fn start(master_name: &str, sentinels: usize) -> RedisSentinels {
        assert!(sentinels > 0, "at least one Sentinel");
        let master = RedisServer::start_with_args(&["--repl-diskless-sync-delay", "0"]);
        let replica =
            RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let deadline = Instant::now() + SENTINEL_TIMEOUT;
        wait_for(deadline, "the replica to sync", || {
            replica
                .query(&["INFO", "replication"])
                .is_ok_and(|info| info.contains("master_link_status:up"))
        });
        let conf = SentinelConf {
            master_name: master_name.to_owned(),
            master_port: master.port,
            quorum: sentinels / 2 + 1,
            tls: None,
            user: None,
        };
        let sentinels: Vec<RedisServer> = (0..sentinels)
            .map(|_| {
                RedisServer::launch(Options {
                    sentinel: Some(conf.clone()),
                    ..Options::default()
                })
            })
            .collect();
        let known = format!("slaves=1,sentinels={}", sentinels.len());
        for sentinel in &sentinels {
            wait_for(
                deadline,
                "the Sentinels to know the replica and each other",
                || {
                    sentinel
                        .query(&["INFO", "sentinel"])
                        .is_ok_and(|info| info.contains(&known))
                },
            );
        }
        RedisSentinels {
            sentinels,
            master,
            replica: Some(replica),
            master_name: master_name.to_owned(),
        }
    }

    /// Starts a TLS-only master with the ACL user `user` (as
    /// [`RedisServer::start_tls`]), without a replica, and one Sentinel (itself in
    /// plain TCP) that reaches the master over TLS as that user; waits until the
    /// Sentinel has heard the master report its role.
    ///
    /// # Panics
    ///
    /// If a server does not start, or the Sentinel does not reach the master within
    /// 20 s.
    pub fn start_tls(master_name: &str, tls: &TlsFiles, user: (&str, &str)) -> RedisSentinels {
        let master = RedisServer::start_tls(tls, Some(user));
        let sentinel = RedisServer::launch(Options {
            sentinel: Some(SentinelConf {
                master_name: master_name.to_owned(),
                master_port: master.port,
                quorum: 1,
                tls: Some(tls.clone()),
                user: Some((user.0.to_owned(), user.1.to_owned())),
            }),
            ..Options::default()
        });
        let deadline = Instant::now() + SENTINEL_TIMEOUT;
        wait_for(deadline, "the Sentinel to reach the master", || {
            sentinel
                .query(&["SENTINEL", "MASTER", master_name])
                .is_ok_and(|reply| reply.contains("role-reported master"))
        });
        RedisSentinels {
            sentinels: vec![sentinel],
            master,
            replica: None,
            master_name: master_name.to_owned(),
        }
    }

    /// The URL of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The name the Sentinels know the master by.
    pub fn master_name(&self) -> &str {
        &self.master_name
    }

    /// The first master.
    pub fn master_mut(&mut self) -> &mut RedisServer {
        &mut self.master
    }

    /// Its replica (the master after a failover).
    ///
    /// # Panics
    ///
    /// For a group started without one ([`start_tls`](Self::start_tls)).
    pub fn replica(&self) -> &RedisServer {
        self.replica.as_ref().expect("a group with a replica")
    }

    /// The Sentinels, e.g. to [`kill`](RedisServer::kill) one.
    pub fn sentinels_mut(&mut self) -> &mut [RedisServer] {
        &mut self.sentinels
    }

    /// Asks the first running Sentinel for a failover now (`SENTINEL FAILOVER`), as an
    /// operator would: no agreement needed, and the old master stays up.
    ///
    /// # Panics
    ///
    /// If no Sentinel accepts it.
    pub fn failover(&mut self) {
        let name = self.master_name.clone();
        let accepted = self
            .sentinels
            .iter_mut()
            .any(|s| s.is_running() && s.query(&["SENTINEL", "FAILOVER", &name]).is_ok());
        assert!(accepted, "no Sentinel accepted SENTINEL FAILOVER {name}");
    }

    /// The port of the master the first running Sentinel names.
    pub fn master_port(&mut self) -> Option<u16> {
        let name = self.master_name.clone();
        self.sentinels
            .iter_mut()
            .find_map(|s| {
                s.is_running()
                    .then(|| {
                        s.query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &name])
                            .ok()
                    })
                    .flatten()
            })
            .and_then(|reply| reply.split(' ').nth(1)?.parse().ok())
    }

    /// Waits until every running Sentinel names the master on `port`, and that server
    /// says it is a master.
    ///
    /// # Panics
    ///
    /// If that is not so within `within`.
    pub fn wait_for_master(&mut self, port: u16, within: Duration) {
        let deadline = Instant::now() + within;
        let name = self.master_name.clone();
        let address = format!("127.0.0.1 {port}");
        for sentinel in &mut self.sentinels {
            if !sentinel.is_running() {
                continue;
            }
            wait_for(deadline, "the Sentinels to name the new master", || {
                sentinel
                    .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &name])
                    .is_ok_and(|reply| reply == address)
            });
        }
        let server = [Some(&self.master), self.replica.as_ref()]
            .into_iter()
            .flatten()
            .find(|s| s.port == port)
            .expect("the master or the replica");
        wait_for(deadline, "the new master to take writes", || {
            server
                .query(&["ROLE"])
                .is_ok_and(|role| role.starts_with("master"))
        });
    }
}

/// Polls `ready` until it holds.
///
/// # Panics
///
/// If it does not by `deadline`, naming `what`.
fn wait_for(deadline: Instant, what: &str, mut ready: impl FnMut() -> bool) {
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(POLL_INTERVAL * 10);
    }
}

/// A free loopback port, found by binding port 0 and releasing it. For a cluster node,
/// also `port + 10000`, the default cluster bus port (older servers cannot set it).
fn free_port(cluster: bool) -> u16 {
    let bind = |port: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, port));
    for _ in 0..1000 {
        let probe = bind(0).expect("cannot bind a loopback port");
        let port = probe.local_addr().expect("a bound port").port();
        if !cluster {
            return port;
        }
        if let Some(bus) = port.checked_add(10_000) {
            if bind(bus).is_ok() {
                return port;
            }
        }
    }
    panic!("no free loopback port pair (port, port + 10000) for a cluster node");
}

/// A command as a RESP array of bulk strings.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

/// Reads one simple, error, integer or bulk reply.
fn read_reply(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(line.len().min(1));
    match kind {
        "+" | ":" => Ok(rest.to_owned()),
        "-" => Err(io::Error::other(rest.to_owned())),
        "$" => {
            let Ok(len) = usize::try_from(rest.parse::<i64>().map_err(io::Error::other)?) else {
                return Ok(String::new()); // nil
            };
            let mut body = vec![0; len + 2];
            reader.read_exact(&mut body)?;
            body.truncate(len);
            String::from_utf8(body).map_err(io::Error::other)
        }
        "*" => {
            // An array, its items joined by spaces (nil as "").
            let Ok(len) = usize::try_from(rest.parse::<i64>().map_err(io::Error::other)?) else {
                return Ok(String::new());
            };
            let items = (0..len)
                .map(|_| read_reply(reader))
                .collect::<io::Result<Vec<_>>>()?;
            Ok(items.join(" "))
        }
        _ => Err(io::Error::other(format!("unexpected reply {line:?}"))),
    }
}

/// Escapes everything but unreserved URL characters.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
