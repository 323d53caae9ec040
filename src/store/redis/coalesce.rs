//! Request coalescing: concurrent requests on clones of one store go to Redis as one
//! batch call (`FCALL` or `EVALSHA`), so that the server's cost per call is shared
//! among them.
//!
//! There is no background task. One batch is in flight at a time; the caller that
//! sends it (the leader) hands every reply out, then hands the lead, with the next
//! batch already taken from the queue, to the first caller of that batch. A caller
//! that arrives when nothing is in flight sends its request at once. A leader dropped
//! mid-flight fails the requests it carried (their outcome is unknown) and hands the
//! lead on all the same, and a queued caller that is dropped leaves the queue (or
//! hands on the lead it was just given), so no request waits for a batch that never
//! goes.

use std::collections::VecDeque;

use redis::aio::ConnectionLike;
use redis::{RedisError, Value};
use tokio::sync::oneshot;

use super::call::Functions;
use super::{StoreError, from_redis};
use crate::sync::Mutex;

/// The queue of one store and its clones.
pub(super) struct Coalescer {
    max_batch: usize,
    state: Mutex<State>,
}

struct State {
    queue: VecDeque<Queued>,
    /// A batch is in flight, or its lead is on its way to a caller. When not, the
    /// queue is empty.
    in_flight: bool,
    next_id: u64,
}

/// One request, as the script's batch mode reads it.
pub(super) struct Entry {
    /// The kinds of its rules: a batch runs the script of all its requests' kinds.
    pub(super) kinds: super::script::Kinds,
    /// Its explicit time, in µs: requests batch only with the same one.
    pub(super) at: Option<u64>,
    pub(super) keys: Vec<String>,
    /// Its single-mode `ARGV`.
    pub(super) args: Vec<String>,
}

struct Queued {
    id: u64,
    entry: Entry,
    /// `None` for the leader's own request.
    reply: Option<oneshot::Sender<Message>>,
}

enum Message {
    Done(Result<Vec<i64>, StoreError>),
    /// The next batch, this caller's request first: send it.
    Lead(Vec<Queued>),
}

impl Coalescer {
    pub(super) fn new(max_batch: usize) -> Coalescer {
        Coalescer {
            max_batch: max_batch.max(1),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                in_flight: false,
                next_id: 0,
            }),
        }
    }

    pub(super) fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// The script's integers for `entry`, decided in a batch with whatever else is
    /// queued.
    pub(super) async fn execute<C>(
        &self,
        connection: &C,
        functions: &Functions,
        entry: Entry,
    ) -> Result<Vec<i64>, StoreError>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let (sender, receiver) = oneshot::channel();
        let (id, lead) = {
            let mut state = self.state.lock();
            let id = state.next_id;
            state.next_id += 1;
            state.queue.push_back(Queued {
                id,
                entry,
                reply: Some(sender),
            });
            let lead = if state.in_flight {
                None
            } else {
                state.in_flight = true;
                let mut batch = self.take_batch(&mut state);
                batch[0].reply = None;
                Some(batch)
            };
            (id, lead)
        };
        let batch = match lead {
            Some(batch) => batch,
            None => {
                let mut waiting = Waiting {
                    coalescer: self,
                    id,
                    receiver: Some(receiver),
                };
                let message = waiting.receiver.as_mut().expect("armed").await;
                waiting.receiver = None;
                match message {
                    Ok(Message::Done(reply)) => return reply,
                    Ok(Message::Lead(batch)) => batch,
                    Err(_) => return Err(cancelled()),
                }
            }
        };
        let mut leading = Leading {
            coalescer: self,
            batch,
        };
        let replies = send(connection, functions, &leading.batch).await;
        leading.finish(replies)
    }

    /// Up to `max_batch` requests from the front of the queue, all with the time of
    /// the first.
    fn take_batch(&self, state: &mut State) -> Vec<Queued> {
        let at = state.queue.front().map(|q| q.entry.at);
        let mut batch = Vec::new();
        while batch.len() < self.max_batch {
            match state.queue.front() {
                Some(q) if Some(q.entry.at) == at => batch.extend(state.queue.pop_front()),
                _ => break,
            }
        }
        batch
    }

    /// Hands the lead to the first queued caller still waiting, with its batch, or
    /// ends the flight.
    fn pass_on(&self, state: &mut State) {
        loop {
            let mut batch = self.take_batch(state);
            let Some(first) = batch.first_mut() else {
                state.in_flight = false;
                return;
            };
            let Some(reply) = first.reply.take() else {
                // Only a leader's own request has no sender, and it is never queued.
                batch.remove(0);
                requeue(state, batch);
                continue;
            };
            match reply.send(Message::Lead(batch)) {
                Ok(()) => return,
                // That caller is gone: its request goes too.
                Err(Message::Lead(mut batch)) => {
                    batch.remove(0);
                    requeue(state, batch);
                }
                Err(Message::Done(_)) => return,
            }
        }
    }
}

fn requeue(state: &mut State, batch: Vec<Queued>) {
    for queued in batch.into_iter().rev() {
        state.queue.push_front(queued);
    }
}

/// The error of requests whose batch's sender was dropped while it was in flight.
fn cancelled() -> StoreError {
    StoreError::Connection(
        "the call carrying this request was cancelled: it may or may not have been decided".into(),
    )
}

/// Why a whole batch failed: each of its callers gets its own copy.
enum BatchError {
    Redis(RedisError),
    Protocol(String),
}

impl BatchError {
    fn to_store_error(&self) -> StoreError {
        match self {
            BatchError::Redis(e) => from_redis(e.clone()),
            BatchError::Protocol(what) => StoreError::Protocol(format!("batch reply: {what}")),
        }
    }
}

type Replies = Result<Vec<Result<Vec<i64>, StoreError>>, BatchError>;

/// One batch call: each request's integers, or its own error.
async fn send<C>(connection: &C, functions: &Functions, batch: &[Queued]) -> Replies
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let keys: usize = batch.iter().map(|q| q.entry.keys.len()).sum();
    let args: usize = batch.iter().map(|q| 1 + q.entry.args.len()).sum();
    let kinds = batch.iter().fold(0, |set, q| set | q.entry.kinds);
    let mut command = functions.command(kinds, 3 + keys + args, 64 + 96 * (keys + args));
    command.arg(keys);
    for q in batch {
        for key in &q.entry.keys {
            command.arg(key);
        }
    }
    command.arg("batch").arg(batch.len());
    for q in batch {
        command.arg(q.entry.keys.len());
        for arg in &q.entry.args {
            command.arg(arg);
        }
    }
    let mut connection = connection.clone();
    let reply: Value = functions
        .invoke(kinds, &mut connection, &command)
        .await
        .map_err(BatchError::Redis)?;
    let protocol = |what: &str| StoreError::Protocol(format!("batch reply: {what}"));
    let Value::Array(items) = reply else {
        return Err(BatchError::Protocol("not a list".into()));
    };
    if items.len() != batch.len() {
        return Err(BatchError::Protocol(format!(
            "{} replies for {} requests",
            items.len(),
            batch.len()
        )));
    }
    Ok(items
        .into_iter()
        .map(|item| match item {
            Value::Array(values) => values
                .into_iter()
                .map(|v| match v {
                    Value::Int(i) => Ok(i),
                    other => Err(protocol(&format!("{other:?} in a verdict"))),
                })
                .collect(),
            Value::BulkString(bytes) => Err(request_error(&String::from_utf8_lossy(&bytes))),
            Value::SimpleString(text) => Err(request_error(&text)),
            other => Err(protocol(&format!("{other:?} for a request"))),
        })
        .collect())
}

/// A request's error in a batch, as single mode's error reply would map.
fn request_error(message: &str) -> StoreError {
    match message.strip_prefix("TOLLGATE_CONFLICT ") {
        Some(key) => StoreError::KeyConflict {
            key: key.to_owned(),
        },
        None => StoreError::Server(message.to_owned().into()),
    }
}

/// A caller waiting in the queue; dropped while armed, it leaves the queue, or hands
/// on the lead it was given.
struct Waiting<'a> {
    coalescer: &'a Coalescer,
    id: u64,
    receiver: Option<oneshot::Receiver<Message>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(mut receiver) = self.receiver.take() else {
            return;
        };
        // Under the lock: the lead is handed over under it too.
        let mut state = self.coalescer.state.lock();
        if let Some(at) = state.queue.iter().position(|q| q.id == self.id) {
            state.queue.remove(at);
            return;
        }
        receiver.close();
        if let Ok(Message::Lead(mut batch)) = receiver.try_recv() {
            batch.remove(0);
            requeue(&mut state, batch);
            self.coalescer.pass_on(&mut state);
        }
    }
}

/// The caller sending a batch: its own request first, then the others'.
struct Leading<'a> {
    coalescer: &'a Coalescer,
    batch: Vec<Queued>,
}

impl Leading<'_> {
    /// Hands every reply out and the lead on; the leader's own reply.
    fn finish(&mut self, replies: Replies) -> Result<Vec<i64>, StoreError> {
        let batch = std::mem::take(&mut self.batch);
        let own = match replies {
            Ok(replies) => {
                let mut own = None;
                for (queued, reply) in batch.into_iter().zip(replies) {
                    match queued.reply {
                        Some(sender) => {
                            let _ = sender.send(Message::Done(reply));
                        }
                        None => own = Some(reply),
                    }
                }
                own.unwrap_or_else(|| Err(StoreError::Protocol("no reply of its own".into())))
            }
            Err(error) => {
                for queued in batch {
                    if let Some(sender) = queued.reply {
                        let _ = sender.send(Message::Done(Err(error.to_store_error())));
                    }
                }
                Err(error.to_store_error())
            }
        };
        self.coalescer.pass_on(&mut self.coalescer.state.lock());
        own
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        for queued in std::mem::take(&mut self.batch) {
            if let Some(sender) = queued.reply {
                let _ = sender.send(Message::Done(Err(cancelled())));
            }
        }
        self.coalescer.pass_on(&mut self.coalescer.state.lock());
    }
}
