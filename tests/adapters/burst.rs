// Many raw calls in flight on one session, through both adapters: every call is
// answered with its reply. Found while writing the cache's real-server test: the tokio
// driver took commands off its channel in batches of 256 and dropped the one it took
// after the 256th unhandled, so its caller saw `Closed` while the session was
// connected (2 to 5 calls in 2,000).

use std::collections::BTreeMap;
use std::time::Duration;

use zk_recipes_testing::TestServer;

const CALLS: usize = 2_000;

#[test]
fn every_raw_call_of_a_burst_is_answered() {
    let server = server();
    run(every_raw_call_of_a_burst_is_answered_on(&server));
}

#[form]
async fn every_raw_call_of_a_burst_is_answered_on(server: &TestServer) {
    let zk = zk::connect(
        &server.connect_string(),
        zk::Options::default().connect_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    zk.create("/burst", "x", &zk::CreateOptions::default())
        .await
        .unwrap();
    // All calls at once as tasks (cheap); as threads, 64 at a time.
    let width = if NAME == "tokio" { CALLS } else { 64 };
    let mut parts = Vec::new();
    for _ in 0..width {
        let zk = zk.clone();
        parts.push(spawn(move || async move {
            let mut got = Vec::new();
            for _ in 0..CALLS / width {
                got.push(zk.get_data("/burst").await.map(|(d, _)| d));
            }
            got
        }));
    }
    let mut errors = BTreeMap::new();
    for p in parts {
        for r in p.join().await {
            match r {
                Ok(d) => assert_eq!(&d[..], b"x"),
                Err(e) => *errors.entry(format!("{e:?}")).or_insert(0) += 1,
            }
        }
    }
    assert!(errors.is_empty(), "{NAME}: {CALLS} calls: {errors:?}");
}
