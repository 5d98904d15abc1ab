// `describe` and `describe_below` against a real ZooKeeper 3.8, in each form: a lock
// with its holder and a waiter (sessions and fencing token as the guard knows them), an
// election (leader and candidate, by participant id), a semaphore's lease, a queue with
// an at-least-once claim, a double barrier filling up, then the walk that finds them
// all below one path, and a missing path (NoNode, named).

use std::time::Duration;

use zk::{RecipeKind, Shape};
use zk_recipes_testing::TestServer;

#[test]
fn describe_tells_each_recipe() {
    run(describe_tells_each_recipe_on(&server()));
}

/// Waits (5 s at most) until `dir` has `n` children.
#[form]
async fn children_become(zk: &zk::Client, dir: &str, n: usize) {
    for _ in 0..250 {
        if zk.get_children(dir).await.map(|c| c.len()).unwrap_or(0) == n {
            return;
        }
        sleep(Duration::from_millis(20)).await;
    }
    panic!("{NAME}: {dir} never had {n} children");
}

/// A lock waiter that gives up after `wait` (the holder keeps the lock meanwhile).
#[form]
async fn lock_waiter(zk: zk::Client, wait: Duration) -> bool {
    zk.lock("/app/locks/job")
        .acquire_timeout(wait)
        .await
        .expect("a wait")
        .is_some()
}

/// A double-barrier participant of a barrier for two that nobody else enters.
#[form]
async fn lone_member(zk: zk::Client, wait: Duration) -> bool {
    zk.double_barrier("/app/barrier", 2)
        .enter_timeout(wait)
        .await
        .expect("an enter")
}

#[form]
async fn describe_tells_each_recipe_on(server: &TestServer) {
    let cs = server.connect_string();
    let (a, b) = (connect(&cs).await, connect(&cs).await);

    // Lock: `a` holds, `b` waits.
    let guard = a.lock("/app/locks/job").acquire().await.expect("lock");
    let b2 = b.clone();
    let waiter = spawn(move || lock_waiter(b2, Duration::from_secs(20)));
    children_become(&a, "/app/locks/job", 2).await;
    let d = b.describe("/app/locks/job").await.expect("describe lock");
    assert_eq!(d.path, "/app/locks/job");
    match &d.shape {
        Shape::Lock {
            holder: Some(h),
            waiters,
        } => {
            assert_eq!(h.session(), a.session_id(), "{NAME}");
            assert_eq!(h.fencing_token(), guard.fencing_token(), "{NAME}");
            assert!(guard.node().ends_with(&h.name), "{NAME}");
            assert_eq!(waiters.len(), 1, "{NAME}");
            assert_eq!(waiters[0].session(), b.session_id(), "{NAME}");
            assert!(waiters[0].fencing_token() > h.fencing_token(), "{NAME}");
        }
        other => panic!("{NAME}: {other:?}"),
    }

    // Election: alpha leads, beta waits; their ids are the nodes' data.
    let mut alpha = a.election("/app/election", "alpha").join().await.unwrap();
    let token = alpha.elected().await.expect("alpha leads");
    let beta = b.election("/app/election", "beta").join().await.unwrap();
    let d = b.describe("/app/election").await.expect("describe election");
    match &d.shape {
        Shape::Election {
            leader: Some(l),
            candidates,
        } => {
            assert_eq!((l.label(), l.fencing_token()), (Some("alpha"), token));
            let ids: Vec<_> = candidates.iter().map(|c| c.label()).collect();
            assert_eq!(ids, [Some("beta")], "{NAME}");
        }
        other => panic!("{NAME}: {other:?}"),
    }

    // Semaphore: one lease held by `b`.
    let lease = b.semaphore("/app/sem", 2).acquire().await.expect("lease");
    match a.describe("/app/sem").await.expect("describe semaphore").shape {
        Shape::Semaphore { leases, .. } => {
            assert_eq!(leases.len(), 1, "{NAME}");
            assert_eq!(leases[0].session(), b.session_id(), "{NAME}");
        }
        other => panic!("{NAME}: {other:?}"),
    }

    // Queue: three items, the first claimed at least once by `b`.
    let mut q = a.queue("/app/q");
    for item in ["one", "two", "three"] {
        q.put(item).await.expect("put");
    }
    let claimed = b.queue("/app/q").take_claimed().await.expect("claim");
    match a.describe("/app/q").await.expect("describe queue").shape {
        Shape::Queue {
            priority,
            items,
            oldest: Some(oldest),
            claims,
        } => {
            assert!(!priority);
            assert_eq!((items, &oldest.data[..]), (3, &b"one"[..]), "{NAME}");
            assert_eq!(claims.len(), 1, "{NAME}");
            assert_eq!(claims[0].session(), b.session_id(), "{NAME}");
        }
        other => panic!("{NAME}: {other:?}"),
    }

    // Double barrier for two, one member in it so far.
    let b3 = b.clone();
    let member = spawn(move || lone_member(b3, Duration::from_secs(3)));
    children_become(&a, "/app/barrier", 1).await;
    match a.describe("/app/barrier").await.expect("barrier").shape {
        Shape::DoubleBarrier { ready, members } => {
            assert!(!ready, "{NAME}");
            assert_eq!(members.len(), 1, "{NAME}");
            assert_eq!(members[0].session(), b.session_id(), "{NAME}");
        }
        other => panic!("{NAME}: {other:?}"),
    }

    // Everything below /app, found by the walk; /app itself has no layout.
    let survey = a.describe_below("/app").await.expect("describe below");
    assert!(!survey.truncated);
    let found: Vec<(&str, RecipeKind)> = survey
        .descriptions
        .iter()
        .map(|d| (d.path.as_str(), d.shape.kind()))
        .collect();
    assert_eq!(
        found,
        [
            ("/app/barrier", RecipeKind::DoubleBarrier),
            ("/app/election", RecipeKind::Election),
            ("/app/locks/job", RecipeKind::Lock),
            ("/app/q", RecipeKind::Queue),
            ("/app/sem", RecipeKind::Semaphore),
        ],
        "{NAME}"
    );
    assert_eq!(a.describe("/app").await.unwrap().shape, Shape::Node);
    let missing = a.describe("/app/nope").await.unwrap_err();
    assert_eq!(missing.code(), Some(zk::ErrorCode::NoNode), "{NAME}");
    assert!(missing.to_string().contains("/app/nope"), "{NAME}: {missing}");

    assert!(!member.join().await, "{NAME}: the barrier never filled");
    claimed.release().await.expect("release claim");
    lease.release().await.expect("release lease");
    beta.close().await.unwrap();
    alpha.close().await.unwrap();
    guard.release().await.expect("release");
    assert!(waiter.join().await, "{NAME}: the waiter got the lock");
    a.close().await;
    b.close().await;
}
