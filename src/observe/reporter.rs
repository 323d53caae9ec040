//! [`Reporter`]: where a limiter reports its decisions, if anywhere.

use super::event::EventKind;
use super::events::Events;
use crate::decision::{Decision, Denied, Reservation};
use crate::sync::unmodeled::OnceLock;

/// A limiter's hub: attached at most once and shared by its clones. Most limiters
/// never attach one, and asking an empty one is a single load.
#[derive(Debug, Default)]
pub(crate) struct Reporter(OnceLock<Events>);

impl Reporter {
    /// Attaches `events`, unless a hub is attached already.
    pub(crate) fn attach(&self, events: Events) {
        let _ = self.0.set(events);
    }

    #[inline]
    pub(crate) fn events(&self) -> Option<&Events> {
        self.0.get()
    }

    /// Reports a decision on `n` permits, if anyone listens.
    #[inline]
    pub(crate) fn decision(&self, n: u64, decision: &Decision) {
        if let Some(events) = self.listened() {
            emit(events, n, EventKind::of_decision(decision));
        }
    }

    /// Reports a reservation of `n` permits: `Waited` for one booked ahead.
    #[inline]
    pub(crate) fn reservation(&self, n: u64, reservation: &Result<Reservation, Denied>) {
        if let Some(events) = self.listened() {
            emit(events, n, EventKind::of_reservation(reservation));
        }
    }

    #[inline]
    fn listened(&self) -> Option<&Events> {
        self.0.get().filter(|events| events.is_observed())
    }
}

#[cold]
#[inline(never)]
fn emit(events: &Events, n: u64, kind: EventKind) {
    events.emit(n, kind);
}
