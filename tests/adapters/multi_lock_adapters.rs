// The multi-lock against a real ZooKeeper 3.8, in each form. Four workers (each on its
// own session) take multi-locks over sets that overlap in a cycle and in opposite
// orders — `[a, b]`, `[b, c]`, `[c, a]`, `[b, a]`: taken in the order given, they
// deadlock — 15 times each: none waits past 30 s (no deadlock), a per-path counter of
// holders never exceeds 1 (no overlap), each path's fencing tokens strictly increase,
// and no lock node is left. Then a timeout while one path is held elsewhere: the path
// taken meanwhile is released by the time the call returns.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zk_recipes_testing::TestServer;

const SETS: [[&str; 2]; 4] = [["a", "b"], ["b", "c"], ["c", "a"], ["b", "a"]];

/// Per path: holders now, and the last fencing token seen.
type Seen = Arc<(Vec<AtomicUsize>, Mutex<HashMap<String, i64>>)>;

#[form]
async fn worker(cs: String, dir: String, set: [&'static str; 2], seen: Seen) {
    let zk = connect(&cs).await;
    let paths: Vec<String> = set.iter().map(|p| format!("{dir}/{p}")).collect();
    let multi = zk.multi_lock(&paths);
    for _ in 0..15 {
        let mut held = multi
            .acquire_timeout(Duration::from_secs(30))
            .await
            .expect("no error")
            .unwrap_or_else(|| panic!("{NAME}: {set:?} waited 30 s: a deadlock"));
        assert!(held.is_held());
        assert_eq!(held.locks().len(), 2);
        for l in held.locks() {
            let i = usize::from(l.path.as_bytes()[l.path.len() - 1] - b'a');
            let now = seen.0[i].fetch_add(1, Ordering::SeqCst) + 1;
            assert_eq!(now, 1, "{NAME}: {} held by {now} at once", l.path);
            let mut last = seen.1.lock().unwrap();
            let before = last.insert(l.path.clone(), l.fencing_token);
            assert!(
                before.is_none_or(|b| b < l.fencing_token),
                "{NAME}: {} token {} after {before:?}",
                l.path,
                l.fencing_token
            );
        }
        sleep(Duration::from_millis(2)).await;
        for l in held.locks() {
            let i = usize::from(l.path.as_bytes()[l.path.len() - 1] - b'a');
            seen.0[i].fetch_sub(1, Ordering::SeqCst);
        }
        held.release().await.expect("released");
    }
    zk.close().await;
}

#[test]
fn overlapping_multi_locks_in_opposite_orders_never_deadlock_or_overlap() {
    run(overlapping_on(&server(), "/ml/cycle"));
}

#[form]
async fn overlapping_on(server: &TestServer, dir: &str) {
    let cs = server.connect_string();
    let seen: Seen = Arc::new((
        (0..3).map(|_| AtomicUsize::new(0)).collect(),
        Mutex::new(HashMap::new()),
    ));
    let started = std::time::Instant::now();
    let mut workers = Vec::new();
    for set in SETS {
        let (cs, dir, seen) = (cs.clone(), dir.to_string(), seen.clone());
        workers.push(spawn(move || worker(cs, dir, set, seen)));
    }
    for w in workers {
        w.join().await;
    }
    println!(
        "{NAME}: 60 multi-lock acquisitions over overlapping sets in {:?}",
        started.elapsed()
    );
    let zk = connect(&cs).await;
    for p in ["a", "b", "c"] {
        assert_eq!(
            zk.get_children(&format!("{dir}/{p}")).await.expect("listed"),
            Vec::<String>::new(),
            "{NAME}: {dir}/{p} left behind"
        );
    }
    zk.close().await;
}

#[test]
fn a_timeout_releases_what_was_taken() {
    run(a_timeout_releases_what_was_taken_on(&server(), "/ml/timeout"));
}

#[form]
async fn a_timeout_releases_what_was_taken_on(server: &TestServer, dir: &str) {
    let cs = server.connect_string();
    let a = connect(&cs).await;
    let b = connect(&cs).await;
    let (pa, pb) = (format!("{dir}/a"), format!("{dir}/b"));
    // Another session holds b with a plain lock: the multi-lock takes a, waits for b.
    let other = a.lock(&pb).acquire().await.expect("b is free");
    let multi = b.multi_lock(&[pb.as_str(), pa.as_str()]);
    let t = std::time::Instant::now();
    let none = multi
        .acquire_timeout(Duration::from_millis(400))
        .await
        .expect("no error");
    assert!(none.is_none(), "{NAME}: b is held elsewhere");
    assert!(t.elapsed() >= Duration::from_millis(400));
    // a was taken, and is released by the time the call returns: no wait needed.
    assert_eq!(
        a.get_children(&pa).await.expect("listed"),
        Vec::<String>::new(),
        "{NAME}: the lock taken before the timeout is released"
    );
    assert_eq!(
        a.get_children(&pb).await.expect("listed"),
        vec![other.node().to_string()],
        "{NAME}: our waiting node in b is deleted too"
    );
    // Once b is free, the multi-lock gets both; dropping the guard releases them.
    other.release().await.expect("released");
    let held = multi
        .acquire_timeout(Duration::from_secs(10))
        .await
        .expect("no error")
        .expect("both free");
    let paths: Vec<&str> = held.locks().iter().map(|l| l.path.as_str()).collect();
    assert_eq!(paths, [pa.as_str(), pb.as_str()], "{NAME}: sorted");
    assert!(held.fencing_token(&pb).is_some_and(|t| t > 0));
    drop(held);
    for p in [&pa, &pb] {
        let mut empty = false;
        for _ in 0..100 {
            if a.get_children(p).await.expect("listed").is_empty() {
                empty = true;
                break;
            }
            sleep(Duration::from_millis(20)).await;
        }
        assert!(empty, "{NAME}: a dropped guard releases {p}");
    }
    a.close().await;
    b.close().await;
}
