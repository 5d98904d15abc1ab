// What a user's test can do with the embedded server (`zk_recipes_testing::EmbeddedServer`,
// issue 37): cause each fault with one call and watch its code observe it through each
// form — a lock holder told `Suspended`, `Reconnected`, `Lost`; the status stream and
// `status()` in step; a refused request retried by a recipe; a lagging follower's stale
// read until a `sync`. (The protocol-level behaviour of each fault:
// `tests/server/embedded_server.rs`.)

use std::time::{Duration, Instant};

use zk::{ErrorCode, LockChange, LostReason, Status};
use zk_recipes_testing::EmbeddedServer;

/// Long enough for any change here: they come within a second or two.
const WAIT: Duration = Duration::from_secs(10);

fn embedded() -> EmbeddedServer {
    EmbeddedServer::start().expect("an embedded server")
}

/// A client of `server` with `session`-long sessions (the scenarios' other options).
#[form]
async fn client(server: &EmbeddedServer, session: Duration) -> zk::Client {
    zk::connect(
        &server.connect_string(),
        options().session_timeout(session),
    )
    .await
    .unwrap_or_else(|e| panic!("{NAME}: connect: {e}"))
}

/// The changes a held lock reports until (and with) the first that `last` accepts.
#[form]
async fn changes_until(
    guard: &mut zk::LockGuard,
    last: fn(&LockChange) -> bool,
) -> Vec<LockChange> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match guard.changed_timeout(left).await {
            Some(c) => {
                let done = last(&c);
                seen.push(c);
                if done {
                    return seen;
                }
            }
            None => panic!("{NAME}: lock changes {seen:?}, then nothing within {WAIT:?}"),
        }
    }
}

#[test]
fn an_expired_session_loses_its_lock_and_a_new_session_takes_over() {
    run(an_expired_session_loses_its_lock_and_a_new_session_takes_over_on());
}

#[form]
async fn an_expired_session_loses_its_lock_and_a_new_session_takes_over_on() {
    let server = embedded();
    let zk = client(&server, Duration::from_secs(6)).await;
    let first = zk.session_id();
    let mut guard = zk.lock("/faults/expiry").acquire().await.unwrap();
    assert!(server.expire_session(first));
    // The holder stops acting at once (its connection is closed), then hears the expiry
    // when the client reconnects.
    let seen = changes_until(&mut guard, |c| matches!(c, LockChange::Lost(_))).await;
    assert_eq!(
        seen,
        [
            LockChange::Suspended,
            LockChange::Lost(LostReason::SessionExpired)
        ],
        "{NAME}"
    );
    assert!(!guard.is_held());
    // The client renews: a new session, and status() says so as the stream did.
    let renewed = wait_status(&zk, WAIT, |s| {
        matches!(s, Status::Connected { session_id, .. } if *session_id != 0)
    })
    .await
    .expect("a new session");
    assert!(matches!(renewed, Status::Connected { session_id, .. } if session_id != first));
    assert_eq!(zk.status(), renewed, "{NAME}");
    // The old holder's node went with its session: the lock is free.
    let again = zk.lock("/faults/expiry").try_acquire().await.unwrap();
    assert!(again.is_some(), "{NAME}: the expired holder's node is gone");
}

#[test]
fn dropped_connections_suspend_then_reconnect_the_same_session() {
    run(dropped_connections_suspend_then_reconnect_the_same_session_on());
}

#[form]
async fn dropped_connections_suspend_then_reconnect_the_same_session_on() {
    let server = embedded();
    let zk = client(&server, Duration::from_secs(6)).await;
    let id = zk.session_id();
    let mut guard = zk.lock("/faults/drop").acquire().await.unwrap();
    let mut states = zk.status_stream();
    assert_eq!(server.drop_connections(), 1);
    let seen = changes_until(&mut guard, |c| *c == LockChange::Reconnected).await;
    assert_eq!(
        seen,
        [LockChange::Suspended, LockChange::Reconnected],
        "{NAME}"
    );
    assert!(guard.is_held());
    // The stream saw the same: Suspended, then Connected with the same session (after
    // the status it started with).
    let mut stream = Vec::new();
    loop {
        let s = states.next_timeout(WAIT).await.expect("a status");
        stream.push(s);
        if s.is_connected() && stream.contains(&Status::Suspended) {
            break;
        }
    }
    let n = stream.len();
    assert_eq!(stream[n - 2], Status::Suspended, "{NAME}: {stream:?}");
    assert!(
        matches!(stream[n - 1], Status::Connected { session_id, .. } if session_id == id),
        "{NAME}: {stream:?}"
    );
    assert_eq!(zk.session_id(), id);
    guard.release().await.unwrap();
}

#[test]
fn a_frozen_server_suspends_the_holder_until_it_resumes() {
    run(a_frozen_server_suspends_the_holder_until_it_resumes_on());
}

#[form]
async fn a_frozen_server_suspends_the_holder_until_it_resumes_on() {
    let server = embedded();
    // 3 s sessions: the client gives up on a silent connection after 2 s (Suspended);
    // the server, resumed at once, has not yet given up on the session.
    let zk = client(&server, Duration::from_secs(3)).await;
    let mut guard = zk.lock("/faults/freeze").acquire().await.unwrap();
    server.freeze();
    let seen = changes_until(&mut guard, |c| *c == LockChange::Suspended).await;
    assert_eq!(seen, [LockChange::Suspended], "{NAME}");
    assert_eq!(
        wait_status(&zk, WAIT, |s| *s == Status::Suspended).await,
        Some(Status::Suspended)
    );
    server.resume();
    let seen = changes_until(&mut guard, |c| *c != LockChange::Suspended).await;
    assert_eq!(seen, [LockChange::Reconnected], "{NAME}");
    guard.release().await.unwrap();
}

#[test]
fn a_server_frozen_past_the_session_timeout_loses_the_holder() {
    run(a_server_frozen_past_the_session_timeout_loses_the_holder_on());
}

#[form]
async fn a_server_frozen_past_the_session_timeout_loses_the_holder_on() {
    let server = embedded();
    let zk = client(&server, Duration::from_secs(1)).await;
    let first = zk.session_id();
    let mut guard = zk.lock("/faults/freeze-expiry").acquire().await.unwrap();
    server.freeze_for(Duration::from_millis(2500));
    let seen = changes_until(&mut guard, |c| matches!(c, LockChange::Lost(_))).await;
    assert_eq!(
        seen,
        [
            LockChange::Suspended,
            LockChange::Lost(LostReason::SessionExpired)
        ],
        "{NAME}"
    );
    // Once thawed the server expired the session too (its ephemeral node went).
    let renewed = wait_status(&zk, WAIT, |s| {
        matches!(s, Status::Connected { session_id, .. } if *session_id != 0)
    })
    .await
    .expect("a new session");
    assert!(matches!(renewed, Status::Connected { session_id, .. } if session_id != first));
    assert!(!server.sessions().contains(&first));
    assert_eq!(zk.get_children("/faults/freeze-expiry").await.unwrap(), Vec::<String>::new());
}

#[test]
fn throttled_requests_fail_raw_calls_and_recipes_retry_them() {
    run(throttled_requests_fail_raw_calls_and_recipes_retry_them_on());
}

#[form]
async fn throttled_requests_fail_raw_calls_and_recipes_retry_them_on() {
    let server = embedded();
    let zk = client(&server, Duration::from_secs(6)).await;
    // A raw call reports the refusal; nothing was applied.
    server.throttle_next(1);
    let r = zk
        .create("/faults/t", "x", &zk::CreateOptions::default())
        .await;
    assert_eq!(
        r.map_err(|e| e.code()),
        Err(Some(ErrorCode::Throttled)),
        "{NAME}"
    );
    assert_eq!(zk.exists("/faults").await.unwrap(), None);
    // A recipe retries refused requests until they pass: the lock is taken.
    server.throttle_next(3);
    let mut guard = zk.lock("/faults/throttled").acquire().await.unwrap();
    assert!(guard.is_held());
    guard.release().await.unwrap();
    // Any other refusal a server may give a request, the same way.
    server.fail_next(1, ErrorCode::SystemError);
    assert_eq!(
        zk.exists("/faults/throttled")
            .await
            .map(|s| s.is_some())
            .map_err(|e| e.code()),
        Err(Some(ErrorCode::SystemError))
    );
}

#[test]
fn reap_now_deletes_an_empty_lock_directory_and_its_watch_fires() {
    run(reap_now_deletes_an_empty_lock_directory_and_its_watch_fires_on());
}

#[form]
async fn reap_now_deletes_an_empty_lock_directory_and_its_watch_fires_on() {
    let server = embedded();
    let zk = client(&server, Duration::from_secs(6)).await;
    // The lock's directory is made as a container: empty after the release, and gone
    // at the next container check.
    zk.lock("/faults/reap").acquire().await.unwrap().release().await.unwrap();
    let (stat, gone) = zk.exists_watch("/faults/reap").await.unwrap();
    assert!(stat.is_some());
    server.reap_now();
    let event = gone.wait_timeout(WAIT).await.unwrap();
    assert_eq!(event.event_type, zk::EventType::NodeDeleted, "{NAME}");
    assert_eq!(zk.exists("/faults/reap").await.unwrap(), None);
}

#[test]
fn a_lagging_follower_reads_stale_until_a_sync_and_a_holder_verifies_behind_one() {
    run(a_lagging_follower_reads_stale_until_a_sync_and_a_holder_verifies_behind_one_on());
}

#[form]
async fn a_lagging_follower_reads_stale_until_a_sync_and_a_holder_verifies_behind_one_on() {
    let server = embedded();
    let holder = client(&server, Duration::from_secs(6)).await;
    let reader = client(&server, Duration::from_secs(6)).await;
    let writer = client(&server, Duration::from_secs(6)).await;
    writer
        .create_all("/faults/flag", "up", &zk::CreateOptions::default())
        .await
        .unwrap();
    reader.exists("/faults/flag").await.unwrap().expect("seen");
    let mut guard = holder.lock("/faults/lagging").acquire().await.unwrap();
    // Both sessions are moved to a follower that stops applying transactions now.
    let mut states = reader.status_stream();
    assert!(server.lag_session(holder.session_id(), Duration::from_secs(30)));
    assert!(server.lag_session(reader.session_id(), Duration::from_secs(30)));
    // Written after: the follower has not applied it.
    writer.delete("/faults/flag", None).await.unwrap();
    // The holder verifies its node behind a `sync` on its new connection: held.
    let seen = changes_until(&mut guard, |c| *c != LockChange::Suspended).await;
    assert_eq!(seen, [LockChange::Suspended, LockChange::Reconnected], "{NAME}");
    assert!(guard.is_held());
    // The reader (no recipe, no sync of its own) reads the follower's stale tree.
    wait_for_reconnect(&mut states).await;
    assert!(
        reader.exists("/faults/flag").await.unwrap().is_some(),
        "{NAME}: a stale read"
    );
    reader.sync("/faults/flag").await.unwrap();
    assert_eq!(reader.exists("/faults/flag").await.unwrap(), None, "{NAME}");
    guard.release().await.unwrap();
}

/// Reads the stream until it says Connected after a Suspended.
#[form]
async fn wait_for_reconnect(states: &mut zk::StatusStream) {
    let deadline = Instant::now() + WAIT;
    let mut suspended = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match states.next_timeout(left).await.expect("a status") {
            Status::Suspended => suspended = true,
            Status::Connected { .. } if suspended => return,
            _ => {}
        }
    }
}
