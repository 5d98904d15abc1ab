//! Many raw calls in flight on one session, through both adapters: every call is
//! answered with its reply. Found while writing the cache's real-server test: the tokio
//! driver took commands off its channel in batches of 256 and dropped the one it took
//! after the 256th unhandled, so its caller saw `Closed` while the session was
//! connected (2 to 5 calls in 2,000).
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::runtime;
use zk_recipes_testing::TestServer;

use zk_recipes_blocking as zb;
use zk_recipes_tokio as zt;

const CALLS: usize = 2_000;

#[test]
fn every_raw_call_of_a_burst_is_answered_tokio() {
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    runtime().block_on(async {
        let zk = zt::connect(
            &cs,
            zt::Options::default().connect_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
        zk.create("/burst", "x", &zt::CreateOptions::default())
            .await
            .unwrap();
        let tasks: Vec<_> = (0..CALLS)
            .map(|_| {
                let zk = zk.clone();
                tokio::spawn(async move { zk.get_data("/burst").await.map(|(d, _)| d) })
            })
            .collect();
        let mut errors = BTreeMap::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(d) => assert_eq!(&d[..], b"x"),
                Err(e) => *errors.entry(format!("{e:?}")).or_insert(0) += 1,
            }
        }
        assert!(errors.is_empty(), "{CALLS} calls: {errors:?}");
    });
}

#[test]
fn every_raw_call_of_a_burst_is_answered_blocking() {
    let server = TestServer::start().expect("a real ZooKeeper");
    let zk = zb::connect(
        &server.connect_string(),
        zb::Options::default().connect_timeout(Duration::from_secs(10)),
    )
    .unwrap();
    zk.create("/burst", "x", &zb::CreateOptions::default())
        .unwrap();
    let threads: Vec<_> = (0..64)
        .map(|_| {
            let zk = zk.clone();
            std::thread::spawn(move || {
                (0..CALLS / 64)
                    .map(|_| zk.get_data("/burst").map(|(d, _)| d))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut errors = BTreeMap::new();
    for t in threads {
        for r in t.join().unwrap() {
            match r {
                Ok(d) => assert_eq!(&d[..], b"x"),
                Err(e) => *errors.entry(format!("{e:?}")).or_insert(0) += 1,
            }
        }
    }
    assert!(errors.is_empty(), "{errors:?}");
}
