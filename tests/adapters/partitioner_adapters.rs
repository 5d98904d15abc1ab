// The set partitioner against a real ZooKeeper 3.8, in each form: three members divide
// six items (each held by exactly one, as kazoo's division says, one lock node per
// item); a fourth joins — the three are told to release, release, and the four divide
// again; the fourth finishes and a third is dropped — nothing of them is left and the
// rest divide again; then a member's session expires — it is told, and the last member
// takes every item. A timed-out wait leaves a member dividing. A 200 ms time boundary
// keeps it short.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use zk_recipes::recipe::partitioner::partition;
use zk_recipes_testing::{expire_session, TestServer};

const LONG: Duration = Duration::from_secs(15);
const ITEMS: [&str; 6] = ["i0", "i1", "i2", "i3", "i4", "i5"];

#[form]
async fn member(zk: &zk::Client, path: &str, identifier: &str) -> zk::SetPartitioner {
    zk.partitioner(path, &ITEMS)
        .identifier(identifier)
        .time_boundary(Duration::from_millis(200))
        .join()
        .expect("joined")
}

/// Waits until every member holds its share, then checks the division: kazoo's, every
/// item held by exactly one member, each item's only lock node the holder's.
#[form]
async fn divided(zk: &zk::Client, path: &str, members: &mut [(&str, &mut zk::SetPartitioner)]) {
    let ids: Vec<String> = members.iter().map(|(id, _)| id.to_string()).collect();
    let all: Vec<String> = ITEMS.map(String::from).to_vec();
    let mut holder = BTreeMap::new();
    for (id, m) in members.iter_mut() {
        let held = m
            .acquired_timeout(LONG)
            .await
            .expect("no error")
            .unwrap_or_else(|| panic!("{NAME}: {id} got no share"));
        let want: Vec<&str> = partition(id, &ids, &all).iter().map(|i| ITEMS[*i]).collect();
        let got: Vec<&str> = held.iter().map(|h| h.item.as_str()).collect();
        assert_eq!(got, want, "{NAME}: {id}'s share among {ids:?}");
        for h in held {
            assert!(h.fencing_token > 0, "{NAME}: {h:?}");
            assert!(holder.insert(h.item.clone(), h.node).is_none(), "{NAME}: twice");
        }
    }
    assert_eq!(holder.len(), ITEMS.len(), "{NAME}: every item held");
    for (item, node) in holder {
        let nodes = zk.get_children(&format!("{path}/locks/{item}")).await.expect("listed");
        assert_eq!(nodes, [node], "{NAME}: {item}'s lock nodes");
    }
}

/// Each member is told to release, and releases.
#[form]
async fn released(members: &mut [&mut zk::SetPartitioner]) {
    for m in members.iter_mut() {
        assert!(m.release_needed_timeout(LONG).await.expect("no error"), "{NAME}: told");
        assert_eq!(m.state(), zk::PartitionState::ReleaseNeeded, "{NAME}");
        m.release().await.expect("released");
        assert!(m.items().is_empty(), "{NAME}: nothing held after the release");
    }
}

/// Waits (bounded) until the party is `n` members.
#[form]
async fn party_of(zk: &zk::Client, path: &str, n: usize) {
    let deadline = Instant::now() + LONG;
    loop {
        let party = zk.get_children(&format!("{path}/party")).await.expect("listed");
        if party.len() == n {
            return;
        }
        assert!(Instant::now() < deadline, "{NAME}: party {party:?}, want {n}");
        sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn partitioner_divides_redivides_on_join_leave_and_expiry() {
    run(partitioner_on(&server()));
}

#[form]
async fn partitioner_on(server: &TestServer) {
    let started = Instant::now();
    let path = format!("/partitioner/{NAME}");
    let path = path.as_str();
    let cs = server.connect_string();
    let (za, zb, zc, zd) = (
        connect(&cs).await,
        connect(&cs).await,
        connect(&cs).await,
        connect(&cs).await,
    );
    let mut a = member(&za, path, "a").await;
    let mut b = member(&zb, path, "b").await;
    let mut c = member(&zc, path, "c").await;
    // A wait that times out (the 200 ms boundary is not over) leaves the member dividing.
    let early = a.acquired_timeout(Duration::from_millis(1)).await;
    assert_eq!(early, Ok(None), "{NAME}");
    assert_eq!(a.state(), zk::PartitionState::Allocating, "{NAME}");
    divided(&za, path, &mut [("a", &mut a), ("b", &mut b), ("c", &mut c)]).await;

    // d joins: everyone releases, the four divide again.
    let mut d = member(&zd, path, "d").await;
    released(&mut [&mut a, &mut b, &mut c]).await;
    let four = &mut [("a", &mut a), ("b", &mut b), ("c", &mut c), ("d", &mut d)];
    divided(&za, path, four).await;

    // d finishes, c is dropped: nothing of theirs is left, a and b divide again.
    d.finish().await.expect("finished");
    drop(c);
    party_of(&za, path, 2).await;
    released(&mut [&mut a, &mut b]).await;
    divided(&za, path, &mut [("a", &mut a), ("b", &mut b)]).await;

    // b's session expires: b is told (it ends with SessionExpired), a takes every item.
    expire_session(server.addr(), zb.session_id(), &zb.session_password()).unwrap();
    let deadline = Instant::now() + LONG;
    while !matches!(b.state(), zk::PartitionState::Failed(_)) {
        assert!(Instant::now() < deadline, "{NAME}: b is not told: {:?}", b.state());
        sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.finish().await, Err(zk::Error::SessionExpired), "{NAME}");
    released(&mut [&mut a]).await;
    divided(&za, path, &mut [("a", &mut a)]).await;

    a.finish().await.expect("finished");
    party_of(&za, path, 0).await;
    for item in ITEMS {
        let nodes = za.get_children(&format!("{path}/locks/{item}")).await.expect("listed");
        assert!(nodes.is_empty(), "{NAME}: {item}: {nodes:?} left");
    }
    println!("{NAME}: partitioner scenario in {:?}", started.elapsed());
    for z in [za, zb, zc, zd] {
        z.close().await;
    }
}
