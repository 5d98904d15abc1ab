// kazoo's NonBlockingLease against a real ZooKeeper 3.8, in each form: a lease is
// granted with kazoo's record written and no lock node left, refused to another
// identifier naming the holder and its end, renewed by its holder, taken over once its
// end has passed; four identifiers trying at once get one grant, and three refusals
// naming the winner; a record not in kazoo's format is a clear error.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes_testing::TestServer;
use zk::{CreateOptions, LeaseHolder, LeaseOutcome};

#[test]
fn a_lease_is_granted_refused_renewed_and_taken_over_once_ended() {
    run(lease_on(&server(), "/lease/a"));
}

fn granted(o: &LeaseOutcome) -> Duration {
    match o {
        LeaseOutcome::Granted { end } => *end,
        other => panic!("{NAME}: not granted: {other:?}"),
    }
}

#[form]
async fn lease_on(server: &TestServer, path: &str) {
    let cs = server.connect_string();
    let (a, b) = (connect(&cs).await, connect(&cs).await);
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let end = granted(&a.try_lease(path, Duration::from_secs(2), "a").await.unwrap());
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(end.as_secs() >= before.as_secs() + 2 && end <= after + Duration::from_secs(2));
    let record = a.get_data(&format!("{path}/lease_holder")).await.unwrap().0;
    let text = zk_recipes::recipe::lease::format_time(end);
    assert_eq!(
        std::str::from_utf8(&record).unwrap(),
        format!(r#"{{"version": 1, "holder": "a", "end": "{text}"}}"#)
    );
    let left = a.get_children(path).await.unwrap();
    assert_eq!(left, ["lease_holder"], "{NAME}: the lock node is deleted");
    // Another identifier is refused, and told who holds it until when.
    let holder = Some(LeaseHolder {
        identifier: "a".into(),
        end,
    });
    let refused = b.try_lease(path, Duration::from_secs(2), "b").await.unwrap();
    assert_eq!(refused, LeaseOutcome::Refused { holder });
    // The holder renews it.
    let renewed = granted(&a.try_lease(path, Duration::from_secs(3), "a").await.unwrap());
    assert!(renewed > end, "{NAME}: {renewed:?} after {end:?}");
    // Once it ended, another identifier takes it.
    loop {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        if now >= renewed {
            break;
        }
        sleep(renewed - now + Duration::from_millis(20)).await;
    }
    granted(&b.try_lease(path, Duration::from_secs(60), "b").await.unwrap());
    a.close().await;
    b.close().await;
}

#[test]
fn four_at_once_get_one_grant_and_a_bad_record_is_a_clear_error() {
    run(contended_on(&server(), "/lease/b"));
}

#[form]
async fn contended_on(server: &TestServer, path: &str) {
    let cs = server.connect_string();
    let mut tries = Vec::new();
    for i in 0..4 {
        let (cs, path) = (cs.clone(), path.to_string());
        tries.push(spawn(move || async move {
            let zk = connect(&cs).await;
            let id = format!("w{i}");
            let o = zk.try_lease(&path, Duration::from_secs(60), &id).await;
            zk.close().await;
            (id, o.unwrap())
        }));
    }
    let mut outcomes = Vec::new();
    for t in tries {
        outcomes.push(t.join().await);
    }
    let winners: Vec<&(String, LeaseOutcome)> =
        outcomes.iter().filter(|(_, o)| o.is_granted()).collect();
    assert_eq!(winners.len(), 1, "{NAME}: {outcomes:?}");
    let (winner, o) = winners[0];
    let end = granted(o);
    for (_, o) in outcomes.iter().filter(|(id, _)| id != winner) {
        let holder = Some(LeaseHolder {
            identifier: winner.clone(),
            end,
        });
        assert_eq!(*o, LeaseOutcome::Refused { holder }, "{NAME}");
    }
    let zk = connect(&cs).await;
    let bad = format!("{path}-bad");
    zk.create(&bad, "", &CreateOptions::default())
        .await
        .unwrap();
    zk.create(&format!("{bad}/lease_holder"), "not json", &CreateOptions::default())
        .await
        .unwrap();
    let e = zk.try_lease(&bad, Duration::from_secs(1), "x").await;
    let want = zk::Error::BadLease {
        path: format!("{bad}/lease_holder"),
    };
    assert_eq!(e, Err(want), "{NAME}");
    assert_eq!(zk.get_children(&bad).await.unwrap(), ["lease_holder"]);
    zk.close().await;
}
