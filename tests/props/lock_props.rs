//! Property test for the lock machine over arbitrary inputs (the same harness as the
//! `lock` fuzz target).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    #[test]
    fn lock_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes_sim::testkit::lock::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Inputs the `lock` fuzz target once crashed on (`tests/data/lock-fuzz-*.bin`): each
/// must now pass. Drop new crash artifacts there.
#[test]
fn fuzz_regressions() {
    let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("lock-fuzz-") {
            let bytes = std::fs::read(&path).unwrap();
            zk_recipes_sim::testkit::lock::run(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            checked += 1;
        }
    }
    assert!(checked >= 1, "no regression inputs found in {dir}");
}

/// Found by `lock_invariants_hold` in a clean-clone CI run: a write lock reported
/// `Acquired` on a node an operator had deleted while its own-node watch was down (the
/// watch had fired and its re-arming read was refused); the last blocker's deletion was
/// taken for a handover. See `a_blocker_gone_while_our_own_node_was_unwatched_is_checked_by_a_listing`
/// in `lock_transcripts.rs`.
#[test]
fn acquired_on_a_deleted_node_after_a_lost_own_read() {
    let schedule = [
        167u8, 64, 10, 121, 0, 16, 0, 11, 2, 9, 0, 16, 0, 100, 0, 48, 0, 121, 0, 68, 0, 0, 0, 0, 0,
        236, 43, 0, 0, 84, 0, 4, 0, 23, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        25, 0, 9, 0, 9, 0, 0, 0, 9, 0, 0, 0, 100, 0, 0, 0, 183, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 29, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 29, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 188, 29, 26, 0, 0, 0, 0, 0, 0, 0, 26, 0, 0,
        0, 10, 0, 0, 0, 90, 0, 0, 0, 0, 0, 41, 0, 42, 65, 9, 0, 73, 0, 9, 0, 108, 20, 89, 0, 9, 0,
        73, 0, 9, 0, 0, 0, 164, 0, 0, 0, 0, 0, 199, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0, 25, 0,
        106, 5,
    ];
    zk_recipes_sim::testkit::lock::run(&schedule).unwrap();
}

/// The harness is not vacuous: over many pseudo-random schedules the lock is acquired,
/// lost, released, granted on and not acquired in time, replies are lost after the
/// server applied the request, and reconnects land on lagging followers.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::lock::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 400) {
        total += zk_recipes_sim::testkit::lock::run_stats(&schedule).unwrap();
    }
    println!("{total:?}");
    assert!(total.acquired > 300 && total.released > 200 && total.lost > 10);
    assert!(total.not_acquired > 20 && total.failed > 0 && total.reconnected > 5);
    assert!(total.operator_deletes > 20 && total.grants > 5);
    let f = total.faults;
    assert!(f.lost_replies > 100 && f.stale_reconnects > 100 && f.refusals > 100);
    assert!(f.expiries > 10);
}

/// Issue 26's blind spot: a holder that re-checks its node after a reconnect without a
/// `sync` first reads from a lagging follower, which still shows the node an operator
/// deleted while the client was away, and reports `Reconnected` on a lock it lost. Caught
/// since the model answers a lagging `exists` with the Stat the follower has (owner
/// included; it used to answer a default Stat, which the holder took for "not ours").
#[test]
fn a_holders_recheck_after_a_reconnect_reads_after_a_sync() {
    let mut s = vec![0u8, 0, 2]; // exclusive, own-node watch; the directory exists
    for _ in 0..6 {
        s.extend_from_slice(&[0, 0, 4, 0]); // serve, read: acquired
    }
    // The connection breaks, an operator deletes our node, the client reconnects to a
    // follower lagging at what it last saw.
    s.extend_from_slice(&[8, 0, 11, 3, 0, 9, 1]);
    for _ in 0..6 {
        s.extend_from_slice(&[0, 0, 4, 0]);
    }
    let stats = zk_recipes_sim::testkit::lock::run_stats(&s).unwrap();
    assert_eq!((stats.acquired, stats.lost, stats.reconnected), (1, 1, 0));
    assert_eq!(stats.faults.stale_reconnects, 1);
}

/// Issue 38, pinned before the lock's refactor: a waiter whose node an operator deleted
/// while its connection was down, reconnecting to a follower that has not applied the
/// deletion, must not take the lock on that follower's listing. Only the `sync` before
/// the re-listing keeps it from it (without it the listing shows our node with every
/// blocker gone: `Acquired`, then `Lost` once the follower catches up). Driven on
/// purpose: the waiter queues behind two contenders of another session and watches the
/// nearer; the farther leaves unheard, the nearer's deletion is heard (so the client has
/// seen both), the re-listing it sends is lost with the connection, the operator deletes
/// our node, and the client comes back to a follower lagging at what it last saw.
#[test]
fn a_waiters_relisting_after_a_reconnect_reads_after_a_sync() {
    // Exclusive, own-node watch, no deadline; the directory exists with two lower
    // contenders of another session (`lock-`, then `__WRIT__`).
    let mut s = vec![96u8, 32, 2];
    s.extend_from_slice(&[0, 0, 0, 0, 4, 0, 4, 0]); // create2 + listing: waiting
    s.extend_from_slice(&[0, 0, 4, 0]); // the blocker's and our node's watches armed
    s.extend_from_slice(&[11, 1, 0]); // the lower contender leaves (unwatched) ...
    s.extend_from_slice(&[11, 1, 0]); // ... then our blocker
    s.extend_from_slice(&[4, 0]); // the directory's watch fires: a waiter ignores it
    s.extend_from_slice(&[4, 0]); // our blocker is gone: two were left, so list again
    s.extend_from_slice(&[8, 0]); // the connection breaks before the listing is served
    s.extend_from_slice(&[11, 3, 0]); // an operator deletes our node
    s.extend_from_slice(&[9, 1]); // back, to a follower lagging at what we last saw
    for _ in 0..6 {
        s.extend_from_slice(&[0, 0, 4, 0]);
    }
    let stats = zk_recipes_sim::testkit::lock::run_stats(&s).unwrap();
    assert_eq!(stats.faults.stale_reconnects, 1);
    assert_eq!(stats.operator_deletes, 1);
    assert_eq!((stats.acquired, stats.failed), (0, 1), "{stats:?}");
}

/// The same for the turn read (issue 38, pinned before the refactor): a waiter whose
/// only blocker went reads its own node (the turn read) to learn that its node is still
/// there; if that read is lost with the connection and an operator deletes our node
/// meanwhile, the read sent again after reconnecting to a lagging follower must come
/// behind a `sync`, or it finds our node there and takes the lock on a deleted node.
#[test]
fn a_waiters_turn_read_after_a_reconnect_reads_after_a_sync() {
    // A write lock, own-node watch, no deadline; the directory exists with one lower
    // reader of another session.
    let mut s = vec![2u8, 16, 2];
    s.extend_from_slice(&[0, 0, 0, 0, 4, 0, 4, 0]); // create2 + listing: waiting
    s.extend_from_slice(&[0, 0, 4, 0]); // the watch on the blocker armed
    s.extend_from_slice(&[11, 1, 0]); // the blocker leaves
    s.extend_from_slice(&[4, 0]); // the directory's watch fires: a waiter ignores it
    s.extend_from_slice(&[4, 0]); // our blocker is gone: the turn read
    s.extend_from_slice(&[8, 0]); // the connection breaks before it is served
    s.extend_from_slice(&[11, 3, 0]); // an operator deletes our node
    s.extend_from_slice(&[9, 1]); // back, to a follower lagging at what we last saw
    for _ in 0..6 {
        s.extend_from_slice(&[0, 0, 4, 0]);
    }
    let stats = zk_recipes_sim::testkit::lock::run_stats(&s).unwrap();
    assert_eq!(stats.faults.stale_reconnects, 1);
    assert_eq!(stats.operator_deletes, 1);
    assert_eq!((stats.acquired, stats.failed), (0, 1), "{stats:?}");
}
