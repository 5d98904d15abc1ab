// TLS and mutual TLS against a real ZooKeeper with a secure client port (the adapters'
// feature `tls`), in each form: recipes over TLS, refusals with their reasons and
// bounded reconnects, `x509` ACLs, a session resumed over TLS after a server restart,
// every host tried, and frames larger than a TLS record.

use std::time::Duration;

use zk::zk_recipes::session::TlsFailure;
use zk::{
    connect, perms, Acl, Client, CreateMode, CreateOptions, Error, ErrorCode, EventType, Id,
    Options, Tls,
};
use zk_recipes_testing::{
    tls_failure, ClientAuth, CountingProxy, Issued, SecureServer, TestCa, Validity,
};

const WAIT: Duration = Duration::from_secs(20);

/// TLS trusting `ca`, presenting `cert` if given.
fn tls(ca: &TestCa, cert: Option<&Issued>) -> Tls {
    let tls = Tls::from_ca_pem(ca.pem().as_bytes()).unwrap();
    match cert {
        Some(c) => tls
            .client_cert_pem(c.cert_pem.as_bytes(), c.key_pem.as_bytes())
            .unwrap(),
        None => tls,
    }
}

/// A client of `server` presenting a certificate for `cn`.
#[form]
async fn client(server: &SecureServer, cn: &str) -> Client {
    let cert = server.client_cert(cn).unwrap();
    let options = Options::default()
        .tls(tls(&server.ca, Some(&cert)))
        .connect_timeout(Duration::from_secs(10));
    connect(&server.connect_string(), options).await.unwrap()
}

#[test]
fn lock_and_election_over_mutual_tls() {
    run(lock_and_election_over_mutual_tls_())
}

#[form]
async fn lock_and_election_over_mutual_tls_() {
    let server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let a = client(&server, "a").await;
    let b = client(&server, "b").await;

    let held = a.lock("/tls/lock").acquire().await.unwrap();
    assert!(b.lock("/tls/lock").try_acquire().await.unwrap().is_none());
    let waiting = spawn({
        let b = b.clone();
        move || async move { b.lock("/tls/lock").acquire_timeout(WAIT).await }
    });
    held.release().await.unwrap();
    let handed = waiting.join().await.unwrap().expect("handed over");
    assert!(handed.fencing_token() > 0);
    handed.release().await.unwrap();

    let mut first = a.election("/tls/election", "a").join().await.unwrap();
    let mut second = b.election("/tls/election", "b").join().await.unwrap();
    assert!(first.elected_timeout(WAIT).await.unwrap().is_some());
    assert!(!second.is_leader());
    first.resign().await.unwrap();
    assert!(second.elected_timeout(WAIT).await.unwrap().is_some());
}

/// Connects through a counting proxy for 2 s; returns the error and how many times
/// the client dialled.
#[form]
async fn refused(server: &SecureServer, tls: Tls) -> (Error, usize) {
    let proxy = CountingProxy::start(&server.connect_string()).unwrap();
    let options = Options::default()
        .tls(tls)
        .connect_timeout(Duration::from_secs(2));
    let error = connect(&proxy.connect_string(), options)
        .await
        .err()
        .unwrap();
    // Backoff from 50 ms doubling to 2 s: about 6 dials in 2 s; a storm makes hundreds.
    let dials = proxy.accepted();
    assert!((1..=8).contains(&dials), "{NAME}: {dials} dials in 2 s: {error}");
    assert!(
        error.to_string().contains(&proxy.connect_string()),
        "{error}"
    );
    (error, dials)
}

fn tls_reason(error: &Error) -> TlsFailure {
    tls_failure(error).unwrap_or_else(|| panic!("not a TLS failure: {error}"))
}

#[test]
fn wrong_ca_wrong_name_and_expired_client_cert_are_refused_with_reasons() {
    run(refusals())
}

#[form]
async fn refusals() {
    let server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let cert = server.client_cert("client").unwrap();
    // One good handshake first: a fresh JVM's first one can take long on a loaded
    // machine, and the refusals below are timed.
    drop(client(&server, "warm-up").await);

    let other_ca = TestCa::new("another CA").unwrap();
    let (error, _) = refused(&server, tls(&other_ca, Some(&cert))).await;
    assert_eq!(tls_reason(&error), TlsFailure::UnknownIssuer, "{error}");
    assert!(error.to_string().contains("unknown issuer"), "{error}");

    let wrong_name = tls(&server.ca, Some(&cert))
        .server_name("zk.wrong.example")
        .unwrap();
    let (error, _) = refused(&server, wrong_name).await;
    assert_eq!(tls_reason(&error), TlsFailure::NameMismatch, "{error}");

    let expired = server
        .ca
        .issue("client", &["127.0.0.1"], Validity::Expired)
        .unwrap();
    let (error, _) = refused(&server, tls(&server.ca, Some(&expired))).await;
    assert!(
        matches!(tls_reason(&error), TlsFailure::HandshakeRefused(_)),
        "{error}"
    );
    assert!(error.to_string().contains("client certificate"), "{error}");
}

#[test]
fn an_x509_acl_lets_the_certified_client_in_and_keeps_another_out() {
    run(x509_acl())
}

#[form]
async fn x509_acl() {
    let server = SecureServer::start(ClientAuth::Want, true).unwrap();
    let owner = client(&server, "owner").await;
    let intruder = client(&server, "intruder").await;
    let acl = vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "x509".into(),
            id: "CN=owner".into(),
        },
    }];
    owner
        .create(
            "/secret",
            "s3cret",
            &CreateOptions::mode(CreateMode::Persistent).acl(acl),
        )
        .await
        .unwrap();
    let (data, _) = owner.get_data("/secret").await.unwrap();
    assert_eq!(&data[..], b"s3cret");
    assert_eq!(
        intruder.get_data("/secret").await.unwrap_err().code(),
        Some(ErrorCode::NoAuth)
    );
}

#[test]
fn a_session_resumes_over_tls_after_a_server_restart() {
    run(resumes_after_a_restart())
}

#[form]
async fn resumes_after_a_restart() {
    let mut server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let zk = client(&server, "client").await;
    let session = zk.session_id();
    zk.create("/eph", "", &CreateOptions::mode(CreateMode::Ephemeral))
        .await
        .unwrap();
    zk.create("/watched", "v1", &CreateOptions::default())
        .await
        .unwrap();
    let (_, watch) = zk.get_data_watch("/watched").await.unwrap();
    server.server.restart().unwrap();
    // The same session, its ephemeral node and its watch (re-armed by SetWatches).
    let other = client(&server, "other").await;
    other.set_data("/watched", "v2", None).await.unwrap();
    let fired = watch.wait_timeout(WAIT).await.unwrap();
    assert_eq!(fired.event_type, EventType::NodeDataChanged);
    assert_eq!(zk.session_id(), session);
    assert!(zk.exists("/eph").await.unwrap().is_some());
}

#[test]
fn every_host_of_the_connect_string_is_tried_over_tls() {
    run(every_host_is_tried())
}

#[form]
async fn every_host_is_tried() {
    let server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let cert = server.client_cert("client").unwrap();
    // A host where nothing listens, then the secure port (hosts are shuffled: both
    // orders over the seeds).
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    for seed in 0..4 {
        let options = Options::default()
            .tls(tls(&server.ca, Some(&cert)))
            .seed(seed)
            .connect_timeout(Duration::from_secs(10));
        let hosts = format!("{dead},{}", server.connect_string());
        let zk = connect(&hosts, options).await.unwrap();
        assert!(zk.exists("/").await.unwrap().is_some());
        zk.close().await;
    }
}

/// Frames much larger than a TLS record (16 KiB) and than the socket buffers cross
/// intact both ways, many at once.
#[test]
fn large_frames_cross_tls_intact() {
    run(large_frames())
}

#[form]
async fn large_frames() {
    let server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let zk = client(&server, "client").await;
    let data: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
    let writes: Vec<_> = (0..4)
        .map(|i| {
            let (zk, data) = (zk.clone(), data.clone());
            spawn(move || async move {
                zk.create(&format!("/big{i}"), data, &CreateOptions::default())
                    .await
            })
        })
        .collect();
    for w in writes {
        w.join().await.unwrap();
    }
    for i in 0..4 {
        let (got, _) = zk.get_data(&format!("/big{i}")).await.unwrap();
        assert!(got[..] == data[..], "{NAME}: /big{i} differs");
    }
}
