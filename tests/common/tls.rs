//! Certificates for the TLS tests, made at test time with rcgen: a CA, and a server
//! certificate it signs for `127.0.0.1` and `localhost`, written to a throwaway
//! directory for `redis-server`.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::redis::TlsFiles;

/// Distinguishes the directories of one test process.
static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A CA and a server certificate it signed, their files in a directory removed on drop.
#[derive(Debug)]
pub struct TestCertificates {
    /// The CA's certificate, PEM: what a client trusts.
    pub ca_pem: String,
    /// The files `redis-server` reads.
    pub files: TlsFiles,
    dir: PathBuf,
}

impl TestCertificates {
    /// Makes a CA and a server certificate for `127.0.0.1` and `localhost`, and writes
    /// them.
    ///
    /// # Panics
    ///
    /// If rcgen fails or the files cannot be written.
    pub fn new() -> TestCertificates {
        let ca = ca();
        let key = KeyPair::generate().expect("a server key");
        let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("server certificate parameters");
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &*ca)
            .expect("a signed server certificate");

        let dir = std::env::temp_dir().join(format!(
            "tollgate-tls-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a certificate directory");
        let files = TlsFiles {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            ca: dir.join("ca.crt"),
        };
        fs::write(&files.cert, cert.pem()).expect("server.crt");
        fs::write(&files.key, key.serialize_pem()).expect("server.key");
        fs::write(&files.ca, ca.pem()).expect("ca.crt");
        TestCertificates {
            ca_pem: ca.pem(),
            files,
            dir,
        }
    }
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The certificate of another CA, which signed nothing the server holds.
pub fn unrelated_ca_pem() -> String {
    ca().pem()
}

/// A fresh CA.
fn ca() -> CertifiedIssuer<'static, KeyPair> {
    let key = KeyPair::generate().expect("a CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, key).expect("a self-signed CA")
}
