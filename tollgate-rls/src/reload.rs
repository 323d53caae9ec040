//! Watching the configuration directory, and swapping in what changed.
//!
//! The directory is checked every `--watch-interval` (1s by default): every file's
//! content is compared with the last load's, so an edit in place, a file added or
//! removed, and the runtime root's symlink pointed at another directory (when
//! `RUNTIME_WATCH_ROOT` is set, as by default) are all seen, whatever the file system.
//! A change loads the directory again (see [`DomainDir`]): a file that does not load
//! keeps its previous version and its error is logged as `file:line:column: message`;
//! the rest is applied to the engine at once, requests in flight finishing on the
//! domains they started with.
//!
//! Loads are counted in [`LoadCounters`] and reported to an optional callback, for the
//! stats.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::domains::{DomainDir, DomainsError, Load};
use crate::engine::Engine;
use crate::health::Health;

/// How many loads succeeded and how many had an error, as the Go service's
/// `config_load_success` and `config_load_error`.
///
/// # Examples
///
/// ```
/// use tollgate_rls::reload::LoadCounters;
///
/// let counters = LoadCounters::default();
/// assert_eq!((counters.successes(), counters.errors()), (0, 0));
/// ```
#[derive(Debug, Default)]
pub struct LoadCounters {
    successes: AtomicU64,
    errors: AtomicU64,
}

impl LoadCounters {
    /// Loads in which every file loaded.
    pub fn successes(&self) -> u64 {
        self.successes.load(Ordering::Relaxed)
    }

    /// Loads in which a file did not load (the rest was applied), or the directory
    /// could not be read (nothing changed).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// What one load did, for the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadOutcome {
    /// Domains in force after the load.
    pub domains: usize,
    /// Files read.
    pub files: usize,
    /// Files (or merged domains) that did not load; 1 when the directory could not be
    /// read.
    pub errors: usize,
}

/// Called after every load.
pub type OnLoad = Arc<dyn Fn(&LoadOutcome) + Send + Sync>;

/// Loads the configuration directory into the engine, now and on every change.
pub struct Reloader {
    dir: DomainDir,
    engine: Arc<Engine>,
    health: Health,
    counters: Arc<LoadCounters>,
    on_load: Option<OnLoad>,
    /// The directory's last read error: the same error again is not counted twice.
    dir_error: Option<String>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("dir", &self.dir.dir())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Reloader {
    /// A reloader of `dir` into `engine`, reporting to `health`.
    pub fn new(dir: DomainDir, engine: Arc<Engine>, health: Health) -> Reloader {
        Reloader {
            dir,
            engine,
            health,
            counters: Arc::default(),
            on_load: None,
            dir_error: None,
        }
    }

    /// Calls `on_load` after every load.
    #[must_use]
    pub fn with_on_load(mut self, on_load: OnLoad) -> Reloader {
        self.on_load = Some(on_load);
        self
    }

    /// The load counters, shared.
    pub fn counters(&self) -> Arc<LoadCounters> {
        self.counters.clone()
    }

    /// Loads the directory now, whatever changed.
    ///
    /// # Errors
    ///
    /// [`DomainsError::Io`] when the directory cannot be read; it is counted and the
    /// domains in force stay. Files that do not load are logged, not returned.
    pub fn load(&mut self) -> Result<(), DomainsError> {
        let load = self.dir.load();
        self.apply(load.map(Some))
    }

    /// Loads the directory if anything in it changed.
    ///
    /// # Errors
    ///
    /// As [`load`](Reloader::load).
    pub fn reload_if_changed(&mut self) -> Result<(), DomainsError> {
        let load = self.dir.load_if_changed();
        self.apply(load)
    }

    fn apply(&mut self, load: Result<Option<Load>, DomainsError>) -> Result<(), DomainsError> {
        let load = match load {
            Ok(Some(load)) => load,
            Ok(None) => return Ok(()),
            Err(e) => {
                let message = e.to_string();
                if self.dir_error.as_ref() == Some(&message) {
                    return Ok(());
                }
                self.dir_error = Some(message);
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                self.report(&LoadOutcome {
                    domains: self.engine.domains().len(),
                    files: 0,
                    errors: 1,
                });
                return Err(e);
            }
        };
        self.dir_error = None;
        for e in &load.errors {
            tracing::error!("{e}");
        }
        let outcome = LoadOutcome {
            domains: load.domains.len(),
            files: load.files,
            errors: load.errors.len(),
        };
        if load.errors.is_empty() {
            self.counters.successes.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                domains = outcome.domains,
                files = outcome.files,
                "loaded the configuration"
            );
        } else {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                domains = outcome.domains,
                files = outcome.files,
                errors = outcome.errors,
                "loaded the configuration; files that did not load keep their previous version"
            );
        }
        self.health.set_domains_loaded(outcome.domains);
        self.engine.set_domains(load.domains);
        self.report(&outcome);
        Ok(())
    }

    fn report(&self, outcome: &LoadOutcome) {
        if let Some(on_load) = &self.on_load {
            on_load(outcome);
        }
    }

    /// Checks the directory every `interval` until `stop` turns true (or its sender is
    /// dropped), loading it when it changed.
    ///
    /// # Cancel safety
    ///
    /// Cancelling it stops the watch after the check under way, if any, is applied.
    pub async fn run(mut self, interval: Duration, mut stop: watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return;
                    }
                    continue;
                }
            }
            // Reading the files blocks: off the request threads.
            let outcome = tokio::task::spawn_blocking(move || {
                let result = self.reload_if_changed();
                (self, result)
            })
            .await;
            match outcome {
                Ok((reloader, result)) => {
                    self = reloader;
                    if let Err(e) = result {
                        tracing::error!("{e}");
                    }
                }
                Err(e) => {
                    // A panic in a load: nothing is left to watch with.
                    tracing::error!("the configuration watch stopped: {e}");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::domains::Domains;
    use crate::settings::DomainsSource;

    fn rules(n: u32) -> String {
        format!(
            "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: minute, requests_per_unit: {n} }}\n"
        )
    }

    #[test]
    fn loads_are_counted_reported_and_applied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("api.yaml"), rules(5)).unwrap();
        let engine = Arc::new(Engine::in_memory(Domains::default()).unwrap());
        let health = Health::new(true);
        health.set_store_healthy(true);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut reloader = Reloader::new(
            DomainDir::new(DomainsSource::dir(dir.path()), false),
            engine.clone(),
            health.clone(),
        )
        .with_on_load(Arc::new(move |outcome: &LoadOutcome| {
            sink.lock().unwrap().push(outcome.clone())
        }));
        let counters = reloader.counters();

        reloader.load().unwrap();
        assert!(health.is_healthy());
        assert_eq!(engine.domains().names(), ["api"]);
        assert_eq!((counters.successes(), counters.errors()), (1, 0));

        // Nothing changed: no load.
        reloader.reload_if_changed().unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1);

        std::fs::write(dir.path().join("api.yaml"), "domain: api\ndescriptors: [").unwrap();
        reloader.reload_if_changed().unwrap();
        assert_eq!((counters.successes(), counters.errors()), (1, 1));
        let limit = engine.domains().get("api").unwrap().limits()[0].requests_per_unit();
        assert_eq!(limit, 5);

        std::fs::remove_file(dir.path().join("api.yaml")).unwrap();
        reloader.reload_if_changed().unwrap();
        assert!(!health.is_healthy(), "no domain left");

        // The directory gone: one error, counted once however often it is checked.
        drop(dir);
        assert!(reloader.reload_if_changed().is_err());
        assert!(reloader.reload_if_changed().is_ok());
        assert_eq!(counters.errors(), 2);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        assert_eq!(
            seen[1],
            LoadOutcome {
                domains: 1,
                files: 1,
                errors: 1
            }
        );
    }
}
