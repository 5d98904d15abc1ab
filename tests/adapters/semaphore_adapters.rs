// The counting semaphore against a real ZooKeeper 3.8, in each form: six workers (each
// on its own session) share `N = 2` leases, 30 acquisitions each, and an atomic
// counter of concurrent holders must never exceed 2; at the end no lease or mutex node
// is left. Then timeouts and drop-to-release, and a holder's session expiring.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk::{LeaseState, LostReason};
use zk_recipes_testing::{expire_session, TestServer};

#[form]
async fn worker(cs: String, holders: Arc<AtomicUsize>, max: Arc<AtomicUsize>) {
    let zk = connect(&cs).await;
    let sem = zk.semaphore("/sem/workers", 2);
    for _ in 0..30 {
        let mut lease = sem.acquire().await.expect("a lease");
        assert!(lease.is_held());
        assert!(lease.path().starts_with("/sem/workers/leases/_c_"));
        let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(now, Ordering::SeqCst);
        assert!(now <= 2, "{NAME}: {now} concurrent holders with 2 leases");
        sleep(Duration::from_millis(3)).await;
        holders.fetch_sub(1, Ordering::SeqCst);
        lease.release().await.expect("released");
    }
    zk.close().await;
}

#[test]
fn six_workers_never_exceed_two_holders() {
    run(six_workers_never_exceed_two_holders_on(&server()));
}

#[form]
async fn six_workers_never_exceed_two_holders_on(server: &TestServer) {
    let cs = server.connect_string();
    let holders = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let started = std::time::Instant::now();
    let mut workers = Vec::new();
    for _ in 0..6 {
        let (cs, h, m) = (cs.clone(), holders.clone(), max.clone());
        workers.push(spawn(move || worker(cs, h, m)));
    }
    for w in workers {
        w.join().await;
    }
    let elapsed = started.elapsed();
    println!(
        "{NAME}: 180 acquisitions in {elapsed:?}: {:.0}/s",
        180.0 / elapsed.as_secs_f64()
    );
    assert_eq!(
        max.load(Ordering::SeqCst),
        2,
        "{NAME}: both leases were used at once"
    );
    let zk = connect(&cs).await;
    assert_eq!(
        zk.get_children("/sem/workers/leases")
            .await
            .expect("leases"),
        Vec::<String>::new()
    );
    assert_eq!(
        zk.get_children("/sem/workers/locks").await.expect("locks"),
        Vec::<String>::new()
    );
}

/// Waits until `dir` has `n` children (2 s at most).
#[form]
async fn children_become(zk: &zk::Client, dir: &str, n: usize) {
    for _ in 0..100 {
        if zk.get_children(dir).await.expect("leases").len() == n {
            return;
        }
        sleep(Duration::from_millis(20)).await;
    }
    panic!("{NAME}: {dir} never had {n} children");
}

#[test]
fn timeouts_and_dropped_leases() {
    run(timeouts_and_dropped_leases_on(&server(), "/sem/timeouts"));
}

#[form]
async fn timeouts_and_dropped_leases_on(server: &TestServer, path: &str) {
    let cs = server.connect_string();
    let a = connect(&cs).await;
    let b = connect(&cs).await;
    let sa = a.semaphore(path, 1);
    let sb = b.semaphore(path, 1);
    let held = sa.acquire().await.expect("the free lease");
    // Full: the other waits at most its timeout, then its nodes go.
    let t = std::time::Instant::now();
    let none = sb
        .acquire_timeout(Duration::from_millis(300))
        .await
        .expect("no error");
    assert!(none.is_none(), "{NAME}");
    assert!(t.elapsed() >= Duration::from_millis(300));
    let leases = format!("{path}/leases");
    children_become(&a, &leases, 1).await;
    // Dropping a lease releases it: the other gets it.
    drop(held);
    let got = sb
        .acquire_timeout(Duration::from_secs(10))
        .await
        .expect("no error")
        .expect("the dropped lease");
    got.release().await.expect("released");
    children_become(&a, &leases, 0).await;
    a.close().await;
    b.close().await;
}

/// A holder's session expires: its lease node goes with it, the holder sees `Lost`, and
/// a waiter on another session gets the lease.
#[test]
fn session_expiry_releases_the_lease() {
    run(session_expiry_releases_the_lease_on(&server()));
}

#[form]
async fn session_expiry_releases_the_lease_on(server: &TestServer) {
    let path = "/sem/expiry";
    let cs = server.connect_string();
    let a = connect(&cs).await;
    let b = connect(&cs).await;
    let mut held = a
        .semaphore(path, 1)
        .acquire()
        .await
        .expect("the free lease");
    let waiter = {
        let b = b.clone();
        spawn(move || async move {
            b.semaphore(path, 1)
                .acquire_timeout(Duration::from_secs(20))
                .await
                .map(|l| l.map(|l| l.path().to_string()))
        })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "{NAME}: the lease is held");
    expire_session(server.addr(), a.session_id(), &a.session_password()).expect("expired");
    let got = waiter.join().await.expect("no error");
    assert!(
        got.is_some(),
        "{NAME}: the expired holder's lease was handed over"
    );
    let mut lost = false;
    for _ in 0..200 {
        if held.state() == LeaseState::Lost(LostReason::SessionExpired) {
            lost = true;
            break;
        }
        sleep(Duration::from_millis(25)).await;
    }
    assert!(lost, "{NAME}: the holder was told its lease is lost");
    assert!(!held.is_held());
    held.release()
        .await
        .expect("releasing a lost lease is a no-op");
    a.close().await;
    b.close().await;
}
