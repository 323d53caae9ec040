//! How a store calls its Lua: `FCALL` of the library where the server has Redis
//! Functions (Redis 7 and later), else `EVALSHA` of the script of the request's kinds.
//! Both take the same keys and arguments and decide alike.
//!
//! A store starts on `FCALL` and loads the library when the server says it lacks it
//! (`connect` loads it at once). It falls back to `EVALSHA` for good, it and its
//! clones, when its first `FCALL` meets a server with no `FCALL` (Redis 6, a renamed
//! command), or one that refuses it or lacks the library and refuses `FUNCTION LOAD`
//! (to this ACL user, or renamed away): the scripts decide as the library does, only
//! defining what they use on every call.

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, ServerErrorKind};

use super::script::{self, Kinds};
use crate::sync::{AtomicBool, Ordering};

/// Whether a store and its clones call the library.
pub(super) struct Functions(AtomicBool);

impl Functions {
    pub(super) fn new(on: bool) -> Functions {
        Functions(AtomicBool::new(on))
    }

    pub(super) fn on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn off(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    /// A command calling the Lua that decides requests of `kinds`, its arguments to
    /// follow: `FCALL` of the library, or `EVALSHA` of the script of `kinds`.
    pub(super) fn command(&self, kinds: Kinds, args: usize, bytes: usize) -> Cmd {
        let mut command = Cmd::with_capacity(2 + args, 64 + bytes);
        if self.on() {
            command.arg("FCALL").arg(&script::library().name);
        } else {
            command
                .arg("EVALSHA")
                .arg(script::for_kinds(kinds).get_hash());
        }
        command
    }

    /// Sends `command`, made by [`command`](Self::command) for `kinds`. An `FCALL`
    /// whose function the server lacks (after `FUNCTION FLUSH`, a restart, a new
    /// server) loads the library and is sent again, once. One the server cannot or
    /// will not run goes as `EVALSHA`, and so do this store's calls from then on. An
    /// `EVALSHA` whose script the server lacks (`NOSCRIPT`) loads it and is sent
    /// again, as `ScriptInvocation::invoke_async` does.
    pub(super) async fn invoke<T, C>(
        &self,
        kinds: Kinds,
        connection: &mut C,
        command: &Cmd,
    ) -> RedisResult<T>
    where
        T: FromRedisValue,
        C: ConnectionLike + Send,
    {
        let fcall = matches!(command.args_iter().next(), Some(Arg::Simple(b"FCALL")));
        if fcall {
            match command.query_async(connection).await {
                Err(e) if function_missing(&e) => {
                    if load_library(connection).await? {
                        return command.query_async(connection).await;
                    }
                    self.off();
                }
                Err(e) if refuses_functions(&e) => self.off(),
                reply => return reply,
            }
        }
        let script = script::for_kinds(kinds);
        let evalsha;
        let command = if fcall {
            evalsha = renamed(command, "EVALSHA", script.get_hash());
            &evalsha
        } else {
            command
        };
        match command.query_async(connection).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                script.load_async(connection).await?;
                command.query_async(connection).await
            }
            reply => reply,
        }
    }

    /// Loads the library unless calls go by `EVALSHA`. Whatever goes wrong is left
    /// for the first call to meet: where this user may not load the library, an
    /// administrator may have, and the first `FCALL` finds out.
    pub(super) async fn preload<C>(&self, connection: &mut C)
    where
        C: ConnectionLike + Send,
    {
        if self.on() {
            let _ = load_library(connection).await;
        }
    }
}

/// Loads the library (`FUNCTION LOAD`; on every primary of a cluster): true when the
/// server holds it, false when the server cannot load one (no `FUNCTION`, or not for
/// this user). Other errors, such as a lost connection, a replica's `READONLY` or
/// `OOM`, are the caller's.
///
/// Not `REPLACE`: a library of this name already there is this one (it is named after
/// its code), and loading it again would compile it again, which blocks the server
/// for about a millisecond (against 15 µs to be told it exists), on every connect and
/// for every request in flight after a `FUNCTION FLUSH`.
pub(super) async fn load_library<C>(connection: &mut C) -> RedisResult<bool>
where
    C: ConnectionLike + Send,
{
    let load = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&script::library().source)
        .query_async::<redis::Value>(connection)
        .await;
    match load {
        Ok(_) => Ok(true),
        Err(e) if already_loaded(&e) => Ok(true),
        Err(e) if refuses_functions(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `FUNCTION LOAD` found a library of this name.
fn already_loaded(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|d| d.starts_with("Library '") && d.ends_with("already exists"))
}

/// The server knows `FCALL` but not the library's function.
fn function_missing(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// The server has no such command (Redis before 7, or renamed away), or this user
/// may not run it: `NOPERM` naming the command, not a key.
fn refuses_functions(error: &RedisError) -> bool {
    let detail = error.detail().unwrap_or_default();
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::NoPerm) => {
            detail.contains("'fcall'") || detail.contains("'function")
        }
        _ => {
            error.code() == Some("ERR")
                && (detail.starts_with("unknown command")
                    || detail.starts_with("unknown subcommand"))
        }
    }
}

/// `command` with its first two arguments replaced by `name` and `target`.
fn renamed(command: &Cmd, name: &str, target: &str) -> Cmd {
    let mut out = redis::cmd(name);
    out.arg(target);
    for arg in command.args_iter().skip(2) {
        if let Arg::Simple(bytes) = arg {
            out.arg(bytes);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of the reply `-{text}`, as redis-rs reads it.
    fn server_error(text: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{text}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(error)) => RedisError::from(error),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_evalsha_is_the_fcall_renamed() {
        let functions = Functions::new(true);
        let kinds = script::ALL_KINDS;
        let mut fcall = functions.command(kinds, 3, 32);
        fcall.arg(1).arg("p:{u}").arg("acquire");
        let functions = Functions::new(false);
        let mut evalsha = functions.command(kinds, 3, 32);
        evalsha.arg(1).arg("p:{u}").arg("acquire");
        let hash = script::for_kinds(kinds).get_hash();
        assert_eq!(
            renamed(&fcall, "EVALSHA", hash).get_packed_command(),
            evalsha.get_packed_command()
        );
        assert!(
            String::from_utf8_lossy(&fcall.get_packed_command()).contains(&script::library().name)
        );
    }

    #[test]
    fn errors_that_mean_no_functions_here() {
        let refused = [
            "ERR unknown command 'FCALL', with args beginning with: 'tollgate_x' '1' ",
            "ERR unknown command `FUNCTION`, with args beginning with: `LOAD` ",
            "NOPERM this user has no permissions to run the 'fcall' command",
            "NOPERM this user has no permissions to run the 'function|load' command",
        ];
        for text in refused {
            assert!(refuses_functions(&server_error(text)), "{text}");
            assert!(!function_missing(&server_error(text)), "{text}");
        }
        let others = [
            "ERR Function not found",
            "NOPERM this user has no permissions to access one of the keys used as arguments",
            "OOM command not allowed when used memory > 'maxmemory'.",
            "READONLY You can't write against a read only replica.",
            "TOLLGATE_CONFLICT p:{u}",
        ];
        for text in others {
            assert!(!refuses_functions(&server_error(text)), "{text}");
        }
        assert!(function_missing(&server_error("ERR Function not found")));
        let exists = server_error("ERR Library 'tollgate_0a1b' already exists");
        assert!(already_loaded(&exists) && !refuses_functions(&exists));
        assert!(!already_loaded(&server_error("ERR Function not found")));
    }
}
