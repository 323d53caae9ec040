//! How `RedisStore` reaches a server beyond its URL: an ACL user, TLS certificates,
//! timeouts, and for Sentinel the sentinels' own credentials.

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use super::{RedisStore, from_redis, invalid_url};
use crate::error::ConfigError;
use crate::store::{StoreError, validate_prefix};

/// How long a connection attempt waits, by default.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a reply may take, by default (redis-rs's own default).
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long one lookup through the sentinels, with the connection to the master they
/// name, may take, by default.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(3);

/// How to reach Redis beyond a URL: an ACL user, TLS certificates (feature
/// `redis-tls`), timeouts, and, through Sentinel, the sentinels' credentials and
/// whether the master speaks TLS.
///
/// Credentials set here win over those in a URL. Passwords are never printed by
/// `Debug`.
///
/// # TLS
///
/// With the feature `redis-tls`, `rediss://` URLs connect over TLS 1.3 or 1.2
/// (rustls with the ring provider), verifying the server's certificate against the
/// system's roots, or against [`root_certificate_pem`](Self::root_certificate_pem)'s
/// CA. The server's certificate must name the host of the URL (for an IP address, an
/// IP subject alternative name); through Sentinel, the address the sentinels report.
///
/// rustls takes its crypto from a process-wide provider. tollgate's constructors
/// install ring as that provider when none is installed yet, which is what an
/// application with two providers compiled in (ring, and aws-lc-rs through another
/// crate) needs: without one installed, rustls would panic at the first TLS
/// connection. An application that wants another provider installs it first (see
/// [`install_tls_provider`](crate::store::install_tls_provider)).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::store::{RedisConnectOptions, RedisStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let options = RedisConnectOptions::new()
///     .user("limiter", "s3cret")
///     .connect_timeout(Duration::from_millis(500));
/// let store = RedisStore::connect_with("redis://10.0.0.7:6379/", "api", &options).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisConnectOptions {
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    pub(super) sentinel_username: Option<String>,
    pub(super) sentinel_password: Option<String>,
    pub(super) tls: bool,
    #[cfg(feature = "redis-tls")]
    pub(super) root_certificate: Option<Vec<u8>>,
    #[cfg(feature = "redis-tls")]
    pub(super) client_certificate: Option<(Vec<u8>, Vec<u8>)>,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
    pub(super) sentinel_timeout: Duration,
}

impl Default for RedisConnectOptions {
    fn default() -> Self {
        RedisConnectOptions::new()
    }
}

impl fmt::Debug for RedisConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |set: bool| if set { "<set>" } else { "<none>" };
        let mut s = f.debug_struct("RedisConnectOptions");
        s.field("username", &self.username)
            .field("password", &hidden(self.password.is_some()))
            .field("sentinel_username", &self.sentinel_username)
            .field(
                "sentinel_password",
                &hidden(self.sentinel_password.is_some()),
            )
            .field("tls", &self.tls);
        #[cfg(feature = "redis-tls")]
        s.field("root_certificate", &self.root_certificate.is_some())
            .field("client_certificate", &self.client_certificate.is_some());
        s.field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("sentinel_timeout", &self.sentinel_timeout)
            .finish()
    }
}

impl RedisConnectOptions {
    /// No credentials beyond the URL's, no TLS beyond the URL's scheme, a connection
    /// timeout of 1 s, a reply timeout of 500 ms and a Sentinel lookup timeout of 3 s.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::store::RedisConnectOptions;
    /// let options = RedisConnectOptions::new();
    /// # let _ = options;
    /// ```
    pub fn new() -> Self {
        RedisConnectOptions {
            username: None,
            password: None,
            sentinel_username: None,
            sentinel_password: None,
            tls: false,
            #[cfg(feature = "redis-tls")]
            root_certificate: None,
            #[cfg(feature = "redis-tls")]
            client_certificate: None,
            connect_timeout: CONNECT_TIMEOUT,
            response_timeout: RESPONSE_TIMEOUT,
            sentinel_timeout: SENTINEL_TIMEOUT,
        }
    }

    /// Authenticates as the ACL user `username` with `password` (Redis 6 and later).
    pub fn user(self, username: impl Into<String>, password: impl Into<String>) -> Self {
        RedisConnectOptions {
            username: Some(username.into()),
            password: Some(password.into()),
            ..self
        }
    }

    /// Authenticates with `password` alone: the `default` user, or `requirepass`.
    pub fn password(self, password: impl Into<String>) -> Self {
        RedisConnectOptions {
            username: None,
            password: Some(password.into()),
            ..self
        }
    }

    /// Through Sentinel: authenticates to the sentinels as `username` with `password`
    /// (otherwise with the credentials of their URLs, if any).
    pub fn sentinel_user(self, username: impl Into<String>, password: impl Into<String>) -> Self {
        RedisConnectOptions {
            sentinel_username: Some(username.into()),
            sentinel_password: Some(password.into()),
            ..self
        }
    }

    /// Through Sentinel: authenticates to the sentinels with `password` alone.
    pub fn sentinel_password(self, password: impl Into<String>) -> Self {
        RedisConnectOptions {
            sentinel_username: None,
            sentinel_password: Some(password.into()),
            ..self
        }
    }

    /// Through Sentinel: whether the master the sentinels name speaks TLS (the
    /// sentinels themselves do when their URLs are `rediss://`). A URL's scheme
    /// decides otherwise. Without the feature `redis-tls`, connecting over TLS is a
    /// [`StoreError::InvalidUrl`].
    pub fn tls(self, tls: bool) -> Self {
        RedisConnectOptions { tls, ..self }
    }

    /// Verifies the servers' certificates against the CA certificate(s) in `pem`
    /// rather than the system's roots.
    #[cfg(feature = "redis-tls")]
    pub fn root_certificate_pem(self, pem: impl Into<Vec<u8>>) -> Self {
        RedisConnectOptions {
            root_certificate: Some(pem.into()),
            ..self
        }
    }

    /// Presents the client certificate `certificate_pem` with its private key
    /// `key_pem` (mutual TLS, for a server with `tls-auth-clients yes`).
    #[cfg(feature = "redis-tls")]
    pub fn client_certificate_pem(
        self,
        certificate_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        RedisConnectOptions {
            client_certificate: Some((certificate_pem.into(), key_pem.into())),
            ..self
        }
    }

    /// How long a connection attempt may take (1 s by default).
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        RedisConnectOptions {
            connect_timeout: timeout,
            ..self
        }
    }

    /// How long a reply may take (500 ms by default); a later one fails the call as a
    /// [`StoreError::Connection`].
    pub fn response_timeout(self, timeout: Duration) -> Self {
        RedisConnectOptions {
            response_timeout: timeout,
            ..self
        }
    }

    /// Through Sentinel: how long one lookup of the master, with the connection to
    /// it, may take (3 s by default).
    pub fn sentinel_timeout(self, timeout: Duration) -> Self {
        RedisConnectOptions {
            sentinel_timeout: timeout,
            ..self
        }
    }

    /// Refuses zero timeouts.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (parameter, timeout) in [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
            ("sentinel_timeout", self.sentinel_timeout),
        ] {
            if timeout.is_zero() {
                return Err(ConfigError::Zero { parameter });
            }
        }
        Ok(())
    }

    /// `info` with this user, if one is set.
    pub(super) fn redis_settings(&self, info: &RedisConnectionInfo) -> RedisConnectionInfo {
        let mut settings = info.clone();
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        if let Some(username) = &self.username {
            settings = settings.set_username(username);
        }
        settings
    }

    /// The certificates for redis-rs, if any is set.
    #[cfg(feature = "redis-tls")]
    pub(super) fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.root_certificate.is_none() && self.client_certificate.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .client_certificate
                .as_ref()
                .map(|(client_cert, client_key)| redis::ClientTlsConfig {
                    client_cert: client_cert.clone(),
                    client_key: client_key.clone(),
                }),
            root_cert: self.root_certificate.clone(),
        })
    }

    /// A client for `info`, with the certificates.
    fn client(&self, info: ConnectionInfo) -> Result<Client, StoreError> {
        #[cfg(feature = "redis-tls")]
        if let Some(certificates) = self.certificates() {
            return Client::build_with_tls(info, certificates).map_err(from_redis);
        }
        Client::open(info).map_err(from_redis)
    }
}

impl RedisStore<ConnectionManager> {
    /// As [`connect`](Self::connect), with the credentials, certificates and timeouts
    /// of `options`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tollgate::store::{RedisConnectOptions, RedisStore};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = RedisConnectOptions::new().user("limiter", "p@ss/word");
    /// let store = RedisStore::connect_with("redis://127.0.0.1:6379/", "api", &options).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`StoreError::Config`] for a prefix with a brace, or a zero timeout;
    /// - [`StoreError::InvalidUrl`] for a malformed URL, a `rediss://` URL without the
    ///   feature `redis-tls`, or a certificate that is not PEM;
    /// - [`StoreError::Authentication`] if Redis refuses the credentials;
    /// - [`StoreError::Connection`] if Redis cannot be reached, or its certificate
    ///   does not verify.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the connection made so far.
    pub async fn connect_with(
        url: &str,
        prefix: &str,
        options: &RedisConnectOptions,
    ) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        options.check()?;
        #[cfg(feature = "redis-tls")]
        super::tls::provide();
        let info = url.into_connection_info().map_err(invalid_url)?;
        let settings = options.redis_settings(info.redis_settings());
        let client = options.client(info.set_redis_settings(settings))?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(100))
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout));
        let mut connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(from_redis)?;
        // A connection without the password that a server requires opens fine: only
        // its first command is refused, which should happen here rather than later.
        redis::cmd("PING")
            .query_async::<()>(&mut connection)
            .await
            .map_err(from_redis)?;
        RedisStore::new(connection, prefix)?.preloaded().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_a_password() {
        let options = RedisConnectOptions::new()
            .user("alice", "s3cret")
            .sentinel_password("sentinel-s3cret");
        let text = format!("{options:?}");
        assert!(text.contains("alice"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn zero_timeouts_are_refused_and_the_longest_accepted() {
        for (options, parameter) in [
            (
                RedisConnectOptions::new().connect_timeout(Duration::ZERO),
                "connect_timeout",
            ),
            (
                RedisConnectOptions::new().response_timeout(Duration::ZERO),
                "response_timeout",
            ),
            (
                RedisConnectOptions::new().sentinel_timeout(Duration::ZERO),
                "sentinel_timeout",
            ),
        ] {
            assert_eq!(options.check(), Err(ConfigError::Zero { parameter }));
        }
        let longest = RedisConnectOptions::new()
            .connect_timeout(Duration::MAX)
            .response_timeout(Duration::MAX)
            .sentinel_timeout(Duration::MAX);
        assert_eq!(longest.check(), Ok(()));
    }

    #[test]
    fn credentials_set_here_win_over_the_url() {
        let info = "redis://bob:old@127.0.0.1:6379/3"
            .into_connection_info()
            .unwrap();
        let settings = RedisConnectOptions::new()
            .user("alice", "p@ss")
            .redis_settings(info.redis_settings());
        assert_eq!(
            (settings.username(), settings.password(), settings.db()),
            (Some("alice"), Some("p@ss"), 3)
        );
        let kept = RedisConnectOptions::new().redis_settings(info.redis_settings());
        assert_eq!(
            (kept.username(), kept.password()),
            (Some("bob"), Some("old"))
        );
    }
}
