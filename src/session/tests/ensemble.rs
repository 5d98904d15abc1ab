//! Following the ensemble (`track_ensemble`): the session's own read of
//! `/zookeeper/config`, the host list it replaces, the rebalancing moves.

use super::*;
use crate::session::rebalance::rebalance_for_test;

/// `server.N` lines whose client addresses are `hosts`, and `version`.
fn config_text(hosts: &[&str], version: i64) -> Bytes {
    let mut text = String::new();
    for (i, h) in hosts.iter().enumerate() {
        let host = h.split(':').next().unwrap();
        text.push_str(&alloc::format!(
            "server.{}={host}:9{i}1:9{i}2:participant;{h}\n",
            i + 1
        ));
    }
    text.push_str(&alloc::format!("version={version:x}"));
    Bytes::from(text)
}

fn config_reply(xid: i32, hosts: &[&str], version: i64) -> BytesMut {
    reply(
        xid,
        100,
        ErrorCode::Ok,
        Some(Response::Data {
            data: config_text(hosts, version),
            stat: stat(100),
        }),
    )
}

/// A session tracking the ensemble over `cs`, connected (session 0x42) to the host
/// its seed dials first; returns it and that host.
fn tracking(cs: &str) -> (Session, String) {
    let mut c = config(cs);
    c.track_ensemble = true;
    let mut s = Session::new(c, T0);
    let Some(Transport::Connect { host }) = transports(&mut s).pop() else {
        panic!("no dial");
    };
    let current = String::from(s.host(host));
    s.handle_connected(ms(1));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(2), &connect_response(0x42, 6000));
    events(&mut s);
    (s, current)
}

#[test]
fn the_session_reads_the_config_node_with_a_watch_on_every_connection() {
    let (mut s, _) = tracking("a:1,b:2,c:3/app");
    // Outside the chroot, under the session's own xid 1.
    assert_eq!(sent(&mut s), vec![(1, get(CONFIG_NODE, true))]);
    // A config naming the same members changes nothing.
    s.handle_bytes(ms(3), &config_reply(1, &["c:3", "a:1", "b:2"], 0x100));
    assert_eq!(events(&mut s), vec![]);
    assert_eq!(transports(&mut s), vec![]);
    assert_eq!(s.ensemble_version(), Some(0x100));
    // The watch fires: read again.
    s.handle_bytes(
        ms(4),
        &notification(EventType::NodeDataChanged, CONFIG_NODE),
    );
    assert_eq!(sent(&mut s), vec![(2, get(CONFIG_NODE, true))]);
    // After a reconnection, read again (the watch is the session's, not re-armed).
    s.handle_disconnect(ms(5));
    assert!(events(&mut s)
        .iter()
        .all(|e| !matches!(e, SessionEvent::Reply(_))));
    s.handle_connected(ms(6));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(7), &connect_response(0x42, 6000));
    events(&mut s);
    assert_eq!(sent(&mut s), vec![(3, get(CONFIG_NODE, true))]);
}

#[test]
fn without_tracking_nothing_is_read() {
    let mut s = connected();
    assert_eq!(sent(&mut s), vec![]);
    s.handle_bytes(
        ms(4),
        &notification(EventType::NodeDataChanged, CONFIG_NODE),
    );
    assert_eq!(sent(&mut s), vec![]);
}

#[test]
fn a_client_on_a_removed_server_moves_at_once_and_resumes_its_session() {
    let (mut s, current) = tracking("a:1,b:2,c:3");
    sent(&mut s);
    // A caller's request is in flight when the config arrives.
    s.submit(ms(3), get("/x", false), Token(7)).unwrap();
    assert_eq!(sent(&mut s), vec![(2, get("/x", false))]);
    // `current` is replaced by d:4 (same size): its clients all go to d:4, the only
    // share that keeps the load even.
    let new: Vec<&str> = ["a:1", "b:2", "c:3", "d:4"]
        .into_iter()
        .filter(|h| *h != current)
        .collect();
    s.handle_bytes(ms(4), &config_reply(1, &new, 0x200));
    let ev = events(&mut s);
    assert!(matches!(
        &ev[0],
        SessionEvent::EnsembleChanged { moving: true, version: 0x200, hosts } if hosts.len() == 3
    ));
    // The caller's request fails as on any connection loss (it may have been applied).
    assert!(matches!(
        &ev[1],
        SessionEvent::Reply(Reply {
            token: Token(7),
            result: Err(Error::ConnectionLoss),
            ..
        })
    ));
    assert_eq!(
        ev[2],
        SessionEvent::Suspended {
            reason: DisconnectReason::Rebalanced
        }
    );
    assert_eq!(ev.len(), 3);
    let t = transports(&mut s);
    assert_eq!(t[0], Transport::Close);
    let Transport::Connect { host } = t[1] else {
        panic!("{t:?}")
    };
    assert_eq!(s.host(host), "d:4");
    assert_eq!(s.hosts().len(), 3);
    // The same session resumes there, and reads the config again.
    s.handle_connected(ms(5));
    let mut out = BytesMut::new();
    s.poll_transmit(&mut out);
    assert_eq!(connect_request(&out).session_id, 0x42);
    s.handle_bytes(ms(6), &connect_response(0x42, 6000));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Reconnected { read_only: false }]
    );
    assert_eq!(sent(&mut s), vec![(3, get(CONFIG_NODE, true))]);
    // The same version again: nothing more.
    s.handle_bytes(ms(7), &config_reply(3, &new, 0x200));
    assert_eq!(events(&mut s), vec![]);
    assert_eq!(transports(&mut s), vec![]);
}

#[test]
fn a_client_whose_server_stays_in_a_shrinking_ensemble_stays() {
    let (mut s, current) = tracking("a:1,b:2,c:3");
    sent(&mut s);
    let other = ["a:1", "b:2", "c:3"]
        .into_iter()
        .find(|h| *h != current)
        .unwrap();
    let new: Vec<&str> = ["a:1", "b:2", "c:3"]
        .into_iter()
        .filter(|h| *h != other)
        .collect();
    s.handle_bytes(ms(4), &config_reply(1, &new, 0x300));
    assert!(matches!(
        &events(&mut s)[..],
        [SessionEvent::EnsembleChanged { moving: false, .. }]
    ));
    assert_eq!(transports(&mut s), vec![]);
    assert_eq!(s.host(s.current_host()), current);
    assert!(!s.hosts().iter().any(|h| h == other));
}

#[test]
fn a_config_that_does_not_parse_or_a_refused_read_leaves_the_hosts() {
    let (mut s, _) = tracking("a:1,b:2,c:3");
    sent(&mut s);
    s.handle_bytes(
        ms(4),
        &reply(
            1,
            100,
            ErrorCode::Ok,
            Some(Response::Data {
                data: Bytes::from_static(b"server.1=nonsense"),
                stat: stat(100),
            }),
        ),
    );
    s.handle_bytes(
        ms(5),
        &notification(EventType::NodeDataChanged, CONFIG_NODE),
    );
    assert_eq!(sent(&mut s), vec![(2, get(CONFIG_NODE, true))]);
    s.handle_bytes(ms(6), &reply(2, 101, ErrorCode::NoNode, None));
    assert_eq!(events(&mut s), vec![]);
    assert_eq!(s.hosts(), ["a:1", "b:2", "c:3"]);
    assert_eq!(s.ensemble_version(), None);
}

#[test]
fn a_callers_config_read_is_outside_the_chroot_and_its_watch_is_rearmed_there() {
    let mut c = config("h:1/app");
    c.renew_on_expiry = false;
    let mut s = Session::new(c, T0);
    transports(&mut s);
    s.handle_connected(ms(1));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(2), &connect_response(0x42, 6000));
    events(&mut s);
    s.submit(ms(3), get(CONFIG_NODE, true), Token(5)).unwrap();
    s.submit(ms(3), get("/n", true), Token(6)).unwrap();
    assert_eq!(
        sent(&mut s),
        vec![(1, get(CONFIG_NODE, true)), (2, get("/app/n", true))]
    );
    s.handle_bytes(ms(4), &config_reply(1, &["h:1"], 1));
    s.handle_bytes(ms(4), &data_reply(2));
    events(&mut s);
    s.handle_disconnect(ms(5));
    s.handle_connected(ms(6));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(7), &connect_response(0x42, 6000));
    let rearmed: Vec<Request> = sent(&mut s).into_iter().map(|(_, r)| r).collect();
    let Some(Request::SetWatches(w)) = rearmed.first() else {
        panic!("{rearmed:?}")
    };
    let mut data = w.data_watches.clone();
    data.sort();
    assert_eq!(data, ["/app/n", CONFIG_NODE]);
    // Its notification reaches the caller under the node's name.
    events(&mut s);
    s.handle_bytes(
        ms(8),
        &notification(EventType::NodeDataChanged, CONFIG_NODE),
    );
    assert!(events(&mut s).iter().any(|e| matches!(
        e,
        SessionEvent::Watch { token: Token(5), event } if event.path == CONFIG_NODE
    )));
}

/// Where `n` clients end up, per host, when each one's rebalancing draws from its own
/// seed; `on(i)` is client `i`'s server before.
fn spread(old: &[&str], new: &[&str], n: u64, on: impl Fn(u64) -> usize) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = new.iter().map(|h| (String::from(*h), 0)).collect();
    for seed in 0..n {
        let current = old[on(seed)];
        let (order, leave) = rebalance_for_test(old, current, new, seed * 7919 + 1);
        let host = if leave { order[0].as_str() } else { current };
        if let Some(c) = counts.iter_mut().find(|(h, _)| h == host) {
            c.1 += 1;
        } else {
            panic!("{host} is not in the new list");
        }
    }
    counts
}

fn assert_even(counts: &[(String, u64)], n: u64) {
    let share = n / counts.len() as u64;
    for (host, c) in counts {
        assert!(
            c.abs_diff(share) * 100 <= share * 6,
            "{host} has {c} of {n} clients, expected about {share}: {counts:?}"
        );
    }
}

#[test]
fn growing_from_three_to_five_moves_two_fifths_and_keeps_the_load_even() {
    let old = ["a:1", "b:2", "c:3"];
    let new = ["a:1", "b:2", "c:3", "d:4", "e:5"];
    let n = 15_000;
    // Clients spread evenly over the old servers.
    let counts = spread(&old, &new, n, |i| (i % 3) as usize);
    assert_even(&counts, n);
}

#[test]
fn shrinking_moves_exactly_the_removed_servers_clients_evenly() {
    let old = ["a:1", "b:2", "c:3", "d:4", "e:5"];
    let new = ["a:1", "b:2", "c:3"];
    let n = 15_000;
    let counts = spread(&old, &new, n, |i| (i % 5) as usize);
    assert_even(&counts, n);
    // Nobody on a kept server moves.
    for seed in 0..1000 {
        let (_, leave) = rebalance_for_test(&old, "b:2", &new, seed);
        assert!(!leave);
    }
}

#[test]
fn replacing_one_server_sends_its_clients_to_the_newcomer_and_nobody_else() {
    // The test: a fourth server added, then one removed.
    let old = ["a:1", "b:2", "c:3"];
    let four = ["a:1", "b:2", "c:3", "d:4"];
    let n = 12_000;
    let counts = spread(&old, &four, n, |i| (i % 3) as usize);
    assert_even(&counts, n);
    let three = ["b:2", "c:3", "d:4"];
    let counts = spread(&four, &three, n, |i| (i % 4) as usize);
    assert_even(&counts, n);
    for seed in 0..1000 {
        let (order, leave) = rebalance_for_test(&old, "a:1", &["b:2", "c:3", "d:4"], seed);
        assert!(leave);
        assert_eq!(order[0], "d:4");
    }
}
