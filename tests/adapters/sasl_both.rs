// SASL DIGEST-MD5 against a real ZooKeeper whose JAAS `Server` section has the users
// (`DigestLoginModule`) and which enforces SASL (`zookeeper.enforce.auth.enabled`), in
// each form: recipes over SASL, a `sasl:` ACL that admits its user and refuses
// another, refusals that name the mechanism and the reason and are not retried, and
// the exchange redone after a server restart.

use std::time::Duration;

use zk::zk_recipes::error::{AuthFailure, SaslFailure};
use zk::{connect, perms, Acl, Client, CreateMode, CreateOptions, Error, ErrorCode, Id, Options};
use zk_recipes_testing::{CountingProxy, Options as ServerOptions, SaslUsers, TestServer};

const WAIT: Duration = Duration::from_secs(20);

/// A server with users alice and bob that refuses clients without SASL.
fn sasl_server() -> TestServer {
    TestServer::start_with(ServerOptions {
        sasl: Some(SaslUsers::new(
            &[("alice", "alice-secret"), ("bob", "bob-secret")],
            true,
        )),
        ..ServerOptions::default()
    })
    .unwrap()
}

fn sasl(user: &str, password: &str) -> Options {
    Options::default()
        .sasl_digest(user, password)
        .connect_timeout(Duration::from_secs(10))
}

#[form]
async fn client(server: &TestServer, user: &str, password: &str) -> Client {
    connect(&server.connect_string(), sasl(user, password))
        .await
        .unwrap()
}

/// Who the server says this client is.
#[form]
async fn identities(zk: &Client) -> Vec<(String, String)> {
    zk.who_am_i()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.auth_scheme, c.user))
        .collect()
}

/// Connects with `options` through a counting proxy; returns the error and the
/// connections the client made in the 3 s that followed the refusal.
#[form]
async fn refused(server: &TestServer, options: Options) -> (Error, usize) {
    let proxy = CountingProxy::start(&server.connect_string()).unwrap();
    // Without SASL the handshake succeeds; the server refuses the first request.
    let error = match connect(&proxy.connect_string(), options.connect_timeout(WAIT)).await {
        Ok(zk) => zk.exists("/").await.unwrap_err(),
        Err(e) => e,
    };
    // A final refusal: no other connection, however long we wait (a retrying client
    // would dial again within its 50 ms … 2 s backoff).
    sleep(Duration::from_secs(3)).await;
    (error, proxy.accepted())
}

#[test]
fn lock_election_and_a_sasl_acl_over_digest_md5_and_refusals_with_reasons() {
    run(over_sasl())
}

#[form]
async fn over_sasl() {
    let server = sasl_server();
    let alice = client(&server, "alice", "alice-secret").await;
    let bob = client(&server, "bob", "bob-secret").await;
    assert!(
        identities(&alice)
            .await
            .contains(&("sasl".into(), "alice".into())),
        "{NAME}: {:?}",
        identities(&alice).await
    );

    // A lock and an election between the two.
    let held = alice.lock("/sasl/lock").acquire().await.unwrap();
    assert!(bob.lock("/sasl/lock").try_acquire().await.unwrap().is_none());
    let waiting = spawn({
        let bob = bob.clone();
        move || async move { bob.lock("/sasl/lock").acquire_timeout(WAIT).await }
    });
    held.release().await.unwrap();
    waiting
        .join()
        .await
        .unwrap()
        .expect("handed over")
        .release()
        .await
        .unwrap();
    let mut first = alice.election("/sasl/election", "a").join().await.unwrap();
    let mut second = bob.election("/sasl/election", "b").join().await.unwrap();
    assert!(first.elected_timeout(WAIT).await.unwrap().is_some());
    assert!(!second.is_leader());
    first.resign().await.unwrap();
    assert!(second.elected_timeout(WAIT).await.unwrap().is_some());

    // `sasl:alice` lets alice in and keeps bob out.
    let acl = vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "sasl".into(),
            id: "alice".into(),
        },
    }];
    alice
        .create(
            "/alice-only",
            "s3cret",
            &CreateOptions::mode(CreateMode::Persistent).acl(acl),
        )
        .await
        .unwrap();
    assert_eq!(&alice.get_data("/alice-only").await.unwrap().0[..], b"s3cret");
    assert_eq!(
        bob.get_data("/alice-only").await.unwrap_err().code(),
        Some(ErrorCode::NoAuth)
    );
    assert_eq!(
        bob.set_data("/alice-only", "mine", None)
            .await
            .unwrap_err()
            .code(),
        Some(ErrorCode::NoAuth)
    );

    // A wrong password: refused with the mechanism and the reason, and not retried.
    let (error, dials) = refused(&server, sasl("alice", "wrong")).await;
    assert_eq!(
        error,
        Error::AuthFailed(AuthFailure::Sasl {
            mechanism: "DIGEST-MD5",
            reason: SaslFailure::Refused(ErrorCode::SessionClosedRequireSaslAuth),
        }),
        "{NAME}: {error}"
    );
    assert!(
        error.to_string().contains("DIGEST-MD5")
            && error.to_string().contains("wrong user or password"),
        "{error}"
    );
    assert_eq!(dials, 1, "{NAME}: a refused client dialled {dials} times");
    // An unknown user, the same.
    let (error, dials) = refused(&server, sasl("mallory", "x")).await;
    assert!(matches!(error, Error::AuthFailed(AuthFailure::Sasl { .. })), "{error}");
    assert_eq!(dials, 1);
    // No SASL at all: the server's refusal ends the client, once.
    let (error, dials) = refused(&server, Options::default()).await;
    assert_eq!(error, Error::AuthFailed(AuthFailure::SaslRequired), "{error}");
    assert_eq!(dials, 1, "{NAME}: a client without SASL dialled {dials} times");
    // The users still work.
    assert!(alice.exists("/alice-only").await.unwrap().is_some());
}

#[test]
fn sasl_is_redone_when_the_session_resumes_after_a_server_restart() {
    run(after_restart())
}

#[form]
async fn after_restart() {
    let mut server = sasl_server();
    let alice = client(&server, "alice", "alice-secret").await;
    let session = alice.session_id();
    let acl = vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "sasl".into(),
            id: "alice".into(),
        },
    }];
    alice
        .create("/eph", "", &CreateOptions::mode(CreateMode::Ephemeral).acl(acl))
        .await
        .unwrap();
    server.restart().unwrap();
    // The same session, authenticated again on its new connection: the server says
    // who it is, and the node only alice may read is readable.
    let mut status = alice.status_stream();
    status
        .wait_for(|s| s.is_connected())
        .await
        .expect("reconnected");
    assert_eq!(alice.session_id(), session);
    assert!(
        identities(&alice)
            .await
            .contains(&("sasl".into(), "alice".into())),
        "{NAME}: {:?}",
        identities(&alice).await
    );
    alice.get_data("/eph").await.unwrap();
    assert_eq!(
        alice.exists("/eph").await.unwrap().unwrap().ephemeral_owner,
        session
    );
}

#[test]
fn sasl_over_tls() {
    run(over_tls())
}

#[form]
async fn over_tls() {
    use zk::Tls;
    use zk_recipes_testing::{ClientAuth, SecureServer};
    let server = SecureServer::start_with(
        ClientAuth::None,
        false,
        ServerOptions {
            sasl: Some(SaslUsers::new(&[("alice", "alice-secret")], true)),
            ..ServerOptions::default()
        },
    )
    .unwrap();
    let tls = || Tls::from_ca_pem(server.ca.pem().as_bytes()).unwrap();
    let alice = connect(
        &server.connect_string(),
        sasl("alice", "alice-secret").tls(tls()),
    )
    .await
    .unwrap();
    assert!(
        identities(&alice)
            .await
            .contains(&("sasl".into(), "alice".into())),
        "{NAME}: {:?}",
        identities(&alice).await
    );
    alice
        .lock("/tls-sasl/lock")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let error = connect(
        &server.connect_string(),
        sasl("alice", "wrong").tls(tls()),
    )
    .await
    .err()
    .unwrap();
    assert!(
        matches!(
            error,
            Error::AuthFailed(AuthFailure::Sasl {
                mechanism: "DIGEST-MD5",
                reason: SaslFailure::Refused(_)
            })
        ),
        "{NAME}: {error}"
    );
}

/// Not part of the test command: the time to establish a session, with and without
/// SASL (`cargo test --release -p zk-recipes-scenarios --test adapters sasl_both -- --ignored --nocapture
/// connect_time`).
#[test]
#[ignore]
fn connect_time_with_and_without_sasl() {
    run(connect_time())
}

#[form]
async fn connect_time() {
    let server = TestServer::start_with(ServerOptions {
        sasl: Some(SaslUsers::new(&[("alice", "alice-secret")], false)),
        ..ServerOptions::default()
    })
    .unwrap();
    const N: usize = 40;
    for (label, options) in [
        ("plain", Options::default()),
        ("sasl", sasl("alice", "alice-secret")),
        ("plain", Options::default()),
        ("sasl", sasl("alice", "alice-secret")),
    ] {
        let mut times = Vec::new();
        for _ in 0..N {
            let t = std::time::Instant::now();
            let zk = connect(&server.connect_string(), options.clone())
                .await
                .unwrap();
            times.push(t.elapsed());
            zk.close().await;
        }
        times.sort();
        println!(
            "{NAME} {label}: median {:?}, p90 {:?} over {N} sessions",
            times[N / 2],
            times[N * 9 / 10]
        );
    }
}
