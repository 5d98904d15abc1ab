//! Certificates made at test time (with `rcgen`) for servers with a secure client
//! port and for the clients that talk to them: a CA, server and client certificates
//! signed by it, expired ones, and PEM files ZooKeeper reads as key and trust stores.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

fn err(e: rcgen::Error) -> io::Error {
    io::Error::other(format!("rcgen: {e}"))
}

/// A certificate authority made for one test.
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

/// A certificate and its key, in PEM.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The certificate (`CERTIFICATE` block).
    pub cert_pem: String,
    /// Its private key (PKCS#8 `PRIVATE KEY` block).
    pub key_pem: String,
}

impl Issued {
    /// Key then certificate in one PEM text: ZooKeeper's `ssl.keyStore.type=PEM` store.
    pub fn key_store_pem(&self) -> String {
        format!("{}{}", self.key_pem, self.cert_pem)
    }
}

/// How long a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// From 1975 to 4096 (rcgen's default).
    Current,
    /// From 2000 to 2001: expired.
    Expired,
}

impl TestCa {
    /// A new CA whose subject is `CN=<name>`.
    pub fn new(name: &str) -> io::Result<TestCa> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(err)?;
        let pem = params.clone().self_signed(&key).map_err(err)?.pem();
        Ok(TestCa { params, key, pem })
    }

    /// The CA certificate in PEM (a trust store, for ZooKeeper and for clients).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A certificate for subject `CN=<cn>` with these subject alternative names (DNS
    /// names or IP addresses), valid for server and client authentication.
    pub fn issue(&self, cn: &str, sans: &[&str], validity: Validity) -> io::Result<Issued> {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).map_err(err)?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if validity == Validity::Expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().map_err(err)?;
        let issuer = self.params.clone().self_signed(&self.key).map_err(err)?;
        let cert = params.signed_by(&key, &issuer, &self.key).map_err(err)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn server(&self) -> io::Result<Issued> {
        self.issue("zookeeper", &["localhost", "127.0.0.1"], Validity::Current)
    }
}

/// Whether the server asks for client certificates (`ssl.clientAuth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client without a valid certificate is refused (mutual TLS).
    Need,
    /// A certificate is asked for but not required.
    Want,
    /// No certificate is asked for.
    None,
}

/// A secure client port for [`crate::TestServer`]: the server's key store and the
/// trust store it checks client certificates against (PEM files).
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// Key and certificate (PEM), e.g. [`Issued::key_store_pem`].
    pub key_store: PathBuf,
    /// CA certificates the server trusts for client certificates (PEM).
    pub trust_store: PathBuf,
    /// `ssl.clientAuth`.
    pub client_auth: ClientAuth,
    /// Turns on the `x509` ACL scheme (`X509AuthenticationProvider`): a client's
    /// certificate subject (`CN=...`) is its identity.
    pub x509_acls: bool,
}

impl ServerTls {
    /// Writes `server`'s key store and `ca`'s trust store into `dir`.
    pub fn write(
        dir: &Path,
        ca: &TestCa,
        server: &Issued,
        client_auth: ClientAuth,
    ) -> io::Result<ServerTls> {
        let key_store = dir.join("server-keystore.pem");
        let trust_store = dir.join("server-truststore.pem");
        fs::write(&key_store, server.key_store_pem())?;
        fs::write(&trust_store, ca.pem())?;
        Ok(ServerTls {
            key_store,
            trust_store,
            client_auth,
            x509_acls: false,
        })
    }

    /// The `zoo.cfg` lines for a secure client port `port` (besides the plain one).
    pub(crate) fn config(&self, port: u16) -> Vec<String> {
        let auth = match self.client_auth {
            ClientAuth::Need => "need",
            ClientAuth::Want => "want",
            ClientAuth::None => "none",
        };
        let mut lines = vec![
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory".into(),
            format!("secureClientPort={port}"),
            "secureClientPortAddress=127.0.0.1".into(),
            format!("ssl.keyStore.location={}", self.key_store.display()),
            "ssl.keyStore.type=PEM".into(),
            format!("ssl.trustStore.location={}", self.trust_store.display()),
            "ssl.trustStore.type=PEM".into(),
            format!("ssl.clientAuth={auth}"),
            // Client certificates name clients, not their hosts.
            "ssl.clientHostnameVerification=false".into(),
        ];
        if self.x509_acls {
            lines.push(
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"
                    .into(),
            );
        }
        lines
    }
}

/// A [`crate::TestServer`] with a secure client port, its CA, and the directory that
/// holds its stores (kept for restarts).
pub struct SecureServer {
    /// The server (its plain port stays open for `srvr` and the like).
    pub server: crate::TestServer,
    /// The CA that signed the server's certificate and that it trusts for clients.
    pub ca: TestCa,
    _dir: tempfile::TempDir,
}

impl SecureServer {
    /// Starts a server whose certificate (`localhost`, `127.0.0.1`) is signed by a new
    /// CA, asking clients for certificates as `client_auth` says; `x509_acls` turns on
    /// the `x509` ACL scheme.
    pub fn start(client_auth: ClientAuth, x509_acls: bool) -> io::Result<SecureServer> {
        Self::start_with(client_auth, x509_acls, crate::Options::default())
    }

    /// As [`SecureServer::start`], with these server options (their `tls` is set here).
    pub fn start_with(
        client_auth: ClientAuth,
        x509_acls: bool,
        options: crate::Options,
    ) -> io::Result<SecureServer> {
        let dir = tempfile::Builder::new().prefix("zk-tls-").tempdir()?;
        let ca = TestCa::new("zk-recipes test CA")?;
        let mut tls = ServerTls::write(dir.path(), &ca, &ca.server()?, client_auth)?;
        tls.x509_acls = x509_acls;
        let server = crate::TestServer::start_with(crate::Options {
            tls: Some(tls),
            ..options
        })?;
        Ok(SecureServer {
            server,
            ca,
            _dir: dir,
        })
    }

    /// `127.0.0.1:<secure port>`.
    pub fn connect_string(&self) -> String {
        self.server
            .secure_connect_string()
            .expect("started with a secure port")
    }

    /// A client certificate for `CN=<cn>` signed by the server's CA.
    pub fn client_cert(&self, cn: &str) -> io::Result<Issued> {
        self.ca
            .issue(cn, &["localhost", "127.0.0.1"], Validity::Current)
    }
}

/// A loopback TCP forwarder to `target` that counts the connections made through it
/// (how often a client dialled: a reconnect storm shows as hundreds). Stops on drop.
pub struct CountingProxy {
    addr: std::net::SocketAddr,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CountingProxy {
    /// Starts forwarding to `target` (`host:port`).
    pub fn start(target: &str) -> io::Result<CountingProxy> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped, target) = (accepted.clone(), stop.clone(), target.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ]
                .into_iter()
                .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    std::thread::spawn(move || {
                        let _ = io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Ok(CountingProxy {
            addr,
            accepted,
            stop,
        })
    }

    /// `127.0.0.1:<port>` to connect to instead of the target.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr); // wakes the accept loop
    }
}

/// The TLS reason of a refused connect (`Error::Unreachable` whose last failure was a
/// TLS one), or `None`.
pub fn tls_failure(error: &zk_recipes::client::Error) -> Option<zk_recipes::session::TlsFailure> {
    use zk_recipes::session::{DisconnectReason, TransportError};
    match error {
        zk_recipes::client::Error::Unreachable(hosts) => match hosts.last {
            DisconnectReason::Transport(TransportError::Tls(f))
            | DisconnectReason::ClosedBeforeHandshake(TransportError::Tls(f)) => Some(f),
            _ => None,
        },
        _ => None,
    }
}
