//! The nemesis's links are real: the servers of its ensemble talk to each other only
//! through its proxies, a server cut from its peers stops serving and rejoins once
//! healed, and a client link drops, resets and delays as told.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes::proto::*;
use zk_recipes_testing::{Endpoint, Flow, Nemesis, NemesisOptions, RawClient};

/// Established TCP connections of process `pid`: (local port, remote port).
fn connections(pid: u32) -> Vec<(u16, u16)> {
    let mut inodes = HashSet::new();
    for fd in fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(link) = fs::read_link(fd.path()) {
            let link = link.to_string_lossy().to_string();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
            {
                inodes.insert(inode.to_string());
            }
        }
    }
    let port = |field: &str| u16::from_str_radix(field.rsplit(':').next().unwrap_or(""), 16).ok();
    let mut out = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local remote st ... inode (field 9); 01 is ESTABLISHED.
            if f.len() > 9 && f[3] == "01" && inodes.contains(f[9]) {
                if let (Some(l), Some(r)) = (port(f[1]), port(f[2])) {
                    out.push((l, r));
                }
            }
        }
    }
    out
}

fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    cond()
}

fn serving(n: &Nemesis) -> Vec<usize> {
    (0..3).filter(|&i| n.ensemble().mode(i).is_some()).collect()
}

/// One ensemble behind proxies at a time in this binary (three JVMs and twelve proxies
/// each: two at once starved each other's elections past their minute on 2 cores).
static ONE_ENSEMBLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_servers_talk_only_through_the_proxies_and_a_cut_server_rejoins() {
    let _one = ONE_ENSEMBLE.lock().unwrap_or_else(|e| e.into_inner());
    let n = Nemesis::start(NemesisOptions::default()).expect("an ensemble behind proxies");
    let leader = n.leader().expect("a leader");
    // Every server's peer connections go to proxies, never to a peer's own ports.
    let own: HashSet<u16> = (0..3)
        .flat_map(|i| {
            let p = n.ensemble().peer_ports(i);
            [p.quorum.port(), p.election.port()]
        })
        .collect();
    let proxies: HashSet<u16> = n.server_proxies().iter().map(|p| p.addr().port()).collect();
    assert_eq!(
        proxies.len(),
        12,
        "a quorum and an election proxy per directed link"
    );
    // Two followers to the leader, three election connections, at least (read until
    // they are all up: a server opens its election connections on its own time).
    let mut through = 0;
    wait_until(Duration::from_secs(20), || {
        through = 0;
        for i in 0..3 {
            let pid = n.ensemble().pid(i).unwrap();
            for (local, remote) in connections(pid) {
                assert!(
                    !own.contains(&remote),
                    "server {} is connected straight to a peer's port {remote} (local {local})",
                    i + 1
                );
                through += usize::from(proxies.contains(&remote));
            }
        }
        through >= 5
    });
    assert!(through >= 5, "{through} peer connections through proxies");
    assert!(n.server_proxies().iter().any(|p| p.bytes().1 > 0));

    // The leader cut from both followers (bytes dropped): they elect another, it stops
    // serving; healed, all three serve again with one leader.
    n.partition(&[leader], Flow::Drop);
    assert!(
        wait_until(Duration::from_secs(30), || {
            n.leader().is_some_and(|l| l != leader) && !serving(&n).contains(&leader)
        }),
        "the majority elects a new leader and the old one stops: modes {:?}",
        (0..3).map(|i| n.ensemble().mode(i)).collect::<Vec<_>>()
    );
    n.heal();
    assert!(
        wait_until(Duration::from_secs(30), || serving(&n).len() == 3),
        "all serve again after the heal"
    );
    // Reset: a follower cut from both peers; its election and quorum connections reset.
    let follower = (n.leader().unwrap() + 1) % 3;
    n.partition(&[follower], Flow::Reset);
    assert!(
        wait_until(Duration::from_secs(30), || !serving(&n).contains(&follower)),
        "a follower cut by resets stops serving"
    );
    assert_eq!(serving(&n).len(), 2, "the majority serves on");
    n.heal();
    assert!(wait_until(Duration::from_secs(30), || serving(&n).len() == 3));
    // One way: the leader's bytes to a follower dropped, the follower's passing. The
    // follower hears nothing from the leader and gives it up.
    let leader = n.leader().unwrap();
    let follower = (leader + 1) % 3;
    n.set_flow(
        Endpoint::Server(leader),
        Endpoint::Server(follower),
        Flow::Drop,
    );
    assert!(
        wait_until(Duration::from_secs(30), || !serving(&n).contains(&follower)),
        "a follower that hears nothing from the leader stops serving"
    );
    n.heal();
    assert!(wait_until(Duration::from_secs(30), || serving(&n).len() == 3));
}

fn create(c: &mut RawClient, path: &str) -> io::Result<i32> {
    let req = Request::Create(CreateRequest::new(
        path,
        Bytes::new(),
        Acl::open_unsafe(),
        CreateMode::Persistent,
    ));
    Ok(c.call(&req)?.0.err)
}

#[test]
fn a_client_link_drops_resets_and_delays_as_told() {
    let _one = ONE_ENSEMBLE.lock().unwrap_or_else(|e| e.into_inner());
    let n = Nemesis::start(NemesisOptions::default()).expect("an ensemble behind proxies");
    let (c, _) = n.add_client("raw").unwrap();
    let at: SocketAddr = n.client_proxy_addr(c, 0).unwrap();
    let mut raw = RawClient::connect(at, 10_000).unwrap();
    assert_eq!(create(&mut raw, "/a").unwrap(), 0);

    // Dropped: no answer; healed, the request that waited is delivered and answered,
    // nothing lost on the way.
    n.set_link(Endpoint::Client(c), Endpoint::Server(0), Flow::Drop);
    raw.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    assert!(create(&mut raw, "/b").is_err(), "no answer while dropped");
    n.heal();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (h, r) = raw.recv_reply(OpCode::Create).unwrap();
    assert_eq!((h.err, r), (0, Some(Response::Path("/b".into()))));

    // Delayed: a round trip takes at least both delays.
    let delay = Duration::from_millis(300);
    n.set_link(
        Endpoint::Client(c),
        Endpoint::Server(0),
        Flow::Pass {
            delay,
            jitter: Duration::from_millis(50),
        },
    );
    let t = Instant::now();
    assert_eq!(create(&mut raw, "/c").unwrap(), 0);
    assert!(t.elapsed() >= 2 * delay, "{:?}", t.elapsed());
    n.heal();

    // One way: the answers dropped, the request applied all the same.
    n.set_flow(Endpoint::Server(0), Endpoint::Client(c), Flow::Drop);
    raw.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    assert!(create(&mut raw, "/d").is_err());
    let mut direct = RawClient::connect(n.ensemble().addr(0), 10_000).unwrap();
    let exists = |d: &mut RawClient| {
        d.call(&Request::Exists(PathWatch {
            path: "/d".into(),
            watch: false,
        }))
        .unwrap()
        .0
        .err
    };
    assert!(
        wait_until(Duration::from_secs(5), || exists(&mut direct) == 0),
        "applied"
    );

    // Reset: the open connection is reset, and so is a new one until healed.
    n.set_link(Endpoint::Client(c), Endpoint::Server(0), Flow::Reset);
    let err = create(&mut raw, "/e").unwrap_err();
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
        ),
        "{err:?}"
    );
    assert!(
        RawClient::connect(at, 10_000).is_err(),
        "a new connection is reset too"
    );
    n.heal();
    let mut again = RawClient::connect(at, 10_000).unwrap();
    assert_eq!(create(&mut again, "/f").unwrap(), 0);
}
