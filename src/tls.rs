//! TLS for both legs: the `[tls]` section, the rustls contexts built from it (certificates
//! loaded once per configuration, not per connection), the certificate checks of each
//! upstream mode, and (`sha2`) the RSA password exchange where the legs differ.

use std::fs::File;
use std::io::BufReader;
use std::sync::{Arc, Mutex};

use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    self, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme,
};
use tokio_rustls::{TlsAcceptor, TlsConnector};

pub(crate) mod sha2;

use serde::{Deserialize, Serialize};

/// TLS on the two legs, each independent of the other.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    pub client: ClientTlsConfig,
    pub upstream: UpstreamTlsConfig,
}

/// TLS termination toward clients: qcache presents this certificate.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, default)]
pub struct ClientTlsConfig {
    /// PEM certificate chain; empty (the default) leaves client TLS off.
    pub cert: String,
    /// PEM private key of `cert`.
    pub key: String,
    /// Refuse clients that do not upgrade, as MySQL's `require_secure_transport` does.
    pub require: bool,
}

/// How qcache speaks TLS to the server, in the MySQL client's `--ssl-mode` vocabulary.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamTlsMode {
    /// Never.
    #[default]
    Disabled,
    /// When the server offers it; the certificate is not checked.
    Preferred,
    /// Always (a server without TLS is an error); the certificate is not checked.
    Required,
    /// Always, with the certificate chained to `ca`.
    VerifyCa,
    /// Always, with the certificate chained to `ca` and naming the upstream host.
    VerifyIdentity,
}

impl UpstreamTlsMode {
    /// Whether the upstream leg is TLS: never when disabled or without a connector, when
    /// offered under `preferred`, always otherwise. None: the mode requires TLS and the
    /// server does not offer it, so the connection is refused.
    pub fn upstream_tls(self, has_connector: bool, server_offers: bool) -> Option<bool> {
        match (self, has_connector) {
            (UpstreamTlsMode::Disabled, _) | (_, false) => Some(false),
            (UpstreamTlsMode::Preferred, true) => Some(server_offers),
            (_, true) => server_offers.then_some(true),
        }
    }

    pub fn verifies(self) -> bool {
        matches!(
            self,
            UpstreamTlsMode::VerifyCa | UpstreamTlsMode::VerifyIdentity
        )
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamTlsConfig {
    pub mode: UpstreamTlsMode,
    /// PEM CA certificates the server's certificate must chain to (verify_* modes).
    pub ca: String,
    /// Optional PEM client certificate and key, for servers that require X509 users.
    pub cert: String,
    pub key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what} {path:?}: {message}")]
    File {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("tls: {0}")]
    Rustls(#[from] rustls::Error),
}

/// What a session needs to speak TLS, built from one `[tls]` section.
pub struct Contexts {
    /// Present when qcache terminates client TLS.
    pub acceptor: Option<TlsAcceptor>,
    pub require_client: bool,
    /// Present when the upstream mode is not `disabled`.
    pub connector: Option<TlsConnector>,
    pub upstream_mode: UpstreamTlsMode,
}

impl Contexts {
    /// Loads the certificates and keys `cfg` names and checks they fit together.
    pub fn build(cfg: &TlsConfig) -> Result<Contexts, TlsError> {
        let provider = Arc::new(ring::default_provider());
        let c = &cfg.client;
        if c.cert.is_empty() != c.key.is_empty() {
            return Err(TlsError::Invalid(
                "tls.client.cert and tls.client.key go together".into(),
            ));
        }
        if c.require && c.cert.is_empty() {
            return Err(TlsError::Invalid(
                "tls.client.require needs tls.client.cert and tls.client.key".into(),
            ));
        }
        let acceptor = if c.cert.is_empty() {
            None
        } else {
            let sc = ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()?
                .with_no_client_auth()
                .with_single_cert(load_certs(&c.cert, "tls.client.cert")?, load_key(&c.key)?)?;
            Some(TlsAcceptor::from(Arc::new(sc)))
        };

        let u = &cfg.upstream;
        if u.cert.is_empty() != u.key.is_empty() {
            return Err(TlsError::Invalid(
                "tls.upstream.cert and tls.upstream.key go together".into(),
            ));
        }
        if u.mode.verifies() && u.ca.is_empty() {
            return Err(TlsError::Invalid(
                "tls.upstream.mode verify_ca and verify_identity need tls.upstream.ca".into(),
            ));
        }
        let connector = if u.mode == UpstreamTlsMode::Disabled {
            None
        } else {
            let verifier: Arc<dyn ServerCertVerifier> = if u.mode.verifies() {
                let mut roots = RootCertStore::empty();
                for c in load_certs(&u.ca, "tls.upstream.ca")? {
                    roots.add(c)?;
                }
                let inner =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|e| TlsError::Invalid(format!("tls.upstream.ca: {e}")))?;
                Arc::new(ChainVerifier {
                    inner,
                    check_name: u.mode == UpstreamTlsMode::VerifyIdentity,
                })
            } else {
                Arc::new(AnyCert(provider.clone()))
            };
            let b = ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()?
                .dangerous()
                .with_custom_certificate_verifier(verifier);
            let cc = if u.cert.is_empty() {
                b.with_no_client_auth()
            } else {
                b.with_client_auth_cert(
                    load_certs(&u.cert, "tls.upstream.cert")?,
                    load_key(&u.key)?,
                )?
            };
            // Plain clients of a TLS upstream need qcache's RSA key; make it before they do.
            sha2::prepare();
            Some(TlsConnector::from(Arc::new(cc)))
        };
        Ok(Contexts {
            acceptor,
            require_client: c.require,
            connector,
            upstream_mode: u.mode,
        })
    }
}

/// Built contexts by configuration. A few entries: proxies in one process (tests) may run
/// different configurations side by side.
static MEMO: Mutex<Vec<(TlsConfig, Arc<Contexts>)>> = Mutex::new(Vec::new());

/// The contexts for `cfg`, built on first use and kept while the configuration stays the
/// same; `None` when TLS is off on both legs, without taking any lock (the usual case).
/// A reload with other paths or modes builds new ones; sessions already open keep theirs.
pub fn contexts(cfg: &TlsConfig) -> Result<Option<Arc<Contexts>>, TlsError> {
    if cfg.client.cert.is_empty() && cfg.upstream.mode == UpstreamTlsMode::Disabled {
        return Ok(None);
    }
    let mut memo = MEMO.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, c)) = memo.iter().find(|(k, _)| k == cfg) {
        return Ok(Some(c.clone()));
    }
    let built = Arc::new(Contexts::build(cfg)?);
    if memo.len() >= 8 {
        memo.remove(0);
    }
    memo.push((cfg.clone(), built.clone()));
    Ok(Some(built))
}

/// Forgets the built contexts, so that the next session re-reads the certificate files
/// (a SIGHUP after replacing them in place).
pub fn forget() {
    MEMO.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

fn load_certs(path: &str, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let err = |message: String| TlsError::File {
        what,
        path: path.to_string(),
        message,
    };
    let f = File::open(path).map_err(|e| err(e.to_string()))?;
    let certs = CertificateDer::pem_reader_iter(BufReader::new(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no PEM certificate in it".into()));
    }
    Ok(certs)
}

fn load_key(path: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    let err = |message: String| TlsError::File {
        what: "private key",
        path: path.to_string(),
        message,
    };
    let f = File::open(path).map_err(|e| err(e.to_string()))?;
    PrivateKeyDer::from_pem_reader(BufReader::new(f)).map_err(|e| match e {
        pem::Error::NoItemsFound => err("no PEM private key in it".into()),
        e => err(e.to_string()),
    })
}

/// The name qcache expects the upstream's certificate to carry: the host of
/// `server.upstream`. Outside verify_identity it is only sent as SNI.
pub fn upstream_name(addr: &str) -> ServerName<'static> {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("localhost").expect("a valid DNS name"))
}

/// `preferred` and `required`: encryption without authentication of the server, which is
/// what those MySQL ssl-modes mean (the server's certificate is typically self-signed by
/// `mysql_ssl_rsa_setup` and never checked). The handshake signature is still verified, so
/// the peer holds the key of the certificate it showed; only the chain and name are not.
/// One exception: a certificate webpki cannot read at all (X.509 version 1, as MariaDB's
/// and many test CAs issue) is accepted unchecked, as MySQL clients accept it in these
/// modes. Nothing is lost by it: the mode authenticates no server, so an impostor could as
/// well show a certificate of its own.
#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl AnyCert {
    fn signature(
        checked: Result<HandshakeSignatureValid, rustls::Error>,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match checked {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(_)))
            | Err(rustls::Error::InvalidCertificate(CertificateError::BadEncoding)) => {
                Ok(HandshakeSignatureValid::assertion())
            }
            r => r,
        }
    }
}

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        AnyCert::signature(rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        AnyCert::signature(rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        ))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify_ca` checks the chain but not the name (MySQL's meaning); `verify_identity` both.
#[derive(Debug)]
struct ChainVerifier {
    inner: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for ChainVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per mode, connector and server offer: TLS, plain, or refused (None).
    #[test]
    fn the_upstream_leg_follows_the_mode() {
        use UpstreamTlsMode::*;
        let cases = [
            (Disabled, true, true, Some(false)),
            (Preferred, true, true, Some(true)),
            (Preferred, true, false, Some(false)),
            (Required, true, true, Some(true)),
            (Required, true, false, None),
            (VerifyCa, true, false, None),
            (VerifyIdentity, true, true, Some(true)),
            // No connector built (no [tls.upstream]): plain, whatever the mode.
            (Required, false, true, Some(false)),
            (VerifyIdentity, false, false, Some(false)),
        ];
        for (mode, connector, offers, want) in cases {
            assert_eq!(
                mode.upstream_tls(connector, offers),
                want,
                "{mode:?} connector={connector} offers={offers}"
            );
        }
    }

    /// Only the verify modes check the server's certificate.
    #[test]
    fn only_verify_modes_check_the_certificate() {
        use UpstreamTlsMode::*;
        for (mode, want) in [
            (Disabled, false),
            (Preferred, false),
            (Required, false),
            (VerifyCa, true),
            (VerifyIdentity, true),
        ] {
            assert_eq!(mode.verifies(), want, "{mode:?}");
        }
    }

    /// The name TLS checks is the upstream's host: port and IPv6 brackets dropped; a name
    /// rustls cannot take falls back to localhost.
    #[test]
    fn upstream_names_drop_the_port() {
        let cases = [
            ("db.example.com:3306", "db.example.com"),
            ("db.example.com", "db.example.com"),
            ("[::1]:3306", "::1"),
            ("127.0.0.1:3306", "127.0.0.1"),
            ("bad name:3306", "localhost"),
        ];
        for (addr, want) in cases {
            let got = upstream_name(addr);
            let want = ServerName::try_from(want.to_string()).unwrap();
            assert_eq!(got, want, "{addr}");
        }
    }
}
