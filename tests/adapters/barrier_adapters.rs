// Barrier and double barrier through both adapters against a real ZooKeeper: the same
// scenario, the same meaning in `zk-recipes-blocking` and `zk-recipes-tokio`.

use std::time::{Duration, Instant};

use zk::Error;
use zk_recipes_testing::{expire_session, TestServer};

const LONG: Duration = Duration::from_secs(20);

#[test]
fn barrier_set_wait_remove() {
    run(barrier_set_wait_remove_on(&server()));
}

#[form]
async fn barrier_set_wait_remove_on(server: &TestServer) {
    let cs = server.connect_string();
    let a = connect(&cs).await;
    let path = "/barrier/gate";
    assert!(
        a.barrier(path).wait_timeout(Duration::ZERO).await.unwrap(),
        "not set: released"
    );
    a.barrier(path).set().await.unwrap();
    a.barrier(path).set().await.unwrap(); // already set is fine
    let t0 = Instant::now();
    assert!(!a
        .barrier(path)
        .wait_timeout(Duration::from_millis(200))
        .await
        .unwrap());
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert!(t0.elapsed() < Duration::from_secs(5), "deadline honoured");
    let b = connect(&cs).await;
    let remover = {
        let b = b.clone();
        spawn(move || async move {
            sleep(Duration::from_millis(300)).await;
            b.barrier(path).remove().await.unwrap();
        })
    };
    a.barrier(path)
        .wait()
        .await
        .expect("released by the removal");
    remover.join().await;
    a.barrier(path).remove().await.unwrap(); // already gone is fine
                                             // Set again after we were released: a new wait waits again.
    b.barrier(path).set().await.unwrap();
    assert!(!a
        .barrier(path)
        .wait_timeout(Duration::from_millis(100))
        .await
        .unwrap());
    b.barrier(path).remove().await.unwrap();
    assert!(a.exists(path).await.unwrap().is_none());
}

/// Runs `n` participants (separate sessions) through enter and leave; returns each
/// one's (entered, left, late).
#[form]
async fn round(clients: &[zk::Client], path: &str, n: u32) -> Vec<(bool, bool, Option<bool>)> {
    let mut tasks = Vec::new();
    for c in clients {
        let mut m = c.double_barrier(path, n);
        tasks.push(spawn(move || async move {
            let entered = m.enter_timeout(LONG).await.unwrap();
            let late = m.entered_late();
            let left = m.leave_timeout(LONG).await.unwrap();
            (entered, left, late)
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.join().await);
    }
    out
}

#[form]
async fn connect_n(server: &TestServer, n: usize) -> Vec<zk::Client> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(connect(&server.connect_string()).await);
    }
    clients
}

#[test]
fn double_barrier_enters_and_leaves_together_and_cleans_up() {
    run(double_barrier_enters_and_leaves_together_and_cleans_up_on(
        &server(),
    ));
}

#[form]
async fn double_barrier_enters_and_leaves_together_and_cleans_up_on(server: &TestServer) {
    let clients = connect_n(server, 4).await;
    let path = "/db/together";
    for (entered, left, _) in round(&clients, path, 4).await {
        assert!(entered && left, "{NAME}");
    }
    assert!(
        clients[0].exists(path).await.unwrap().is_none(),
        "{NAME}: the last leaver removed b"
    );
}

#[test]
fn a_late_participant_is_released_and_counted_in_leave() {
    run(a_late_participant_is_released_and_counted_in_leave_on(
        &server(),
    ));
}

#[form]
async fn a_late_participant_is_released_and_counted_in_leave_on(server: &TestServer) {
    let clients = connect_n(server, 3).await;
    let path = "/db/late";
    let mut a = clients[0].double_barrier(path, 2);
    let mut b = clients[1].double_barrier(path, 2);
    let bt = spawn(move || async move {
        assert!(b.enter_timeout(LONG).await.unwrap());
        b
    });
    assert!(a.enter_timeout(LONG).await.unwrap());
    let mut b = bt.join().await;
    // B starts leaving; A is still working. C arrives now: released at once, late.
    let bl = spawn(move || async move {
        let left = b.leave_timeout(LONG).await.unwrap();
        (left, Instant::now())
    });
    sleep(Duration::from_millis(200)).await;
    let mut c = clients[2].double_barrier(path, 2);
    let t0 = Instant::now();
    assert!(c.enter_timeout(Duration::from_secs(5)).await.unwrap());
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(c.entered_late(), Some(true));
    // Nobody completes leave while C (a member of the round) is still in.
    sleep(Duration::from_millis(300)).await;
    assert!(!bl.is_finished(), "{NAME}: B waits for A and C");
    let al = spawn(move || async move { a.leave_timeout(LONG).await.unwrap() });
    sleep(Duration::from_millis(300)).await;
    assert!(
        !bl.is_finished() && !al.is_finished(),
        "{NAME}: they wait for C"
    );
    let c_left = Instant::now();
    assert!(c.leave_timeout(LONG).await.unwrap());
    assert!(al.join().await);
    let (left, at) = bl.join().await;
    assert!(left && at >= c_left);
    assert!(clients[0].exists(path).await.unwrap().is_none());
}

#[test]
fn deadlines_are_honoured_and_nothing_is_left() {
    run(deadlines_are_honoured_and_nothing_is_left_on(&server()));
}

#[form]
async fn deadlines_are_honoured_and_nothing_is_left_on(server: &TestServer) {
    let clients = connect_n(server, 2).await;
    let path = "/db/deadlines";
    let mut a = clients[0].double_barrier(path, 2);
    let t0 = Instant::now();
    assert!(!a.enter_timeout(Duration::from_millis(300)).await.unwrap());
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5));
    // Our node is removed after NotEntered.
    let mut gone = false;
    for _ in 0..50 {
        if clients[1]
            .get_children(path)
            .await
            .unwrap_or_default()
            .is_empty()
        {
            gone = true;
            break;
        }
        sleep(Duration::from_millis(20)).await;
    }
    assert!(
        gone,
        "{NAME}: the node of an attempt that timed out is removed"
    );
    // Leave with a deadline: B entered with A, A never leaves; B's leave times out.
    let mut a = clients[0].double_barrier(path, 2);
    let mut b = clients[1].double_barrier(path, 2);
    let at = spawn(move || async move {
        assert!(a.enter_timeout(LONG).await.unwrap());
        a
    });
    assert!(b.enter_timeout(LONG).await.unwrap());
    let mut a = at.join().await;
    let t0 = Instant::now();
    let b_left = b.leave_timeout(Duration::from_millis(300)).await.unwrap();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(5));
    assert!(
        !b_left,
        "{NAME}: B cannot have left while A is in the barrier"
    );
    // A leaves alone (B's node was removed after NotLeft) and cleans up.
    assert!(a.leave_timeout(LONG).await.unwrap());
    assert!(clients[0].exists(path).await.unwrap().is_none());
}

#[test]
fn the_path_is_reused_round_after_round() {
    run(the_path_is_reused_round_after_round_on(&server()));
}

#[form]
async fn the_path_is_reused_round_after_round_on(server: &TestServer) {
    let clients = connect_n(server, 3).await;
    let path = "/db/rounds";
    for _ in 0..3 {
        for (entered, left, late) in round(&clients, path, 3).await {
            assert!(entered && left, "{NAME}");
            assert_eq!(late, Some(false), "{NAME}");
        }
    }
    // A straggler after the last round is a participant of the next round: alone, it
    // is not released.
    let mut m = clients[0].double_barrier(path, 3);
    assert!(!m.enter_timeout(Duration::from_millis(300)).await.unwrap());
}

#[test]
fn a_session_expiring_mid_barrier_is_told_and_the_others_go_on() {
    run(a_session_expiring_mid_barrier_is_told_and_the_others_go_on_on(&server()));
}

#[form]
async fn a_session_expiring_mid_barrier_is_told_and_the_others_go_on_on(server: &TestServer) {
    let clients = connect_n(server, 3).await;
    let path = "/db/expiry";
    // Waiting in enter: told.
    let mut w = clients[0].double_barrier(path, 3);
    let (sid, pw) = (clients[0].session_id(), clients[0].session_password());
    let wt = spawn(move || async move { w.enter_timeout(LONG).await });
    sleep(Duration::from_millis(300)).await;
    expire_session(server.addr(), sid, &pw).unwrap();
    assert_eq!(wt.join().await, Err(Error::SessionExpired), "{NAME}");
    // Entered, then A's session expires: A's leave is told, B and C leave without A.
    let d = connect(&server.connect_string()).await;
    let (sid, pw) = (d.session_id(), d.session_password());
    let mut entered = Vec::new();
    for c in [&d, &clients[1], &clients[2]] {
        let mut m = c.double_barrier(path, 3);
        entered.push(spawn(move || async move {
            assert!(m.enter_timeout(LONG).await.unwrap());
            m
        }));
    }
    let mut members = Vec::new();
    for h in entered {
        members.push(h.join().await);
    }
    expire_session(server.addr(), sid, &pw).unwrap();
    let mut a = members.remove(0);
    let mut others = Vec::new();
    for mut m in members {
        others.push(spawn(move || async move { m.leave_timeout(LONG).await }));
    }
    for o in others {
        assert_eq!(o.join().await, Ok(true), "{NAME}");
    }
    assert_eq!(
        a.leave_timeout(LONG).await,
        Err(Error::SessionExpired),
        "{NAME}"
    );
    assert!(clients[1].exists(path).await.unwrap().is_none());
}
