//! kazoo's `NonBlockingLease` (Debian's `python3-kazoo` 2.8, `kazoo_lease.py`) and ours
//! on the same paths of a real ZooKeeper: kazoo takes a lease and ours is refused,
//! naming kazoo's identifier and end as kazoo wrote them; kazoo renews it; once it
//! ended ours takes it, and kazoo is refused and reads our record byte for byte as
//! kazoo writes one; ours renews it and kazoo is still refused. Then both try at once
//! on a fresh path, each under the other's lock: exactly one is granted. No lock node
//! of either is left.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::Proc;
use zk_recipes::recipe::lease::{decode_record, encode_record, Record};
use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, LeaseHolder, LeaseOutcome, Options};

/// Debian's Python, which has `python3-kazoo` (a `python3` earlier on PATH may not).
const PYTHON: &str = "/usr/bin/python3";

/// kazoo's answer to `try <path> <identifier> <secs>`: granted?, and the record after.
fn kazoo_try(kz: &mut Proc, path: &str, identifier: &str, secs: u32) -> (bool, String) {
    kz.send(&format!("try {path} {identifier} {secs}"));
    let line = kz.line("");
    let (verdict, record) = line.split_once(' ').expect("a verdict and the record");
    assert!(matches!(verdict, "GRANTED" | "REFUSED"), "{line}");
    (verdict == "GRANTED", record.to_string())
}

/// The holder a record names.
fn holder(record: &str) -> LeaseHolder {
    match decode_record(record.as_bytes()) {
        Some(Record::Holder(h)) => h,
        other => panic!("not kazoo's record: {record} ({other:?})"),
    }
}

fn wall() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_and_our_leases_refuse_renew_and_take_over_each_other() {
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/curator/kazoo_lease.py");
    let mut cmd = Command::new(PYTHON);
    cmd.arg(script).arg(&cs);
    let mut kz = Proc::spawn(cmd);
    kz.line("READY");
    let zk = connect(&cs, Options::default()).await.unwrap();
    const P: &str = "/interop/kazoo-lease/a";

    // kazoo holds it: ours is refused, told kazoo's identifier and end.
    let (granted, record) = kazoo_try(&mut kz, P, "kz", 2);
    assert!(granted, "{record}");
    let kazoos = holder(&record);
    let ours = zk
        .try_lease(P, Duration::from_secs(60), "ours")
        .await
        .unwrap();
    assert_eq!(
        ours,
        LeaseOutcome::Refused {
            holder: Some(kazoos.clone())
        }
    );
    // kazoo renews it (a new record).
    let czxid = zk
        .exists(&format!("{P}/lease_holder"))
        .await
        .unwrap()
        .unwrap()
        .czxid;
    let (granted, record) = kazoo_try(&mut kz, P, "kz", 2);
    assert!(granted, "kazoo's renewal: {record}");
    let renewed = holder(&record);
    assert!(renewed.end >= kazoos.end && renewed.identifier == "kz");
    let now = zk
        .exists(&format!("{P}/lease_holder"))
        .await
        .unwrap()
        .unwrap();
    assert!(now.czxid > czxid, "kazoo wrote its renewal");
    // Once kazoo's lease ended, ours takes it; kazoo is refused and reads our record,
    // byte for byte what kazoo writes.
    while wall() < renewed.end {
        tokio::time::sleep(renewed.end - wall() + Duration::from_millis(20)).await;
    }
    let LeaseOutcome::Granted { end } = zk
        .try_lease(P, Duration::from_secs(60), "ours")
        .await
        .unwrap()
    else {
        panic!("ours refused after kazoo's lease ended");
    };
    let (granted, record) = kazoo_try(&mut kz, P, "kz", 2);
    assert!(!granted, "kazoo granted over our live lease: {record}");
    assert_eq!(record, encode_record("ours", end));
    // Ours renews it; kazoo is still refused.
    let outcome = zk
        .try_lease(P, Duration::from_secs(120), "ours")
        .await
        .unwrap();
    let LeaseOutcome::Granted { end: later } = outcome else {
        panic!("our renewal refused: {outcome:?}");
    };
    assert!(later > end);
    let (granted, record) = kazoo_try(&mut kz, P, "kz", 2);
    assert!(!granted && holder(&record).end == later, "{record}");

    // Both at once on a fresh path: one grant.
    const Q: &str = "/interop/kazoo-lease/b";
    kz.send(&format!("try {Q} kz 60"));
    let ours = zk
        .try_lease(Q, Duration::from_secs(60), "ours")
        .await
        .unwrap();
    let line = kz.line("");
    let kazoo_granted = line.starts_with("GRANTED");
    assert!(
        ours.is_granted() != kazoo_granted,
        "ours {ours:?}, kazoo {line}"
    );
    let winner = if kazoo_granted { "kz" } else { "ours" };
    let (_, record) = line.split_once(' ').unwrap();
    assert_eq!(holder(record).identifier, winner);

    kz.send("quit");
    for p in [P, Q] {
        let left = zk.get_children(p).await.unwrap();
        assert_eq!(left, ["lease_holder"], "{p}: a lock node left behind");
    }
    zk.close().await;
}
