//! Listening to events in tests: a log of what a hub reports, and the kinds the tests
//! expect.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::observe::{DenyReason, Event, EventKind, Events, Listener};

/// An event with its strings copied, to keep after the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub source: String,
    pub key: Option<String>,
    pub permits: u64,
    pub kind: EventKind,
}

/// Records every event it hears.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Seen>>>);

impl Log {
    pub fn kinds(&self) -> Vec<EventKind> {
        self.0.lock().unwrap().iter().map(|s| s.kind).collect()
    }

    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
}

impl Listener for Log {
    fn on_event(&self, event: &Event<'_>) {
        self.0.lock().unwrap().push(Seen {
            source: event.source.to_owned(),
            key: event.key.map(str::to_owned),
            permits: event.permits,
            kind: event.kind,
        });
    }
}

/// A hub named `name` that `log` listens to.
pub fn hub(name: &str, log: &Log) -> Events {
    let events = Events::new(name);
    events.subscribe(log.clone()).detach();
    events
}

/// Denied, to be retried after `retry_after`.
pub fn limited(retry_after: Duration) -> EventKind {
    EventKind::Denied {
        reason: DenyReason::Limited,
        retry_after: Some(retry_after),
    }
}

/// Denied for `reason`, with no time to retry after.
pub fn denied(reason: DenyReason) -> EventKind {
    EventKind::Denied {
        reason,
        retry_after: None,
    }
}

/// Granted after waiting `ms` milliseconds.
pub fn waited(ms: u64) -> EventKind {
    EventKind::Waited {
        wait: Duration::from_millis(ms),
    }
}
