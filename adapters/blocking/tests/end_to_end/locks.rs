//! The lock family through the blocking adapter against a real ZooKeeper 3.8.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::client;
use zk_recipes_blocking::{LockChange, LostReason};
use zk_recipes_testing::TestServer;

#[test]
fn exclusive_across_threads_and_sessions() {
    let server = TestServer::start().unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let zk = client(&server);
            let (inside, tokens) = (inside.clone(), tokens.clone());
            std::thread::spawn(move || {
                for _ in 0..4 {
                    let g = zk.lock("/bl").acquire().unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                    tokens.lock().unwrap().push(g.fencing_token());
                    std::thread::sleep(Duration::from_millis(3));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    g.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(client(&server).get_children("/bl").unwrap().is_empty());
}

#[test]
fn try_timeout_drop_rw_revocation_and_reentrancy() {
    let server = TestServer::start().unwrap();
    let a = client(&server);
    let b = client(&server);
    let held = a.lock("/t").acquire().unwrap();
    assert!(b.lock("/t").try_acquire().unwrap().is_none());
    assert!(b
        .lock("/t")
        .acquire_timeout(Duration::from_millis(150))
        .unwrap()
        .is_none());
    drop(held); // releases without blocking
    let g = b
        .lock("/t")
        .acquire_timeout(Duration::from_secs(10))
        .unwrap()
        .expect("released by drop");
    g.release().unwrap();
    assert!(
        a.get_children("/t").unwrap().is_empty(),
        "no node left by try/timeout"
    );

    let r1 = a.read_lock("/rw").acquire().unwrap();
    let r2 = b.read_lock("/rw").acquire().unwrap();
    assert!(b.write_lock("/rw").try_acquire().unwrap().is_none());
    r1.release().unwrap();
    r2.release().unwrap();
    assert!(b.write_lock("/rw").try_acquire().unwrap().is_some());

    let mut held = a.lock("/rev").revocable().acquire().unwrap();
    let node = format!("/rev/{}", held.node());
    b.revoke(&node, None).unwrap();
    assert_eq!(
        held.changed_timeout(Duration::from_secs(10)),
        Some(LockChange::RevocationRequested)
    );
    b.revoke(&node, Some(Duration::from_millis(50))).unwrap();
    assert_eq!(
        held.changed_timeout(Duration::from_secs(10)),
        Some(LockChange::Lost(LostReason::NodeDeleted))
    );

    let m = a.reentrant_lock("/re");
    let outer = m.acquire().unwrap();
    let inner = m.acquire().unwrap();
    assert_eq!(outer.fencing_token(), inner.fencing_token());
    assert_eq!(a.get_children("/re").unwrap().len(), 1);
    drop(inner);
    assert!(b.lock("/re").try_acquire().unwrap().is_none());
    drop(outer);
    assert!(b
        .lock("/re")
        .acquire_timeout(Duration::from_secs(10))
        .unwrap()
        .is_some());
}
