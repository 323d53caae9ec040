//! [`MetricsRecorder`]: events counted through the `metrics` facade (feature `metrics`).

use std::fmt;

use metrics::{Counter, Gauge, Histogram, Label, Unit};

use super::event::SHED_REASONS;
use super::event::{DenyReason, Event, EventKind, Outcome};
use super::events::{Events, Listener, Subscription};

/// Requests granted, at once or after a wait.
pub const ADMITTED_TOTAL: &str = "tollgate_admitted_total";
/// Requests refused, labelled with the [`DenyReason`].
pub const DENIED_TOTAL: &str = "tollgate_denied_total";
/// Requests granted after queueing (a subset of the admitted).
pub const WAITED_TOTAL: &str = "tollgate_waited_total";
/// The time each waited request waited, in seconds.
pub const WAIT_SECONDS: &str = "tollgate_wait_seconds";
/// Drains ([`EventKind::Drained`]).
pub const DRAINED_TOTAL: &str = "tollgate_drained_total";
/// An adaptive limit, as it last changed ([`EventKind::LimitChanged`]).
pub const ADAPTIVE_LIMIT: &str = "tollgate_adaptive_limit";
/// Requests in flight under an adaptive limit, as the last request to start or end
/// left them ([`EventKind::Started`], [`EventKind::Finished`]).
pub const INFLIGHT: &str = "tollgate_inflight";
/// Requests admitted by an adaptive limiter that ended, labelled with the
/// [`Outcome`] ([`EventKind::Finished`]).
pub const FINISHED_TOTAL: &str = "tollgate_finished_total";
/// How long each request that ended with a sample (success or drop) held its
/// permit, in seconds.
pub const RTT_SECONDS: &str = "tollgate_rtt_seconds";
/// Requests a load shedder in shadow mode admitted but would have shed
/// ([`EventKind::WouldShed`]; also counted as admitted).
pub const WOULD_SHED_TOTAL: &str = "tollgate_would_shed_total";
/// An outbound rate learned from a partner, in calls a second, as it last changed
/// ([`EventKind::RateChanged`]); 0 while calls are not limited.
pub const OUTBOUND_RATE: &str = "tollgate_outbound_rate";
/// Refusals by a load shedder, labelled `reason` with the
/// `ShedReason` (the event's [`detail`](Event::detail)):
/// `tollgate_denied_total{reason="shed"}` split by why.
pub const SHED_TOTAL: &str = "tollgate_shed_total";
/// Requests a load shedder in shadow mode would have shed, labelled `reason` with
/// the `ShedReason`: `tollgate_would_shed_total` split by
/// why.
pub const WOULD_SHED_BY_REASON_TOTAL: &str = "tollgate_would_shed_by_reason_total";

/// A [`Listener`] that counts events through the [`metrics`] facade, labelled
/// `limiter = <name>`:
///
/// | metric | kind | counts |
/// |---|---|---|
/// | `tollgate_admitted_total` | counter | requests granted, at once or after a wait |
/// | `tollgate_denied_total` | counter, also labelled `reason` ([`DenyReason::as_str`]) | requests refused |
/// | `tollgate_waited_total` | counter | requests granted after queueing |
/// | `tollgate_wait_seconds` | histogram | how long each of those waited |
/// | `tollgate_drained_total` | counter | drains |
/// | `tollgate_adaptive_limit` | gauge | an adaptive limit, as it last changed |
/// | `tollgate_inflight` | gauge | requests in flight under it, as the last to end left them |
/// | `tollgate_finished_total` | counter, also labelled `outcome` ([`Outcome::as_str`]) | requests admitted by an adaptive limiter that ended |
/// | `tollgate_rtt_seconds` | histogram | how long those ending in success or drop held their permit |
/// | `tollgate_would_shed_total` | counter | requests a shadow-mode shedder would have shed (also admitted) |
/// | `tollgate_outbound_rate` | gauge | a learned outbound rate in calls a second, as it last changed (0: not limiting) |
/// | `tollgate_shed_total` | counter, also labelled `reason` (`ShedReason::as_str`) | a load shedder's refusals, by why |
/// | `tollgate_would_shed_by_reason_total` | counter, also labelled `reason` (as above) | requests a shadow-mode shedder would have shed, by why |
///
/// Rejections by an adaptive limiter are `tollgate_denied_total`, as for any
/// limiter.
///
/// Counters count requests, not permits. The labels are the recorder's name and the
/// reason, and the key only for the few keys named to
/// [`with_keys`](MetricsRecorder::with_keys) (a shedder's criticality classes, an
/// adaptive limiter's partitions), so the number of series is bounded. The handles are
/// registered once, with the recorder installed when the `MetricsRecorder` is made
/// (the global one, or a local one within
/// [`metrics::with_local_recorder`]); recording is then a few atomic adds.
///
/// # Examples
///
/// ```
/// use metrics_util::debugging::DebuggingRecorder;
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::observe::Events;
/// use tollgate::{Limiter, Quota};
///
/// let recorder = DebuggingRecorder::new();
/// let snapshotter = recorder.snapshotter();
/// let events = Events::new("api");
/// let _metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new())
///     .with_events(events);
/// limiter.try_acquire(1)?;
/// limiter.try_acquire(1).unwrap_err();
///
/// let counters: Vec<_> = snapshotter.snapshot().into_vec().into_iter()
///     .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
///     .collect();
/// assert!(counters.iter().any(|(name, _)| name == "tollgate_denied_total"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MetricsRecorder {
    name: String,
    all: Series,
    /// Series of their own for the keys named to `with_keys`: few, so found by a
    /// linear search.
    keyed: Vec<(String, Series)>,
}

/// One set of metric handles, under one set of labels.
struct Series {
    admitted: Counter,
    denied: [Counter; DenyReason::ALL.len()],
    waited: Counter,
    wait_seconds: Histogram,
    drained: Counter,
    limit: Gauge,
    inflight: Gauge,
    finished: [Counter; Outcome::ALL.len()],
    rtt_seconds: Histogram,
    would_shed: Counter,
    outbound_rate: Gauge,
    /// By shed reason, in [`SHED_REASONS`]' order: refusals, then would-be ones.
    shed: [Counter; SHED_REASONS.len()],
    shadow_shed: [Counter; SHED_REASONS.len()],
}

impl Series {
    fn new(labels: &[(&'static str, String)]) -> Series {
        let with = |extra: Option<(&'static str, &'static str)>| -> Vec<Label> {
            labels
                .iter()
                .map(|(k, v)| Label::new(*k, v.clone()))
                .chain(extra.map(|(k, v)| Label::new(k, v)))
                .collect()
        };
        Series {
            admitted: metrics::counter!(ADMITTED_TOTAL, with(None)),
            denied: DenyReason::ALL.map(|reason| {
                metrics::counter!(DENIED_TOTAL, with(Some(("reason", reason.as_str()))))
            }),
            waited: metrics::counter!(WAITED_TOTAL, with(None)),
            wait_seconds: metrics::histogram!(WAIT_SECONDS, with(None)),
            drained: metrics::counter!(DRAINED_TOTAL, with(None)),
            limit: metrics::gauge!(ADAPTIVE_LIMIT, with(None)),
            inflight: metrics::gauge!(INFLIGHT, with(None)),
            finished: Outcome::ALL.map(|outcome| {
                metrics::counter!(FINISHED_TOTAL, with(Some(("outcome", outcome.as_str()))))
            }),
            rtt_seconds: metrics::histogram!(RTT_SECONDS, with(None)),
            would_shed: metrics::counter!(WOULD_SHED_TOTAL, with(None)),
            outbound_rate: metrics::gauge!(OUTBOUND_RATE, with(None)),
            shed: SHED_REASONS
                .map(|reason| metrics::counter!(SHED_TOTAL, with(Some(("reason", reason))))),
            shadow_shed: SHED_REASONS.map(|reason| {
                metrics::counter!(WOULD_SHED_BY_REASON_TOTAL, with(Some(("reason", reason))))
            }),
        }
    }

    fn record(&self, kind: &EventKind, detail: Option<&str>) {
        // A shedder's reason; another detail (or none) is not counted by reason.
        let shed_reason = || detail.and_then(|d| SHED_REASONS.iter().position(|r| *r == d));
        match *kind {
            EventKind::Admitted => self.admitted.increment(1),
            EventKind::Waited { wait } => {
                self.admitted.increment(1);
                self.waited.increment(1);
                self.wait_seconds.record(wait.as_secs_f64());
            }
            EventKind::Denied { reason, .. } => {
                self.denied[reason.index()].increment(1);
                if reason == DenyReason::Shed {
                    if let Some(i) = shed_reason() {
                        self.shed[i].increment(1);
                    }
                }
            }
            EventKind::Drained => self.drained.increment(1),
            // Lossless for any limit below 2^53; a gauge is an f64.
            EventKind::LimitChanged { limit, .. } => self.limit.set(limit as f64),
            EventKind::Started { inflight } => self.inflight.set(inflight as f64),
            EventKind::Finished {
                outcome,
                rtt,
                inflight,
            } => {
                self.finished[outcome.index()].increment(1);
                self.inflight.set(inflight as f64);
                if outcome != Outcome::Ignored {
                    self.rtt_seconds.record(rtt.as_secs_f64());
                }
            }
            EventKind::WouldShed => {
                self.admitted.increment(1);
                self.would_shed.increment(1);
                if let Some(i) = shed_reason() {
                    self.shadow_shed[i].increment(1);
                }
            }
            EventKind::RateChanged { interval, .. } => self
                .outbound_rate
                .set(interval.map_or(0.0, |i| 1.0 / i.as_secs_f64())),
        }
    }
}

impl MetricsRecorder {
    /// Registers the metrics labelled `limiter = name` with the current recorder.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{Events, MetricsRecorder};
    ///
    /// let events = Events::new("api");
    /// events.subscribe(MetricsRecorder::new("api")).detach();
    /// ```
    pub fn new(name: impl Into<String>) -> MetricsRecorder {
        let name = name.into();
        describe();
        MetricsRecorder {
            all: Series::new(&[("limiter", name.clone())]),
            keyed: Vec::new(),
            name,
        }
    }

    /// Registers, besides the series of [`new`](MetricsRecorder::new), one series
    /// labelled also `key = k` for each of `keys`: an event with one of these keys
    /// is counted there, and every other event in the series without a key. For a
    /// small, fixed set of keys, such as a shedder's criticality classes or a
    /// partitioned limiter's partitions; never for client keys, whose number has no
    /// bound.
    ///
    /// # Examples
    ///
    /// Counts per criticality class, keyed by the class's name as a load shedder
    /// (feature `shed`) emits them:
    ///
    /// ```
    /// use metrics_util::debugging::DebuggingRecorder;
    /// use tollgate::observe::{EventKind, Events, MetricsRecorder};
    ///
    /// let recorder = DebuggingRecorder::new();
    /// let snapshotter = recorder.snapshotter();
    /// let events = Events::new("api");
    /// let metrics = metrics::with_local_recorder(&recorder, || {
    ///     MetricsRecorder::with_keys("api", ["critical", "sheddable"])
    /// });
    /// events.subscribe(metrics).detach();
    ///
    /// events.emit_keyed("critical", 1, EventKind::Admitted);
    ///
    /// let admitted_critical = snapshotter.snapshot().into_vec().into_iter().any(|(key, _, _, _)| {
    ///     key.key().name() == "tollgate_admitted_total"
    ///         && key.key().labels().any(|l| l.key() == "key" && l.value() == "critical")
    /// });
    /// assert!(admitted_critical);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_keys<K: Into<String>>(
        name: impl Into<String>,
        keys: impl IntoIterator<Item = K>,
    ) -> MetricsRecorder {
        let mut recorder = MetricsRecorder::new(name);
        for key in keys {
            let key = key.into();
            if recorder.keyed.iter().all(|(k, _)| *k != key) {
                let series =
                    Series::new(&[("limiter", recorder.name.clone()), ("key", key.clone())]);
                recorder.keyed.push((key, series));
            }
        }
        recorder
    }

    /// The `limiter` label.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn describe() {
    metrics::describe_counter!(
        ADMITTED_TOTAL,
        Unit::Count,
        "Requests granted, at once or after a wait."
    );
    metrics::describe_counter!(DENIED_TOTAL, Unit::Count, "Requests refused, by reason.");
    metrics::describe_counter!(
        WAITED_TOTAL,
        Unit::Count,
        "Requests granted after queueing."
    );
    metrics::describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "Time waited by requests that queued."
    );
    metrics::describe_counter!(DRAINED_TOTAL, Unit::Count, "Drains of every permit left.");
    metrics::describe_gauge!(
        ADAPTIVE_LIMIT,
        Unit::Count,
        "An adaptive concurrency limit, as it last changed."
    );
    metrics::describe_gauge!(
        INFLIGHT,
        Unit::Count,
        "Requests in flight under an adaptive limit, as the last one to end left them."
    );
    metrics::describe_counter!(
        FINISHED_TOTAL,
        Unit::Count,
        "Requests admitted by an adaptive limiter that ended, by outcome."
    );
    metrics::describe_histogram!(
        RTT_SECONDS,
        Unit::Seconds,
        "Time each request ending in success or drop held its permit."
    );
    metrics::describe_counter!(
        WOULD_SHED_TOTAL,
        Unit::Count,
        "Requests admitted in shadow mode that a load shedder would have shed."
    );
    metrics::describe_gauge!(
        OUTBOUND_RATE,
        Unit::CountPerSecond,
        "An outbound rate learned from a partner's answers, as it last changed; 0 while not limiting."
    );
    metrics::describe_counter!(
        SHED_TOTAL,
        Unit::Count,
        "Requests a load shedder refused, by reason."
    );
    metrics::describe_counter!(
        WOULD_SHED_BY_REASON_TOTAL,
        Unit::Count,
        "Requests admitted in shadow mode that a load shedder would have shed, by reason."
    );
}

impl Listener for MetricsRecorder {
    fn on_event(&self, event: &Event<'_>) {
        let series = event
            .key
            .and_then(|key| self.keyed.iter().find(|(k, _)| k == key))
            .map_or(&self.all, |(_, series)| series);
        series.record(&event.kind, event.detail);
    }
}

impl fmt::Debug for MetricsRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsRecorder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Subscribes a [`MetricsRecorder`] labelled with this hub's name (feature
    /// `metrics`): the metrics are one more listener.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::Events;
    ///
    /// let events = Events::new("api");
    /// events.record_metrics().detach();
    /// assert!(events.is_observed());
    /// ```
    pub fn record_metrics(&self) -> Subscription {
        self.subscribe(MetricsRecorder::new(self.name()))
    }
}
