//! Group membership and rendezvous against a real ZooKeeper 3.8, the same scenarios
//! through both adapters (`tests/support_group`): member join/leave/data and the view's
//! events, a member's session expiring and its node re-created on the new session, a
//! view resynchronised across a server restart, and a rendezvous (coordinator, master,
//! workers) including a `z_r` not created yet and deleted at the end.
#![allow(clippy::disallowed_methods)]

use crate::support_group;

use std::time::Duration;

use support_group::{GroupZk, ViewH};
use zk_recipes::proto::Stat;
use zk_recipes::recipe::group::{Member, ViewEvent};
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::node::OwnedNodeEvent;
use zk_recipes::recipe::rendezvous::RendezvousEvent;
use zk_recipes_testing::{expire_session, TestServer};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

const W: Duration = Duration::from_secs(10);

fn server() -> TestServer {
    TestServer::start().expect("a real ZooKeeper")
}

macro_rules! both {
    ($name:ident) => {
        #[test]
        fn $name() {
            let mut server = server();
            scenarios::$name::<B>(&mut server, "/blocking");
            scenarios::$name::<T>(&mut server, "/tokio");
        }
    };
}

both!(join_leave_and_the_view);
both!(member_session_expiry_recreates_the_node);
both!(view_resyncs_across_a_server_restart);
both!(rendezvous_master_and_workers);
both!(rendezvous_publisher_creates_the_node);

/// The next view event that is not `Suspended`/`Reconnected`/`Synced`.
fn next_change(v: &mut Box<dyn ViewH>) -> ViewEvent {
    loop {
        match v.next(W).expect("a view event") {
            ViewEvent::Suspended | ViewEvent::Reconnected | ViewEvent::Synced => {}
            e => return e,
        }
    }
}

fn names(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.name.as_str()).collect()
}

mod scenarios {
    use super::*;

    pub fn join_leave_and_the_view<Z: GroupZk>(server: &mut TestServer, root: &str) {
        let zk = Z::connect(&server.connect_string()).unwrap();
        let dir = format!("{root}/svc/group");
        // No directory yet: an empty group.
        let mut view = zk.view(&dir);
        assert!(view.synced(W).unwrap().is_empty(), "{}", Z::NAME);

        let mut a = zk.member(&dir, "a", "10.0.0.1");
        let sa = a.created(W).unwrap();
        assert_eq!(sa.ephemeral_owner, zk.session_id());
        let other = Z::connect(&server.connect_string()).unwrap();
        let mut b = other.member(&dir, "b", "10.0.0.2");
        b.created(W).unwrap();

        let mut joined = Vec::new();
        while joined.len() < 2 {
            match next_change(&mut view) {
                ViewEvent::Joined(m) => joined.push((m.name, m.data)),
                e => panic!("{}: {e:?}", Z::NAME),
            }
        }
        joined.sort();
        assert_eq!(joined[0], ("a".to_string(), "10.0.0.1".into()));
        assert_eq!(joined[1], ("b".to_string(), "10.0.0.2".into()));
        // Curator's layout: <dir>/<id>, ephemeral, the payload as data.
        assert_eq!(&zk.get_data(&format!("{dir}/a")).unwrap()[..], b"10.0.0.1");

        let st = a.set_data("10.0.0.9", W).unwrap();
        assert_eq!(st.version, 1);
        match next_change(&mut view) {
            ViewEvent::Changed(m) => {
                assert_eq!((&m.name[..], &m.data[..]), ("a", &b"10.0.0.9"[..]))
            }
            e => panic!("{}: {e:?}", Z::NAME),
        }

        a.delete(W).unwrap();
        assert!(!zk.exists(&format!("{dir}/a")).unwrap());
        match next_change(&mut view) {
            ViewEvent::Left(m) => assert_eq!(m.name, "a"),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        // The member's client closes: its node goes with the session.
        other.close();
        match next_change(&mut view) {
            ViewEvent::Left(m) => assert_eq!(m.name, "b"),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        assert!(zk.get_children(&dir).unwrap().is_empty());
        drop(b);
        zk.close();
    }

    pub fn member_session_expiry_recreates_the_node<Z: GroupZk>(
        server: &mut TestServer,
        root: &str,
    ) {
        let zk = Z::connect(&server.connect_string()).unwrap();
        let watcher = Z::connect(&server.connect_string()).unwrap();
        let dir = format!("{root}/expiry");
        let mut m = zk.member(&dir, "me", "payload");
        let first = m.created(W).unwrap();
        let old = zk.session_id();
        assert_eq!(first.ephemeral_owner, old);
        let mut view = watcher.view(&dir);
        assert_eq!(names(&view.synced(W).unwrap()), ["me"]);

        expire_session(server.addr(), old, &zk.session_password()).unwrap();
        let mut seen = Vec::new();
        let again: Stat = loop {
            match m.next(W).expect("a member event") {
                OwnedNodeEvent::Created { stat } => break stat,
                e => seen.push(e),
            }
        };
        assert!(
            seen.contains(&OwnedNodeEvent::Lost {
                reason: LostReason::SessionExpired
            }),
            "{}: {seen:?}",
            Z::NAME
        );
        assert_ne!(again.ephemeral_owner, old);
        assert_eq!(again.ephemeral_owner, zk.session_id());
        assert_eq!(&zk.get_data(&format!("{dir}/me")).unwrap()[..], b"payload");
        // The view saw it go and come back (a new node: Left then Joined).
        match next_change(&mut view) {
            ViewEvent::Left(x) => assert_eq!(x.stat.ephemeral_owner, old),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        match next_change(&mut view) {
            ViewEvent::Joined(x) => assert_eq!(x.stat.ephemeral_owner, zk.session_id()),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        m.delete(W).unwrap();
        zk.close();
        watcher.close();
    }

    pub fn view_resyncs_across_a_server_restart<Z: GroupZk>(server: &mut TestServer, root: &str) {
        let zk = Z::connect(&server.connect_string()).unwrap();
        let members = Z::connect(&server.connect_string()).unwrap();
        let dir = format!("{root}/restart");
        let mut a = members.member(&dir, "a", "1");
        a.created(W).unwrap();
        let mut view = zk.view(&dir);
        assert_eq!(names(&view.synced(W).unwrap()), ["a"]);

        server.restart().unwrap();
        // Suspended, Reconnected, Synced — and no membership change invented.
        let mut events = Vec::new();
        loop {
            let e = view.next(W * 2).expect("the view resyncs");
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
            Z::NAME
        );
        // Watches carry on after the resync.
        let mut b = members.member(&dir, "b", "2");
        b.created(W).unwrap();
        match next_change(&mut view) {
            ViewEvent::Joined(m) => assert_eq!(m.name, "b"),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        b.delete(W).unwrap();
        match next_change(&mut view) {
            ViewEvent::Left(m) => assert_eq!(m.name, "b"),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        a.delete(W).unwrap();
        zk.close();
        members.close();
    }

    pub fn rendezvous_master_and_workers<Z: GroupZk>(server: &mut TestServer, root: &str) {
        let coord = Z::connect(&server.connect_string()).unwrap();
        let master_zk = Z::connect(&server.connect_string()).unwrap();
        let worker_zk = Z::connect(&server.connect_string()).unwrap();
        let zr = format!("{root}/jobs/1/zr");
        // Master and workers start before z_r exists.
        let mut workers: Vec<_> = (0..3).map(|_| worker_zk.worker(&zr)).collect();
        let mut master = master_zk.master(&zr, "10.1.1.1:7000");
        std::thread::sleep(Duration::from_millis(200));
        let mut c = coord.coordinator(&zr);
        c.created(W).unwrap();
        match master.next(W) {
            Some(RendezvousEvent::Published { .. }) => {}
            e => panic!("{}: {e:?}", Z::NAME),
        }
        for w in &mut workers {
            match w.next(W) {
                Some(RendezvousEvent::Address { data, .. }) => {
                    assert_eq!(&data[..], b"10.1.1.1:7000")
                }
                e => panic!("{}: {e:?}", Z::NAME),
            }
        }
        // The master moves: workers follow the latest address.
        master.publish("10.1.1.2:7000");
        match master.next(W) {
            Some(RendezvousEvent::Published { .. }) => {}
            e => panic!("{}: {e:?}", Z::NAME),
        }
        for w in &mut workers {
            match w.next(W) {
                Some(RendezvousEvent::Address { data, .. }) => {
                    assert_eq!(&data[..], b"10.1.1.2:7000")
                }
                e => panic!("{}: {e:?}", Z::NAME),
            }
        }
        // The coordinator leaves: z_r goes, everyone is told.
        drop(c);
        assert_eq!(master.next(W), Some(RendezvousEvent::Gone), "{}", Z::NAME);
        for w in &mut workers {
            assert_eq!(w.next(W), Some(RendezvousEvent::Gone), "{}", Z::NAME);
            assert_eq!(w.next(W), None); // done
        }
        assert!(!worker_zk.exists(&zr).unwrap());
        for zk in [coord, master_zk, worker_zk] {
            zk.close();
        }
    }

    pub fn rendezvous_publisher_creates_the_node<Z: GroupZk>(server: &mut TestServer, root: &str) {
        let p_zk = Z::connect(&server.connect_string()).unwrap();
        let w_zk = Z::connect(&server.connect_string()).unwrap();
        let zr = format!("{root}/simple/zr");
        let mut w = w_zk.worker(&zr);
        let mut p = p_zk.publisher(&zr, "host:1");
        p.created(W).unwrap();
        match w.next(W) {
            Some(RendezvousEvent::Address { data, .. }) => assert_eq!(&data[..], b"host:1"),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        p.set_data("host:2", W).unwrap();
        match w.next(W) {
            Some(RendezvousEvent::Address { data, .. }) => assert_eq!(&data[..], b"host:2"),
            e => panic!("{}: {e:?}", Z::NAME),
        }
        // The publisher's session ends: z_r goes with it.
        p_zk.close();
        assert_eq!(w.next(W), Some(RendezvousEvent::Gone), "{}", Z::NAME);
        drop(p);
        w_zk.close();
    }
}
