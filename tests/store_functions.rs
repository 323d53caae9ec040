//! `RedisStore` on Redis Functions: it calls its library by `FCALL` where the server has
//! Functions, decides exactly as by `EVALSHA` (the same replies and the same stored
//! state for every kind, alone and with a second rule, one request per call or
//! coalesced), reloads the library after `FUNCTION FLUSH` (on every primary of a
//! cluster), and falls back to `EVALSHA` where the server has no Functions or an ACL
//! refuses them. Every server here is started with explicit arguments, whatever
//! `TOLLGATE_TEST_REDIS_FUNCTIONS` says.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::redis::{RedisCluster, RedisServer, require_redis};
use common::store::{EPOCH_MICROS, Step, connect, next_permit, steps};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use tollgate::Quota;
use tollgate::algorithm::{
    Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod, SlidingCounter, SlidingLog,
    SmoothBursty, SmoothWarmingUp,
};
use tollgate::store::{
    Check, Op, RedisStore, Reply, Request, Rule, RuleKind, SharedLimiter, Store, StoreError,
};

type Plain = RedisStore<MultiplexedConnection>;

const SECOND: Duration = Duration::from_secs(1);

fn at(micros: u64) -> Duration {
    Duration::from_micros(EPOCH_MICROS + micros)
}

fn gcra(period: Duration, burst: u64) -> Rule {
    let quota = Quota::with_period(period).unwrap();
    Rule::from(Gcra::new(quota.burst(burst).unwrap()))
}

/// One rule of every kind.
fn every_kind() -> Vec<Rule> {
    let ten = Quota::per_second(10).unwrap();
    let rules = vec![
        gcra(Duration::from_millis(100), 5),
        Rule::from(LeakyBucket::new(10, ten).unwrap()),
        Rule::from(SlidingLog::new(10, SECOND).unwrap()),
        Rule::from(FixedWindow::new(10, SECOND).unwrap()),
        Rule::from(FixedWindow::from_first_hit(10, SECOND).unwrap()),
        Rule::from(SlidingCounter::new(10, SECOND).unwrap()),
        Rule::from(RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap()),
        Rule::from(SmoothBursty::new(10.0).unwrap()),
        Rule::from(SmoothWarmingUp::new(10.0, SECOND).unwrap()),
        Rule::from(Leased::new(Concurrency::new(3).unwrap(), SECOND).unwrap()),
    ];
    let mut kinds: Vec<RuleKind> = rules.iter().map(Rule::kind).collect();
    kinds.sort_by_key(|k| k.name());
    kinds.dedup();
    assert_eq!(kinds.len(), RuleKind::ALL.len(), "a rule of every kind");
    rules
}

/// Calls and failed calls of `command` so far (`INFO commandstats`).
async fn calls(connection: &mut MultiplexedConnection, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:");
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or("");
    let field = |name: &str| -> u64 {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map_or(0, |v| v.parse().unwrap())
    };
    (field("calls"), field("failed_calls"))
}

/// The names of the libraries the server holds.
async fn libraries(connection: &mut impl redis::aio::ConnectionLike) -> Vec<String> {
    let list: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(connection)
        .await
        .unwrap();
    let mut names = Vec::new();
    for library in list {
        // RESP2: a flat list of field names and values per library.
        let fields: Vec<redis::Value> = redis::from_redis_value(library).unwrap();
        for pair in fields.chunks(2) {
            let field: String = redis::from_redis_value_ref(&pair[0]).unwrap();
            if field == "library_name" {
                names.push(redis::from_redis_value_ref(&pair[1]).unwrap());
            }
        }
    }
    names.sort();
    names
}

fn has_library(names: &[String]) -> bool {
    names.iter().any(|n| n == Plain::function_name())
}

/// `n` GCRA acquires of one permit at one instant on `tag`, one at a time; each
/// admission's remaining, `None` for a denial.
async fn acquire<C>(store: &RedisStore<C>, tag: &str, rule: &Rule, n: usize) -> Vec<Option<u64>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let checks = [Check::new("", rule)];
    let mut out = Vec::new();
    for _ in 0..n {
        let request = Request::new(tag, &checks, Op::Acquire(1)).at(at(0));
        out.push(match store.execute(&request).await.unwrap() {
            Reply::Decision(Ok(admitted)) => Some(admitted.remaining()),
            Reply::Decision(Err(_)) => None,
            other => panic!("{other:?}"),
        });
    }
    out
}

#[tokio::test]
async fn a_store_decides_by_fcall_where_the_server_has_functions() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    let store = RedisStore::connect(&server.url(), "f").await.unwrap();
    // `connect` loads the library before the first request.
    assert!(has_library(&libraries(&mut control).await));
    let rule = gcra(Duration::from_secs(60), 2);
    assert_eq!(
        acquire(&store, "u", &rule, 3).await,
        [Some(1), Some(0), None]
    );
    assert_eq!(calls(&mut control, "fcall").await, (3, 0));
    assert_eq!(calls(&mut control, "evalsha").await, (0, 0));
    // Another store connecting finds it there, named after its code, and does not
    // compile it again (`FUNCTION LOAD` refuses an existing name at once).
    assert_eq!(calls(&mut control, "function|load").await, (1, 0));
    let again = RedisStore::connect(&server.url(), "f").await.unwrap();
    assert_eq!(calls(&mut control, "function|load").await, (2, 1));
    assert_eq!(acquire(&again, "u", &rule, 1).await, [None]);
    assert_eq!(calls(&mut control, "fcall").await, (4, 0));

    // A store made by `new` loads it at its first call, when the server lacks it.
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut control)
        .await
        .unwrap();
    let fresh = RedisStore::new(connect(&server.url()).await, "n").unwrap();
    assert_eq!(acquire(&fresh, "u", &rule, 1).await, [Some(1)]);
    assert!(has_library(&libraries(&mut control).await));
    assert_eq!(calls(&mut control, "evalsha").await, (0, 0));
}

#[tokio::test]
async fn without_functions_a_store_decides_by_evalsha_and_the_store_it_came_from_does_not() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    let store = RedisStore::connect(&server.url(), "e").await.unwrap();
    let scripts = store.clone().without_functions();
    let rule = gcra(Duration::from_secs(60), 2);
    assert_eq!(
        acquire(&scripts, "u", &rule, 3).await,
        [Some(1), Some(0), None]
    );
    // The script of GCRA is loaded at its first call (`NOSCRIPT`, then the call again).
    assert_eq!(calls(&mut control, "evalsha").await, (4, 1));
    assert_eq!(calls(&mut control, "fcall").await, (0, 0));
    // Clones of it too; the original still calls the library, on the same state.
    assert_eq!(acquire(&scripts.clone(), "u", &rule, 1).await, [None]);
    assert_eq!(acquire(&store, "v", &rule, 1).await, [Some(1)]);
    assert_eq!(calls(&mut control, "evalsha").await, (5, 1));
    assert_eq!(calls(&mut control, "fcall").await, (1, 0));
}

/// The rule sets of the differential test: every kind alone, and with a GCRA rule
/// (the driver's path for several checks, all-or-nothing).
fn rule_sets() -> Vec<Vec<Rule>> {
    let second = gcra(Duration::from_millis(250), 3);
    every_kind()
        .into_iter()
        .flat_map(|rule| [vec![rule.clone()], vec![rule, second.clone()]])
        .collect()
}

/// Runs `steps` on both stores from `EPOCH_MICROS + start`, each request checking every
/// rule of `rules` (rule i on key `r{i}`, the last with its own count when `own`), and
/// compares the replies and what each left in Redis.
fn same_on_both(
    runtime: &tokio::runtime::Runtime,
    (functions, scripts): (&Plain, &Plain),
    rules: &[Rule],
    (start, own): (u64, Option<u64>),
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let keys: Vec<String> = (0..rules.len()).map(|i| format!("r{i}")).collect();
    let mut checks: Vec<Check<'_>> = rules
        .iter()
        .zip(&keys)
        .map(|(rule, key)| Check::new(key, rule))
        .collect();
    if let (Some(own), Some(last)) = (own, checks.last_mut()) {
        *last = last.with_permits(own);
    }
    let mut connection = functions.connection().clone();
    let mut now = EPOCH_MICROS + start;
    for (i, step) in steps.iter().enumerate() {
        now += step.dt_micros;
        let tag = format!("t{}", step.tag);
        let request = Request::new(&tag, &checks, step.op()).at(Duration::from_micros(now));
        let by_fcall = runtime.block_on(functions.execute(&request));
        let by_evalsha = runtime.block_on(scripts.execute(&request));
        let what = || format!("step {i} ({step:?}) of {steps:?} on {rules:?}");
        match (&by_fcall, &by_evalsha) {
            (Ok(f), Ok(e)) => {
                prop_assert_eq!(f, e, "{}", what());
                prop_assert_eq!(next_permit(f), next_permit(e), "{}", what());
            }
            (Err(f), Err(e)) => prop_assert_eq!(f.to_string(), e.to_string(), "{}", what()),
            _ => prop_assert!(false, "{}: {:?} and {:?}", what(), by_fcall, by_evalsha),
        }
        for key in &keys {
            let by_fcall = functions.redis_key(&tag, key);
            let by_evalsha = scripts.redis_key(&tag, key);
            let stored: (Option<String>, Option<String>) = runtime
                .block_on(async {
                    let f: Option<String> = connection.get(&by_fcall).await?;
                    let e: Option<String> = connection.get(&by_evalsha).await?;
                    redis::RedisResult::Ok((f, e))
                })
                .unwrap();
            prop_assert_eq!(&stored.0, &stored.1, "{} state after {}", key, what());
            if stored.0.is_some() {
                let ttl: i64 = runtime.block_on(connection.pttl(&by_fcall)).unwrap();
                prop_assert!(ttl > 0, "{} has no TTL after {}", by_fcall, what());
            }
        }
    }
    Ok(())
}

#[test]
fn fcall_and_evalsha_decide_alike_for_every_kind() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connection = runtime.block_on(connect(&server.url()));
    let mut control = connection.clone();
    for (set, rules) in rule_sets().iter().enumerate() {
        let mut runner = TestRunner::new(ProptestConfig {
            cases: 12,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let case = std::cell::Cell::new(0);
        let strategy = (
            0u64..1_000_000_000,
            prop::option::of(0u64..4),
            steps(1_500_000, 5, 1..24),
        );
        let result = runner.run(&strategy, |(start, own, steps)| {
            case.set(case.get() + 1);
            let case = case.get();
            let functions = Plain::new(connection.clone(), &format!("f{set}x{case}")).unwrap();
            let scripts = Plain::new(connection.clone(), &format!("e{set}x{case}"))
                .unwrap()
                .without_functions();
            let own = own.filter(|_| rules.len() > 1);
            same_on_both(
                &runtime,
                (&functions, &scripts),
                rules,
                (start, own),
                &steps,
            )
        });
        if let Err(failure) = result {
            panic!("{failure}");
        }
    }
    // Both paths were taken; an FCALL failed once, the first, which loaded the library.
    let (fcalls, failed) = runtime.block_on(calls(&mut control, "fcall"));
    assert!(fcalls > 0 && failed == 1, "{fcalls} FCALL, {failed} failed");
    let (evalshas, _) = runtime.block_on(calls(&mut control, "evalsha"));
    assert!(evalshas > 0);
}

#[tokio::test]
async fn a_conflict_is_the_same_error_by_fcall_as_by_evalsha() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    let functions = Plain::new(connect(&server.url()).await, "c").unwrap();
    let scripts = functions.clone().without_functions();
    let rule = gcra(SECOND, 5);
    let sliding = Rule::from(SlidingLog::new(10, SECOND).unwrap());
    for (name, store) in [("fcall", &functions), ("evalsha", &scripts)] {
        // A key of another kind's, and a key tollgate never wrote.
        let foreign = store.redis_key(name, "");
        let () = control.set(&foreign, "sliding_log:1").await.unwrap();
        let checks = [Check::new("", &rule)];
        let error = store
            .execute(&Request::new(name, &checks, Op::Acquire(1)))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::KeyConflict { key } if *key == foreign),
            "{name}: {error:?}"
        );
        let two = [Check::new("a", &sliding), Check::new("", &rule)];
        let error = store
            .execute(&Request::new(name, &two, Op::Acquire(1)))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::KeyConflict { key } if *key == foreign),
            "{name}: {error:?}"
        );
        // Nothing written for the check that passed.
        let written: bool = control.exists(store.redis_key(name, "a")).await.unwrap();
        assert!(!written, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_function_flush_the_library_is_loaded_again_and_the_state_kept() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    let store = RedisStore::connect(&server.url(), "flush").await.unwrap();
    let rule = gcra(Duration::from_secs(60), 20);
    assert_eq!(acquire(&store, "u", &rule, 1).await, [Some(19)]);
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut control)
        .await
        .unwrap();
    assert!(!has_library(&libraries(&mut control).await));
    // Concurrent requests each find the function missing, load it and call again.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, rule) = (store.clone(), rule.clone());
            tokio::spawn(async move { acquire(&store, "u", &rule, 1).await })
        })
        .collect();
    let mut remaining = Vec::new();
    for task in tasks {
        remaining.extend(task.await.unwrap());
    }
    remaining.sort_unstable();
    let expected: Vec<Option<u64>> = (11..19).map(Some).collect();
    assert_eq!(remaining, expected);
    assert!(has_library(&libraries(&mut control).await));
    assert_eq!(calls(&mut control, "evalsha").await, (0, 0));
    assert_eq!(acquire(&store, "u", &rule, 1).await, [Some(10)]);
}

#[tokio::test]
async fn a_server_without_functions_gets_evalsha() {
    let Some(()) = require_redis() else { return };
    // As Redis 6: neither FUNCTION nor FCALL.
    let server = RedisServer::start_with_args(&[
        "--rename-command",
        "FUNCTION",
        "",
        "--rename-command",
        "FCALL",
        "",
    ]);
    let mut control = connect(&server.url()).await;
    let rule = gcra(Duration::from_secs(60), 2);
    let connected = RedisStore::connect(&server.url(), "c").await.unwrap();
    assert_eq!(
        acquire(&connected, "u", &rule, 3).await,
        [Some(1), Some(0), None]
    );
    // A store learns it at its first call: one unknown FCALL, then EVALSHA for good,
    // for its clones too.
    let connection = connect(&server.url()).await;
    let unknown = unknown_commands(&mut control).await;
    let fresh = RedisStore::new(connection, "n").unwrap();
    assert_eq!(acquire(&fresh, "u", &rule, 2).await, [Some(1), Some(0)]);
    assert_eq!(acquire(&fresh.clone(), "u", &rule, 1).await, [None]);
    assert_eq!(acquire(&connected, "u", &rule, 1).await, [None]);
    assert_eq!(unknown_commands(&mut control).await, unknown + 1);
    let (evalsha, _) = calls(&mut control, "evalsha").await;
    assert!(evalsha >= 7, "{evalsha}");
}

/// Errors `ERR` so far (`INFO errorstats`): unknown commands, and unknown subcommands
/// (redis-rs's `CLIENT SETINFO` on connecting, before Redis 7.2).
async fn unknown_commands(connection: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(connection)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_ERR:count="))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn an_acl_user_who_may_not_load_functions_gets_evalsha_until_an_administrator_loads_them() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[
        "--user",
        "app",
        "on",
        ">app-pass",
        "~*",
        "&*",
        "+@all",
        "-function",
        "--user",
        "plain",
        "on",
        ">plain-pass",
        "~*",
        "&*",
        "+@all",
        "-function",
        "-fcall",
    ]);
    let url = |user: &str| format!("redis://{user}:{user}-pass@127.0.0.1:{}/", server.port());
    let mut control = connect(&server.url()).await;
    let rule = gcra(Duration::from_secs(60), 5);

    // May FCALL, may not FUNCTION LOAD: no library yet, so EVALSHA.
    let app = RedisStore::connect(&url("app"), "app").await.unwrap();
    assert_eq!(acquire(&app, "u", &rule, 1).await, [Some(4)]);
    assert!(libraries(&mut control).await.is_empty());
    let evalsha = calls(&mut control, "evalsha").await.0;
    assert!(evalsha > 0);
    assert_eq!(acquire(&app, "u", &rule, 1).await, [Some(3)]);
    assert_eq!(calls(&mut control, "evalsha").await.0, evalsha + 1);

    // Once an administrator loads the library, a new store of that user calls it.
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(Plain::library_source())
        .query_async(&mut control)
        .await
        .unwrap();
    let fcalls = calls(&mut control, "fcall").await.0;
    let loaded = RedisStore::connect(&url("app"), "app").await.unwrap();
    assert_eq!(acquire(&loaded, "u", &rule, 1).await, [Some(2)]);
    assert_eq!(calls(&mut control, "fcall").await.0, fcalls + 1);

    // May not FCALL either: EVALSHA, with the library there.
    let plain = RedisStore::connect(&url("plain"), "app").await.unwrap();
    let evalsha = calls(&mut control, "evalsha").await.0;
    assert_eq!(acquire(&plain, "u", &rule, 2).await, [Some(1), Some(0)]);
    assert_eq!(calls(&mut control, "evalsha").await.0, evalsha + 2);
}

#[tokio::test]
async fn libraries_of_other_versions_are_left_alone() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    // What another tollgate version would have loaded: a library and function of its
    // own name.
    let other = format!("tollgate_{}", "0".repeat(40));
    let source = format!(
        "#!lua name={other}\nredis.register_function('{other}', function(keys, args) return 7 end)\n"
    );
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&source)
        .query_async(&mut control)
        .await
        .unwrap();
    let store = RedisStore::connect(&server.url(), "v").await.unwrap();
    let again = RedisStore::connect(&server.url(), "v").await.unwrap();
    let rule = gcra(Duration::from_secs(60), 2);
    assert_eq!(acquire(&store, "u", &rule, 1).await, [Some(1)]);
    assert_eq!(acquire(&again, "u", &rule, 1).await, [Some(0)]);
    let mut expected = vec![other.clone(), Plain::function_name().to_owned()];
    expected.sort();
    assert_eq!(libraries(&mut control).await, expected);
    let seven: i64 = redis::cmd("FCALL")
        .arg(&other)
        .arg(0)
        .query_async(&mut control)
        .await
        .unwrap();
    assert_eq!(seven, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalescing_store_sends_its_batches_by_fcall() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    // 1 per 10 s, a burst of 50: at one instant, exactly 50 of 400 get in.
    let rule = gcra(Duration::from_secs(10), 50);
    let connection = connect(&server.url()).await;
    let functions = Plain::new(connection.clone(), "f").unwrap().coalescing(64);
    let scripts = Plain::new(connection, "e")
        .unwrap()
        .without_functions()
        .coalescing(64);
    for (command, store) in [("fcall", &functions), ("evalsha", &scripts)] {
        let before = calls(&mut control, command).await.0;
        let tasks: Vec<_> = (0..400)
            .map(|_| {
                let (store, rule) = (store.clone(), rule.clone());
                tokio::spawn(async move {
                    let checks = [Check::new("", &rule)];
                    let request = Request::new("one", &checks, Op::Acquire(1)).at(at(0));
                    store.execute(&request).await.unwrap().is_admitted()
                })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            admitted += u64::from(task.await.unwrap());
        }
        assert_eq!(admitted, 50, "{command}");
        let sent = calls(&mut control, command).await.0 - before;
        assert!(sent > 0 && sent < 400, "{command}: {sent} calls for 400");
    }
    // After FUNCTION FLUSH, the next batch loads the library.
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut control)
        .await
        .unwrap();
    let checks = [Check::new("", &rule)];
    let reply = functions
        .execute(&Request::new("two", &checks, Op::Acquire(1)).at(at(0)))
        .await
        .unwrap();
    assert!(reply.is_admitted());
    assert!(has_library(&libraries(&mut control).await));
}

#[tokio::test]
async fn on_a_cluster_the_library_is_on_every_primary_and_loaded_again_after_function_flush() {
    let Some(()) = require_redis() else { return };
    let cluster = RedisCluster::start_with_args(3, &[]);
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store: RedisStore<ClusterConnection> =
        RedisStore::connect_cluster(&seeds, "c").await.unwrap();
    let mut nodes = Vec::new();
    for url in &urls {
        nodes.push(connect(url).await);
    }
    for node in &mut nodes {
        assert!(has_library(&libraries(node).await));
    }
    let limiter = SharedLimiter::new(store.clone(), gcra(Duration::from_secs(60), 5)).unwrap();
    // Tags enough to land on every master.
    let tags: Vec<String> = (0..24).map(|i| format!("tag{i}")).collect();
    for tag in &tags {
        let admitted = limiter.check_at(tag, 1, at(0)).await.unwrap().unwrap();
        assert_eq!(admitted.remaining(), 4, "{tag}");
    }
    for node in &mut nodes {
        let () = redis::cmd("FUNCTION")
            .arg("FLUSH")
            .query_async(node)
            .await
            .unwrap();
    }
    for tag in &tags {
        let admitted = limiter.check_at(tag, 1, at(0)).await.unwrap().unwrap();
        assert_eq!(admitted.remaining(), 3, "{tag}");
    }
    for node in &mut nodes {
        assert!(has_library(&libraries(node).await));
        let (fcalls, _) = calls(node, "fcall").await;
        assert!(fcalls > 0, "a master decided nothing");
        assert_eq!(calls(node, "evalsha").await, (0, 0));
    }
}

// The library decides a one-key GCRA acquire of n = 1..9 inline, as the scripts do,
// and any other request the general way. Keys driven with n written "k" (inline) and
// "0k" (general) by FCALL, and "k" by EVALSHA of the GCRA script, must get the same
// replies and hold the same state, expiring alike.
#[tokio::test]
async fn the_librarys_inline_gcra_acquire_decides_as_its_general_code_and_the_script() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut connection = connect(&server.url()).await;
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(Plain::library_source())
        .query_async(&mut connection)
        .await
        .unwrap();
    let script = redis::Script::new(Plain::script_source_for(&[RuleKind::Gcra]));
    // 1 per 3 ms, burst 4 (tolerance 12 ms).
    let (interval, burst) = (3_000u64, 4u64);
    let mut now = EPOCH_MICROS;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |bound: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % bound
    };
    for step in 0..400 {
        // Mostly small steps, now and then one past the state's expiry (a stale key).
        now += match next(20) {
            0 => 30_000_000,
            1 => 0,
            _ => next(4_000),
        };
        // 0 and 5 (above the burst) go the general way on every key.
        let n = next(6);
        let mut replies = Vec::new();
        for (key, n_text, fcall) in [
            ("inline", n.to_string(), true),
            ("general", format!("0{n}"), true),
            ("script", n.to_string(), false),
        ] {
            let mut call = if fcall {
                let mut call = redis::cmd("FCALL");
                call.arg(Plain::function_name());
                call
            } else {
                let mut call = redis::cmd("EVALSHA");
                call.arg(script.get_hash());
                call
            };
            call.arg(1)
                .arg(key)
                .arg("acquire")
                .arg(&n_text)
                .arg(0)
                .arg(now);
            call.arg("gcra")
                .arg(3)
                .arg(interval)
                .arg(interval * burst)
                .arg(burst);
            if !fcall && step == 0 {
                let _: String = script.load_async(&mut connection).await.unwrap();
            }
            let reply: redis::Value = call.query_async(&mut connection).await.unwrap();
            let value: Option<String> = connection.get(key).await.unwrap();
            let expire_at: i64 = redis::cmd("PEXPIRETIME")
                .arg(key)
                .query_async(&mut connection)
                .await
                .unwrap();
            replies.push((reply, value, expire_at));
        }
        for other in &replies[1..] {
            assert_eq!(replies[0].0, other.0, "step {step}: n {n} at {now}");
            assert_eq!(replies[0].1, other.1, "step {step}: n {n} at {now}");
            // The TTLs come from the same decision; the server's clock moves a little
            // between the calls.
            assert_eq!(replies[0].2 < 0, other.2 < 0, "step {step}");
            assert!(
                (replies[0].2 - other.2).abs() < 100,
                "step {step}: expiries {} and {}",
                replies[0].2,
                other.2
            );
        }
    }
}

/// A GCRA value as the current version writes it: "-<TAT>"; one of the earlier
/// format, "gcra:<TAT>", as the same.
fn current_form(value: Option<String>) -> Option<String> {
    value.map(|v| match v.strip_prefix("gcra:") {
        Some(tat) => format!("-{tat}"),
        None => v,
    })
}

// GCRA stores its TAT negated ("-<TAT>", read by the inline acquire with one
// `tonumber`); earlier versions stored "gcra:<TAT>", which servers may still hold when
// a new version starts. A key holding the earlier format must decide exactly as one
// holding the same TAT in the current format, by every path (the inline acquire hands
// it to the general code), and be written in the current format at its next change.
#[tokio::test]
async fn a_gcra_state_in_the_earlier_format_decides_as_the_same_state_in_the_current_one() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    let functions = Plain::new(connect(&server.url()).await, "old").unwrap();
    let scripts = functions.clone().without_functions();
    // 1 per 3 ms, burst 4 (tolerance 12 ms).
    let rule = gcra(Duration::from_millis(3), 4);
    let checks = [Check::new("", &rule)];
    let mut seed = 0x0123_4567_89ab_cdefu64;
    let mut next = |bound: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % bound
    };
    let mut rewritten = 0;
    for (path, store) in [("fcall", &functions), ("evalsha", &scripts)] {
        // TATs in the past (a stale state), a little ahead and a burst ahead (denials).
        for (case, tat) in [0u64, 5_000, 11_000, 20_000].into_iter().enumerate() {
            let (old, new) = (format!("{path}{case}o"), format!("{path}{case}n"));
            let (old_key, new_key) = (store.redis_key(&old, ""), store.redis_key(&new, ""));
            let tat = EPOCH_MICROS + 1_000 + tat;
            for (key, value) in [
                (&old_key, format!("gcra:{tat}")),
                (&new_key, format!("-{tat}")),
            ] {
                let () = redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .arg("PX")
                    .arg(60_000)
                    .query_async(&mut control)
                    .await
                    .unwrap();
            }
            let mut now = EPOCH_MICROS;
            for step in 0..40 {
                now += match next(8) {
                    0 => 0,
                    1 => 30_000,
                    _ => next(3_000),
                };
                // Acquires of 1..=4 take the inline path; 0, 5 (never) and the other
                // ops the general one.
                let n = next(6);
                let op = match next(6) {
                    0 => Op::Peek(n),
                    1 => Op::Refund(n),
                    2 => Op::Reserve {
                        n,
                        max_wait: Duration::from_micros(next(8_000)),
                    },
                    _ => Op::Acquire(n),
                };
                let what = format!("{path}, case {case}, step {step}: {op:?} at {now}");
                let mut replies = Vec::new();
                for tag in [&old, &new] {
                    let request = Request::new(tag, &checks, op).at(Duration::from_micros(now));
                    replies.push(store.execute(&request).await.unwrap());
                }
                assert_eq!(replies[0], replies[1], "{what}");
                assert_eq!(next_permit(&replies[0]), next_permit(&replies[1]), "{what}");
                let old_value: Option<String> = control.get(&old_key).await.unwrap();
                let new_value: Option<String> = control.get(&new_key).await.unwrap();
                if old_value != new_value {
                    assert!(
                        old_value.as_deref().is_some_and(|v| v.starts_with("gcra:")),
                        "{what}: {old_value:?}"
                    );
                }
                assert_eq!(
                    current_form(old_value),
                    current_form(new_value.clone()),
                    "{what}"
                );
                if let Some(value) = &new_value {
                    assert!(value.starts_with('-'), "{what}: {value}");
                    let ttl: i64 = control.pttl(&new_key).await.unwrap();
                    assert!(ttl > 0, "{what}: no TTL");
                }
            }
            let value: Option<String> = control.get(&old_key).await.unwrap();
            rewritten += u32::from(value.is_none_or(|v| !v.starts_with("gcra:")));
        }
    }
    // The earlier format was written over (or expired) on most keys.
    assert!(rewritten >= 6, "{rewritten} of 8");
}

// A key holding another kind's state, or a value no GCRA rule writes, is a typed
// conflict for a GCRA rule by every path, and a GCRA rule's key for every other kind:
// GCRA's value is a bare negative number, which no other kind's value (all start with
// their kind's name) and no counter (a BatchedLimiter's INCRBY, never below 0) is.
#[tokio::test]
async fn gcras_bare_value_is_a_conflict_for_every_other_kind_and_theirs_for_gcra() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_args(&[]);
    let mut control = connect(&server.url()).await;
    let functions = Plain::new(connect(&server.url()).await, "k").unwrap();
    let scripts = functions.clone().without_functions();
    let gcra_rule = gcra(SECOND, 5);
    let others: Vec<Rule> = every_kind()
        .into_iter()
        .filter(|rule| rule.kind() != RuleKind::Gcra)
        .collect();
    let gcra_ops = [
        // The inline acquire's request, then the general code's.
        Op::Acquire(1),
        Op::Acquire(0),
        Op::Peek(1),
        Op::Refund(1),
        Op::Reserve {
            n: 1,
            max_wait: SECOND,
        },
    ];
    for (path, store) in [("fcall", &functions), ("evalsha", &scripts)] {
        let conflict = |error: StoreError, key: &str, what: &str| {
            assert!(
                matches!(&error, StoreError::KeyConflict { key: k } if k == key),
                "{path}, {what}: {error:?}"
            );
        };
        // Each other kind's state, as its rule writes it, for a GCRA rule.
        for (i, rule) in others.iter().enumerate() {
            let tag = format!("{path}-other{i}");
            let key = store.redis_key(&tag, "");
            let written = [Check::new("", rule)];
            let reply = store
                .execute(&Request::new(&tag, &written, Op::Acquire(1)).at(at(0)))
                .await
                .unwrap();
            assert!(reply.is_admitted(), "{path}, {}", rule.kind());
            let before: Option<String> = control.get(&key).await.unwrap();
            assert!(before.is_some(), "{path}: {} wrote nothing", rule.kind());
            let checks = [Check::new("", &gcra_rule)];
            for op in gcra_ops {
                let error = store
                    .execute(&Request::new(&tag, &checks, op).at(at(1)))
                    .await
                    .unwrap_err();
                conflict(error, &key, &format!("{} for GCRA, {op:?}", rule.kind()));
            }
            let after: Option<String> = control.get(&key).await.unwrap();
            assert_eq!(before, after, "{path}: {}'s key changed", rule.kind());
        }
        // Values no rule writes: a counter as INCRBY makes it, 0, a positive TAT, a
        // minus before text, the earlier prefix before text.
        for (i, value) in ["5", "0", "1700000000000000", "-abc", "gcra:abc", "-"]
            .into_iter()
            .enumerate()
        {
            let tag = format!("{path}-foreign{i}");
            let key = store.redis_key(&tag, "");
            let () = control.set(&key, value).await.unwrap();
            let checks = [Check::new("", &gcra_rule)];
            for op in gcra_ops {
                let error = store
                    .execute(&Request::new(&tag, &checks, op).at(at(1)))
                    .await
                    .unwrap_err();
                conflict(error, &key, &format!("{value:?} for GCRA, {op:?}"));
            }
            let after: String = control.get(&key).await.unwrap();
            assert_eq!(after, value, "{path}: the foreign value changed");
        }
        // A GCRA rule's state for every other kind.
        let tag = format!("{path}-gcra");
        let key = store.redis_key(&tag, "");
        let checks = [Check::new("", &gcra_rule)];
        let reply = store
            .execute(&Request::new(&tag, &checks, Op::Acquire(1)).at(at(0)))
            .await
            .unwrap();
        assert!(reply.is_admitted());
        let before: String = control.get(&key).await.unwrap();
        assert_eq!(before, format!("-{}", EPOCH_MICROS + 1_000_000), "{path}");
        for rule in &others {
            let checks = [Check::new("", rule)];
            for op in [Op::Acquire(1), Op::Peek(1)] {
                let error = store
                    .execute(&Request::new(&tag, &checks, op).at(at(1)))
                    .await
                    .unwrap_err();
                conflict(error, &key, &format!("GCRA's for {}, {op:?}", rule.kind()));
            }
        }
        let after: String = control.get(&key).await.unwrap();
        assert_eq!(before, after, "{path}: GCRA's key changed");
    }
}
