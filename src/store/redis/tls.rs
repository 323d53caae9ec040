//! The process-wide rustls crypto provider that redis-rs's TLS needs.

/// Installs ring as rustls's process-wide crypto provider, unless one is installed
/// already; returns whether this call installed it.
///
/// redis-rs builds its TLS settings with rustls's process-wide provider. When none is
/// installed, rustls picks the one its features name, and panics if they name two
/// (ring, which `redis-tls` turns on, and aws-lc-rs, which crates such as reqwest or
/// tonic turn on by default). tollgate's constructors
/// ([`RedisStore::connect_with`](crate::store::RedisStore::connect_with),
/// [`RedisStore::connect_sentinel_with`](crate::store::RedisStore::connect_sentinel_with)
/// and the plain forms) call this first, so they never meet that panic. Call it
/// yourself before connecting through redis-rs directly (a `ClusterClient` over
/// `rediss://`, a `Client` passed to [`RedisStore::new`](crate::store::RedisStore::new)).
/// To use another provider, install it before tollgate connects: this then does
/// nothing.
///
/// # Examples
///
/// ```
/// // The first call installs ring, unless the application installed a provider.
/// let _installed = tollgate::store::install_tls_provider();
/// assert!(!tollgate::store::install_tls_provider());
/// ```
pub fn install_tls_provider() -> bool {
    rustls::crypto::CryptoProvider::get_default().is_none()
        && rustls::crypto::ring::default_provider()
            .install_default()
            .is_ok()
}

/// [`install_tls_provider`], for the constructors.
pub(super) fn provide() {
    let _ = install_tls_provider();
}
