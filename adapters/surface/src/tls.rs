//! TLS settings for both adapters (feature `tls`; both take the same [`Tls`] in
//! [`Options::tls`](crate::Options::tls)): roots from PEM or a caller's
//! `rustls::ClientConfig`, an optional client certificate (mutual TLS), the server name
//! each host is checked against, and how a TLS failure is told to the session (unknown
//! issuer, name mismatch, expired, refused by the server). The drivers run the
//! handshake; this module only configures it and reads its errors.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};
use zk_recipes::session::{TlsFailure, TransportError};

/// TLS for every host of the connect string (set with `Options::tls`; needs the cargo
/// feature `tls`). The connect string stays `host:port,...`: each host's certificate is
/// checked against the host's name (or IP address) as written there, unless
/// [`Tls::server_name`] names the expected server name for all of them.
///
/// See `docs/tls.md` for the server side and examples.
#[derive(Clone)]
pub struct Tls {
    /// The roots given as PEM (`None` for a caller's own config).
    roots: Option<Arc<RootCertStore>>,
    config: Arc<ClientConfig>,
    server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("roots", &self.roots.as_ref().map(|r| r.len()))
            .field(
                "client_cert",
                &self.config.client_auth_cert_resolver.has_certs(),
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

fn invalid(what: impl fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn builder() -> io::Result<rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier>> {
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(invalid)
}

fn certs(pem: &[u8], source: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("{source}: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(format!("{source}: no PEM certificate in it")));
    }
    Ok(certs)
}

fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

impl Tls {
    /// Trusts the CA certificates in this PEM text (one or more `CERTIFICATE` blocks).
    pub fn from_ca_pem(pem: &[u8]) -> io::Result<Tls> {
        Tls::from_roots(certs(pem, "CA PEM")?)
    }

    /// Trusts the CA certificates in this PEM file.
    pub fn from_ca_file(path: impl AsRef<Path>) -> io::Result<Tls> {
        Tls::from_ca_files([path])
    }

    /// Trusts the CA certificates in these PEM files.
    pub fn from_ca_files<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> io::Result<Tls> {
        let mut all = Vec::new();
        for path in paths {
            let path = path.as_ref();
            all.extend(certs(&read(path)?, &path.display().to_string())?);
        }
        Tls::from_roots(all)
    }

    fn from_roots(certs: Vec<CertificateDer<'static>>) -> io::Result<Tls> {
        let mut roots = RootCertStore::empty();
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| invalid(format!("CA certificate: {e}")))?;
        }
        let roots = Arc::new(roots);
        let config = builder()?
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        Ok(Tls {
            roots: Some(roots),
            config: Arc::new(config),
            server_name: None,
        })
    }

    /// Uses the caller's own `rustls` configuration as it is (roots, verifier, client
    /// certificate, protocol versions, ALPN...).
    pub fn from_config(config: Arc<ClientConfig>) -> Tls {
        Tls {
            roots: None,
            config,
            server_name: None,
        }
    }

    /// Presents this client certificate chain and key (PEM text) to the server: mutual
    /// TLS, and the certificate's subject is the client's `x509` identity in ACLs.
    pub fn client_cert_pem(self, cert_chain: &[u8], key: &[u8]) -> io::Result<Tls> {
        let chain = certs(cert_chain, "client certificate PEM")?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| invalid(format!("client key PEM: {e}")))?;
        self.with_client_auth(chain, key)
    }

    /// As [`Tls::client_cert_pem`], from PEM files.
    pub fn client_cert_files(
        self,
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> io::Result<Tls> {
        let (cert_chain, key) = (cert_chain.as_ref(), key.as_ref());
        let chain = certs(&read(cert_chain)?, &cert_chain.display().to_string())?;
        let key = PrivateKeyDer::from_pem_slice(&read(key)?)
            .map_err(|e| invalid(format!("{}: {e}", key.display())))?;
        self.with_client_auth(chain, key)
    }

    fn with_client_auth(
        mut self,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> io::Result<Tls> {
        let Some(roots) = self.roots.clone() else {
            return Err(invalid(
                "a client certificate goes into your own ClientConfig (Tls::from_config)",
            ));
        };
        let config = builder()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid(format!("client certificate and key: {e}")))?;
        self.config = Arc::new(config);
        Ok(self)
    }

    /// Checks every server's certificate against this name instead of the host as
    /// written in the connect string (for IP addresses, or a name the certificate has).
    pub fn server_name(mut self, name: &str) -> io::Result<Tls> {
        let name = ServerName::try_from(name)
            .map_err(|e| invalid(format!("server name {name:?}: {e}")))?
            .to_owned();
        self.server_name = Some(name);
        Ok(self)
    }

    /// The `rustls` configuration in use.
    pub fn config(&self) -> &Arc<ClientConfig> {
        &self.config
    }

    /// The name `host` (`host:port` of the connect string) is checked against.
    pub fn name_for(&self, host: &str) -> Result<ServerName<'static>, TransportError> {
        if let Some(name) = &self.server_name {
            return Ok(name.clone());
        }
        let name = host.rsplit_once(':').map_or(host, |(name, _port)| name);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(name)
            .map(|n| n.to_owned())
            .map_err(|_| TransportError::Tls(TlsFailure::NameMismatch))
    }
}

/// What the session is told of an I/O error on a TLS (or plain) connection: the TLS
/// reason when `rustls` failed, the socket's otherwise.
pub fn transport_error(e: &io::Error) -> TransportError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(e) => TransportError::Tls(failure(e)),
        None => TransportError::from(e),
    }
}

/// `rustls`'s reason, as the session's.
pub fn failure(e: &rustls::Error) -> TlsFailure {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => TlsFailure::UnknownIssuer,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsFailure::NameMismatch
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                TlsFailure::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                TlsFailure::NotYetValid
            }
            _ => TlsFailure::BadCertificate,
        },
        rustls::Error::AlertReceived(alert) => TlsFailure::HandshakeRefused(u8::from(*alert)),
        _ => TlsFailure::Protocol,
    }
}

/// A certificate the client rejected: final for the host in this attempt (its other
/// addresses serve the same certificate), so the session's backoff applies at once.
pub fn is_certificate_error(e: TransportError) -> bool {
    matches!(
        e,
        TransportError::Tls(
            TlsFailure::UnknownIssuer
                | TlsFailure::NameMismatch
                | TlsFailure::Expired
                | TlsFailure::NotYetValid
                | TlsFailure::BadCertificate
                | TlsFailure::HandshakeRefused(_)
        )
    )
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_host_unless_named() {
        let tls = Tls::from_config(Arc::new(
            builder()
                .unwrap()
                .with_root_certificates(RootCertStore::empty())
                .with_no_client_auth(),
        ));
        let name = |t: &Tls, h: &str| t.name_for(h).unwrap().to_str().into_owned();
        assert_eq!(name(&tls, "zk1.example:2281"), "zk1.example");
        assert_eq!(name(&tls, "127.0.0.1:2281"), "127.0.0.1");
        assert_eq!(name(&tls, "[::1]:2281"), "::1");
        let tls = tls.server_name("zk.internal").unwrap();
        assert_eq!(name(&tls, "127.0.0.1:2281"), "zk.internal");
    }

    #[test]
    fn rustls_reasons_become_the_sessions() {
        let io = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let cert = |c| transport_error(&io(rustls::Error::InvalidCertificate(c)));
        assert_eq!(
            cert(CertificateError::UnknownIssuer),
            TransportError::Tls(TlsFailure::UnknownIssuer)
        );
        assert_eq!(
            cert(CertificateError::NotValidForName),
            TransportError::Tls(TlsFailure::NameMismatch)
        );
        assert_eq!(
            cert(CertificateError::Expired),
            TransportError::Tls(TlsFailure::Expired)
        );
        let alert = transport_error(&io(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateExpired,
        )));
        assert_eq!(alert, TransportError::Tls(TlsFailure::HandshakeRefused(45)));
        assert!(alert.to_string().contains("certificate expired"), "{alert}");
        // A plain socket error stays one.
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(transport_error(&reset), TransportError::Reset);
        assert!(is_certificate_error(cert(CertificateError::UnknownIssuer)));
        assert!(!is_certificate_error(TransportError::Reset));
    }

    #[test]
    fn bad_pem_is_refused_with_its_source() {
        let e = Tls::from_ca_pem(b"not pem").unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = Tls::from_ca_file("/nonexistent/ca.pem").unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
