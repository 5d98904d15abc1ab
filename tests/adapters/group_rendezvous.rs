// Group membership and rendezvous against a real ZooKeeper 3.8, in each form.

use std::time::Duration;

use zk::{LostReason, Member, OwnedNodeEvent, RendezvousEvent, Stat, ViewEvent};
use zk_recipes_testing::{expire_session, TestServer};

const W: Duration = Duration::from_secs(10);

/// The next view event that is not `Suspended`/`Reconnected`/`Synced`.
#[form]
async fn next_change(v: &mut zk::GroupView) -> ViewEvent {
    loop {
        match v
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("a view event")
        {
            ViewEvent::Suspended | ViewEvent::Reconnected | ViewEvent::Synced => {}
            e => return e,
        }
    }
}

fn names(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.name.as_str()).collect()
}

#[test]
fn join_leave_and_the_view() {
    run(join_leave_and_the_view_on(&mut server()));
}

#[form]
async fn join_leave_and_the_view_on(server: &mut TestServer) {
    let root = "";
    let zk = connect(&server.connect_string()).await;
    let dir = format!("{root}/svc/group");
    // No directory yet: an empty group.
    let mut view = zk.group_view(&dir).unwrap();
    assert!(
        within(W, view.synced())
            .await
            .expect("synced in time")
            .unwrap()
            .is_empty(),
        "{}",
        NAME
    );

    let mut a = zk.group_member(&dir, "a", "10.0.0.1").unwrap();
    let sa = created(&mut a, W).await.unwrap();
    assert_eq!(sa.ephemeral_owner, zk.session_id());
    let other = connect(&server.connect_string()).await;
    let mut b = other.group_member(&dir, "b", "10.0.0.2").unwrap();
    created(&mut b, W).await.unwrap();

    let mut joined = Vec::new();
    while joined.len() < 2 {
        match next_change(&mut view).await {
            ViewEvent::Joined(m) => joined.push((m.name, m.data)),
            e => panic!("{}: {e:?}", NAME),
        }
    }
    joined.sort();
    assert_eq!(joined[0], ("a".to_string(), "10.0.0.1".into()));
    assert_eq!(joined[1], ("b".to_string(), "10.0.0.2".into()));
    // Curator's layout: <dir>/<id>, ephemeral, the payload as data.
    assert_eq!(
        &zk.get_data(&format!("{dir}/a")).await.unwrap().0[..],
        b"10.0.0.1"
    );

    let st = within(W, a.set_data("10.0.0.9"))
        .await
        .expect("written in time")
        .unwrap();
    assert_eq!(st.version, 1);
    match next_change(&mut view).await {
        ViewEvent::Changed(m) => {
            assert_eq!((&m.name[..], &m.data[..]), ("a", &b"10.0.0.9"[..]))
        }
        e => panic!("{}: {e:?}", NAME),
    }

    within(W, a.delete())
        .await
        .expect("deleted in time")
        .unwrap();
    assert!(zk.exists(&format!("{dir}/a")).await.unwrap().is_none());
    match next_change(&mut view).await {
        ViewEvent::Left(m) => assert_eq!(m.name, "a"),
        e => panic!("{}: {e:?}", NAME),
    }
    // The member's client closes: its node goes with the session.
    other.close().await;
    match next_change(&mut view).await {
        ViewEvent::Left(m) => assert_eq!(m.name, "b"),
        e => panic!("{}: {e:?}", NAME),
    }
    assert!(zk.get_children(&dir).await.unwrap().is_empty());
    drop(b);
    zk.close().await;
}

#[test]
fn member_session_expiry_recreates_the_node() {
    run(member_session_expiry_recreates_the_node_on(&mut server()));
}

#[form]
async fn member_session_expiry_recreates_the_node_on(server: &mut TestServer) {
    let root = "";
    let zk = connect(&server.connect_string()).await;
    let watcher = connect(&server.connect_string()).await;
    let dir = format!("{root}/expiry");
    let mut m = zk.group_member(&dir, "me", "payload").unwrap();
    let first = created(&mut m, W).await.unwrap();
    let old = zk.session_id();
    assert_eq!(first.ephemeral_owner, old);
    let mut view = watcher.group_view(&dir).unwrap();
    assert_eq!(
        names(
            &within(W, view.synced())
                .await
                .expect("synced in time")
                .unwrap()
        ),
        ["me"]
    );

    expire_session(server.addr(), old, &zk.session_password()).unwrap();
    let mut seen = Vec::new();
    let again: Stat = loop {
        match m
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("a member event")
        {
            OwnedNodeEvent::Created { stat } => break stat,
            e => seen.push(e),
        }
    };
    assert!(
        seen.contains(&OwnedNodeEvent::Lost {
            reason: LostReason::SessionExpired
        }),
        "{}: {seen:?}",
        NAME
    );
    assert_ne!(again.ephemeral_owner, old);
    assert_eq!(again.ephemeral_owner, zk.session_id());
    assert_eq!(
        &zk.get_data(&format!("{dir}/me")).await.unwrap().0[..],
        b"payload"
    );
    // The view saw it go and come back (a new node: Left then Joined).
    match next_change(&mut view).await {
        ViewEvent::Left(x) => assert_eq!(x.stat.ephemeral_owner, old),
        e => panic!("{}: {e:?}", NAME),
    }
    match next_change(&mut view).await {
        ViewEvent::Joined(x) => assert_eq!(x.stat.ephemeral_owner, zk.session_id()),
        e => panic!("{}: {e:?}", NAME),
    }
    within(W, m.delete())
        .await
        .expect("deleted in time")
        .unwrap();
    zk.close().await;
    watcher.close().await;
}

#[test]
fn view_resyncs_across_a_server_restart() {
    run(view_resyncs_across_a_server_restart_on(&mut own_server()));
}

#[form]
async fn view_resyncs_across_a_server_restart_on(server: &mut TestServer) {
    let root = "";
    let zk = connect(&server.connect_string()).await;
    let members = connect(&server.connect_string()).await;
    let dir = format!("{root}/restart");
    let mut a = members.group_member(&dir, "a", "1").unwrap();
    created(&mut a, W).await.unwrap();
    let mut view = zk.group_view(&dir).unwrap();
    assert_eq!(
        names(
            &within(W, view.synced())
                .await
                .expect("synced in time")
                .unwrap()
        ),
        ["a"]
    );

    server.restart().unwrap();
    // Suspended, Reconnected, Synced — and no membership change invented.
    let mut events = Vec::new();
    loop {
        let e = view
            .next_timeout(W * 2)
            .await
            .ok()
            .flatten()
            .expect("the view resyncs");
        let done = e == ViewEvent::Synced;
        events.push(e);
        if done {
            break;
        }
    }
    assert_eq!(
        events,
        [
            ViewEvent::Suspended,
            ViewEvent::Reconnected,
            ViewEvent::Synced
        ],
        "{}",
        NAME
    );
    // Watches carry on after the resync.
    let mut b = members.group_member(&dir, "b", "2").unwrap();
    created(&mut b, W).await.unwrap();
    match next_change(&mut view).await {
        ViewEvent::Joined(m) => assert_eq!(m.name, "b"),
        e => panic!("{}: {e:?}", NAME),
    }
    within(W, b.delete())
        .await
        .expect("deleted in time")
        .unwrap();
    match next_change(&mut view).await {
        ViewEvent::Left(m) => assert_eq!(m.name, "b"),
        e => panic!("{}: {e:?}", NAME),
    }
    within(W, a.delete())
        .await
        .expect("deleted in time")
        .unwrap();
    zk.close().await;
    members.close().await;
}

#[test]
fn rendezvous_master_and_workers() {
    run(rendezvous_master_and_workers_on(&mut server()));
}

#[form]
async fn rendezvous_master_and_workers_on(server: &mut TestServer) {
    let root = "";
    let coord = connect(&server.connect_string()).await;
    let master_zk = connect(&server.connect_string()).await;
    let worker_zk = connect(&server.connect_string()).await;
    let zr = format!("{root}/jobs/1/zr");
    // Master and workers start before z_r exists.
    let mut workers: Vec<_> = (0..3)
        .map(|_| worker_zk.rendezvous_worker(&zr).unwrap())
        .collect();
    let mut master = master_zk.rendezvous_master(&zr, "10.1.1.1:7000").unwrap();
    sleep(Duration::from_millis(200)).await;
    let mut c = coord.rendezvous_coordinator(&zr).unwrap();
    created(&mut c, W).await.unwrap();
    match master.next_timeout(W).await.ok().flatten() {
        Some(RendezvousEvent::Published { .. }) => {}
        e => panic!("{}: {e:?}", NAME),
    }
    for w in &mut workers {
        match w.next_timeout(W).await.ok().flatten() {
            Some(RendezvousEvent::Address { data, .. }) => {
                assert_eq!(&data[..], b"10.1.1.1:7000")
            }
            e => panic!("{}: {e:?}", NAME),
        }
    }
    // The master moves: workers follow the latest address.
    master.publish("10.1.1.2:7000").unwrap();
    match master.next_timeout(W).await.ok().flatten() {
        Some(RendezvousEvent::Published { .. }) => {}
        e => panic!("{}: {e:?}", NAME),
    }
    for w in &mut workers {
        match w.next_timeout(W).await.ok().flatten() {
            Some(RendezvousEvent::Address { data, .. }) => {
                assert_eq!(&data[..], b"10.1.1.2:7000")
            }
            e => panic!("{}: {e:?}", NAME),
        }
    }
    // The coordinator leaves: z_r goes, everyone is told.
    drop(c);
    assert_eq!(
        master.next_timeout(W).await.ok().flatten(),
        Some(RendezvousEvent::Gone),
        "{}",
        NAME
    );
    for w in &mut workers {
        assert_eq!(
            w.next_timeout(W).await.ok().flatten(),
            Some(RendezvousEvent::Gone),
            "{}",
            NAME
        );
        assert_eq!(w.next_timeout(W).await.ok().flatten(), None); // done
    }
    assert!(worker_zk.exists(&zr).await.unwrap().is_none());
    for zk in [coord, master_zk, worker_zk] {
        zk.close().await;
    }
}

#[test]
fn rendezvous_publisher_creates_the_node() {
    run(rendezvous_publisher_creates_the_node_on(&mut server()));
}

#[form]
async fn rendezvous_publisher_creates_the_node_on(server: &mut TestServer) {
    let root = "";
    let p_zk = connect(&server.connect_string()).await;
    let w_zk = connect(&server.connect_string()).await;
    let zr = format!("{root}/simple/zr");
    let mut w = w_zk.rendezvous_worker(&zr).unwrap();
    let mut p = p_zk.rendezvous_publisher(&zr, "host:1").unwrap();
    created(&mut p, W).await.unwrap();
    match w.next_timeout(W).await.ok().flatten() {
        Some(RendezvousEvent::Address { data, .. }) => assert_eq!(&data[..], b"host:1"),
        e => panic!("{}: {e:?}", NAME),
    }
    within(W, p.set_data("host:2"))
        .await
        .expect("written in time")
        .unwrap();
    match w.next_timeout(W).await.ok().flatten() {
        Some(RendezvousEvent::Address { data, .. }) => assert_eq!(&data[..], b"host:2"),
        e => panic!("{}: {e:?}", NAME),
    }
    // The publisher's session ends: z_r goes with it.
    p_zk.close().await;
    assert_eq!(
        w.next_timeout(W).await.ok().flatten(),
        Some(RendezvousEvent::Gone),
        "{}",
        NAME
    );
    drop(p);
    w_zk.close().await;
}
