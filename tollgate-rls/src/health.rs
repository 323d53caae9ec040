//! The service's health, as the Go service's health checker keeps it: healthy while
//! every component is.
//!
//! The components are the store (healthy once it answers), the configuration (only
//! with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: healthy while at least one domain
//! is loaded) and draining (unhealthy from SIGTERM on). The HTTP `/healthcheck`
//! answers `200 OK` or a bare `500`; the gRPC health service reports `SERVING` or
//! `NOT_SERVING` for the service name `ratelimit` (and the empty name).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// The health of the service; clones share it.
///
/// # Examples
///
/// ```
/// use tollgate_rls::health::Health;
///
/// let health = Health::new(false);
/// assert!(!health.is_healthy()); // the store has not answered yet
/// health.set_store_healthy(true);
/// assert!(health.is_healthy());
/// health.start_draining();
/// assert!(!health.is_healthy());
/// ```
#[derive(Debug, Clone)]
pub struct Health {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    components: Mutex<Components>,
    healthy: watch::Sender<bool>,
}

#[derive(Debug, Clone, Copy)]
struct Components {
    store: bool,
    /// `None` when the configuration is not a component.
    config: Option<bool>,
    draining: bool,
}

impl Components {
    fn healthy(self) -> bool {
        self.store && self.config.unwrap_or(true) && !self.draining
    }
}

impl Health {
    /// Unhealthy until the store is marked healthy; with `require_config`, also until
    /// a load leaves at least one domain.
    pub fn new(require_config: bool) -> Health {
        let components = Components {
            store: false,
            config: require_config.then_some(false),
            draining: false,
        };
        Health {
            inner: Arc::new(Inner {
                components: Mutex::new(components),
                healthy: watch::Sender::new(components.healthy()),
            }),
        }
    }

    /// Whether every component is healthy.
    pub fn is_healthy(&self) -> bool {
        *self.inner.healthy.borrow()
    }

    /// A receiver that sees every change of [`is_healthy`](Health::is_healthy).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.inner.healthy.subscribe()
    }

    /// Marks the store healthy or not.
    pub fn set_store_healthy(&self, healthy: bool) {
        self.update(|c| c.store = healthy);
    }

    /// Records a load that left `domains` domains; ignored unless the configuration
    /// is a component.
    pub fn set_domains_loaded(&self, domains: usize) {
        self.update(|c| {
            if c.config.is_some() {
                c.config = Some(domains > 0);
            }
        });
    }

    /// Unhealthy from now on: the service is shutting down.
    pub fn start_draining(&self) {
        self.update(|c| c.draining = true);
    }

    /// Whether [`start_draining`](Health::start_draining) was called.
    pub fn is_draining(&self) -> bool {
        self.lock().draining
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Components> {
        // The components are plain flags: one set by a panicking thread is still valid.
        self.inner
            .components
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut Components)) {
        let mut components = self.lock();
        change(&mut components);
        let healthy = components.healthy();
        self.inner.healthy.send_if_modified(|h| {
            let changed = *h != healthy;
            *h = healthy;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_counts_only_when_required() {
        let health = Health::new(true);
        health.set_store_healthy(true);
        assert!(!health.is_healthy());
        health.set_domains_loaded(1);
        assert!(health.is_healthy());
        health.set_domains_loaded(0);
        assert!(!health.is_healthy());

        let health = Health::new(false);
        health.set_store_healthy(true);
        health.set_domains_loaded(0);
        assert!(health.is_healthy());
    }

    #[test]
    fn draining_is_final() {
        let health = Health::new(false);
        let mut changes = health.subscribe();
        health.set_store_healthy(true);
        assert!(changes.has_changed().unwrap());
        assert!(*changes.borrow_and_update());
        health.start_draining();
        health.set_store_healthy(true);
        assert!(!*changes.borrow_and_update());
        assert!(health.is_draining());
    }
}
