//! The Redis store over TLS (`rediss://`) with an ACL user, on a real TLS-only
//! `redis-server` whose certificate a CA made at test time signed: it decides as over
//! plain TCP, directly and through a Sentinel; a certificate that does not verify, a
//! wrong password and a PEM that is not one are typed errors, never panics.
#![cfg(feature = "redis-tls")]

mod common;

use std::time::Duration;

use common::redis::{RedisSentinels, RedisServer, require_redis};
use common::tls::{TestCertificates, unrelated_ca_pem};
use redis::aio::ConnectionLike;
use tollgate::algorithm::FixedWindow;
use tollgate::store::{RedisConnectOptions, RedisStore, SharedLimiter, StoreError};

const USER: &str = "alice";
/// Characters that a URL must escape.
const PASSWORD: &str = "p@ss:w/rd#1";

/// A TLS-only server with the ACL user, and the certificates it was made with.
fn server() -> Option<(RedisServer, TestCertificates)> {
    require_redis()?;
    let certificates = TestCertificates::new();
    let server = RedisServer::start_tls(&certificates.files, Some((USER, PASSWORD)));
    Some((server, certificates))
}

/// The URL without credentials.
fn bare_url(server: &RedisServer) -> String {
    format!("rediss://127.0.0.1:{}/", server.port())
}

/// Three requests admitted, the fourth denied.
async fn decides<C: ConnectionLike + Clone + Send + Sync + 'static>(store: RedisStore<C>) {
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    let limiter = SharedLimiter::new(store, window).unwrap();
    for _ in 0..3 {
        assert!(matches!(limiter.check("user-7", 1).await, Ok(Ok(_))));
    }
    assert!(matches!(limiter.check("user-7", 1).await, Ok(Err(_))));
}

#[tokio::test]
async fn a_store_over_tls_with_an_acl_user_decides() {
    let Some((server, certificates)) = server() else {
        return;
    };
    let trusted = RedisConnectOptions::new().root_certificate_pem(certificates.ca_pem.clone());
    // The user in the URL (percent-encoded)...
    assert!(
        server
            .url()
            .starts_with("rediss://alice:p%40ss%3Aw%2Frd%231@")
    );
    let store = RedisStore::connect_with(&server.url(), "in-url", &trusted)
        .await
        .unwrap();
    decides(store).await;
    // ...or in the options.
    let options = trusted.user(USER, PASSWORD);
    let store = RedisStore::connect_with(&bare_url(&server), "in-options", &options)
        .await
        .unwrap();
    decides(store).await;
    // The constructors installed a crypto provider.
    assert!(!tollgate::store::install_tls_provider());
}

#[tokio::test]
async fn a_certificate_that_does_not_verify_is_a_connection_error() {
    let Some((server, _certificates)) = server() else {
        return;
    };
    let options = RedisConnectOptions::new().user(USER, PASSWORD);
    // Another CA, and the system's roots: neither signed the server's certificate.
    for options in [
        options.clone().root_certificate_pem(unrelated_ca_pem()),
        options,
    ] {
        let error = RedisStore::connect_with(&bare_url(&server), "p", &options)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
        assert!(!error.is_permanent());
    }
}

#[tokio::test]
async fn a_wrong_password_or_no_user_is_an_authentication_error() {
    let Some((server, certificates)) = server() else {
        return;
    };
    let trusted = RedisConnectOptions::new().root_certificate_pem(certificates.ca_pem.clone());
    for options in [
        trusted.clone().user(USER, "wrong"),
        trusted.clone().user("mallory", PASSWORD),
        // The default user is off.
        trusted,
    ] {
        let error = RedisStore::connect_with(&bare_url(&server), "p", &options)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Authentication(_)), "{error:?}");
    }
}

#[tokio::test]
async fn a_pem_that_is_not_one_is_a_typed_error() {
    let Some((server, _certificates)) = server() else {
        return;
    };
    let options = RedisConnectOptions::new()
        .user(USER, PASSWORD)
        .root_certificate_pem(b"not a certificate".to_vec());
    let error = RedisStore::connect_with(&bare_url(&server), "p", &options)
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::InvalidUrl(_) | StoreError::Connection(_)),
        "{error:?}"
    );
    let options = RedisConnectOptions::new()
        .user(USER, PASSWORD)
        .client_certificate_pem(b"no".to_vec(), b"key".to_vec());
    let error = RedisStore::connect_with(&bare_url(&server), "p", &options)
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::InvalidUrl(_) | StoreError::Connection(_)),
        "{error:?}"
    );
}

#[tokio::test]
async fn plain_tcp_to_a_tls_port_is_a_connection_error() {
    let Some((server, _certificates)) = server() else {
        return;
    };
    let url = format!("redis://{USER}:x@127.0.0.1:{}/", server.port());
    let error = RedisStore::connect(&url, "p").await.unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_master_with_an_acl_user_through_a_sentinel() {
    if require_redis().is_none() {
        return;
    }
    let certificates = TestCertificates::new();
    let group = tokio::task::block_in_place(|| {
        RedisSentinels::start_tls("secure", &certificates.files, (USER, PASSWORD))
    });
    let urls = group.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    // The Sentinel names 127.0.0.1: the certificate's IP address.
    let options = RedisConnectOptions::new().tls(true).user(USER, PASSWORD);
    let trusted = options
        .clone()
        .root_certificate_pem(certificates.ca_pem.clone());
    let store = RedisStore::connect_sentinel_with(&urls, "secure", "through", &trusted)
        .await
        .unwrap();
    decides(store).await;
    // Another CA, a wrong password, plain TCP to the TLS master.
    let wrong_ca = options.root_certificate_pem(unrelated_ca_pem());
    let wrong_password = trusted.clone().user(USER, "wrong");
    let plain = trusted.tls(false);
    for (refused, authentication) in [(wrong_ca, false), (wrong_password, true), (plain, false)] {
        let error = RedisStore::connect_sentinel_with(&urls, "secure", "p", &refused)
            .await
            .unwrap_err();
        if authentication {
            assert!(matches!(error, StoreError::Authentication(_)), "{error:?}");
        } else {
            assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
        }
    }
}
