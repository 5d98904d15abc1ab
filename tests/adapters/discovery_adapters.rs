// Service discovery against a real ZooKeeper 3.8, in each form: two registrants, a
// cache, the queries, picks from the cache, an update, a session expiry (the instance
// re-registered) and an unregistration.

use std::time::Duration;

use zk::{PickStrategy, ServiceCacheEvent, ServiceInstance};
use zk_recipes_testing::{expire_session, TestServer};

const W: Duration = Duration::from_secs(10);

/// The next cache event that is an instance change.
#[form]
async fn next_change(c: &mut zk::ServiceCacheHandle) -> ServiceCacheEvent {
    loop {
        match c
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("a cache event")
        {
            ServiceCacheEvent::Suspended
            | ServiceCacheEvent::Reconnected
            | ServiceCacheEvent::Synced => {}
            e => return e,
        }
    }
}

#[test]
fn register_cache_pick_update_expire_unregister() {
    run(register_cache_pick_update_expire_unregister_on(&mut server()));
}

#[form]
async fn register_cache_pick_update_expire_unregister_on(server: &mut TestServer) {
    let base = "/disco/services";
    let zk = connect(&server.connect_string()).await;
    let other = connect(&server.connect_string()).await;
    let mut cache = zk
        .service_cache_with(
            base,
            "web",
            PickStrategy::RoundRobin,
            zk::DownPolicy::default(),
        )
        .unwrap();
    assert!(within(W, cache.synced()).await.unwrap().unwrap().is_empty());

    let mut a = ServiceInstance::new("web", "a", "10.0.0.1", 8080);
    a.ssl_port = Some(8443);
    a.payload = Some(r#"{"zone":"eu","weight":[1,2]}"#.into());
    a.uri_spec = Some(ServiceInstance::parse_uri_spec("{scheme}://{address}:{port}"));
    a.registration_time_utc = 1_700_000_000_000;
    let mut ra = zk.register_service(base, &a).unwrap();
    let sa = created(&mut ra, W).await.unwrap();
    assert_eq!(sa.ephemeral_owner, zk.session_id(), "{}", NAME);
    let b = ServiceInstance::new("web", "b", "10.0.0.2", 9090);
    let mut rb = other.register_service(base, &b).unwrap();
    created(&mut rb, W).await.unwrap();
    let b = rb.instance().await.unwrap();
    assert!(b.registration_time_utc > 0, "stamped at registration");

    let mut added = Vec::new();
    while added.len() < 2 {
        match next_change(&mut cache).await {
            ServiceCacheEvent::Added(i) => added.push(i),
            e => panic!("{}: {e:?}", NAME),
        }
    }
    added.sort();
    assert_eq!(added, [a.clone(), b.clone()], "{}: every field intact", NAME);
    assert_eq!(
        zk.query_instances(base, "web").await.unwrap(),
        [a.clone(), b.clone()]
    );
    assert_eq!(other.query_names(base).await.unwrap(), ["web"]);
    // Curator's layout: <base>/<name>/<id>, ephemeral, the JSON as data.
    let (data, st) = other.get_data(&format!("{base}/web/a")).await.unwrap();
    assert_eq!(st.ephemeral_owner, zk.session_id());
    assert_eq!(&data[..], a.to_json().unwrap().as_bytes());

    // Picks come from the cache, in turn; a failing one is skipped.
    let mut picks = Vec::new();
    for _ in 0..4 {
        picks.push(cache.pick().await.unwrap().unwrap().id);
    }
    assert_eq!(picks, ["a", "b", "a", "b"], "{}", NAME);
    cache.note_error("a").unwrap();
    cache.note_error("a").unwrap();
    for _ in 0..3 {
        assert_eq!(cache.pick().await.unwrap().unwrap().id, "b");
    }

    // An update reaches the cache.
    let mut moved = a.clone();
    moved.port = Some(8081);
    ra.update(&moved).await.unwrap();
    match next_change(&mut cache).await {
        ServiceCacheEvent::Updated(i) => assert_eq!(i, moved),
        e => panic!("{}: {e:?}", NAME),
    }

    // b's session expires: its instance goes and is registered again.
    let old = other.session_id();
    expire_session(server.addr(), old, &other.session_password()).unwrap();
    match next_change(&mut cache).await {
        ServiceCacheEvent::Removed(i) => assert_eq!(i.id, "b"),
        e => panic!("{}: {e:?}", NAME),
    }
    match next_change(&mut cache).await {
        ServiceCacheEvent::Added(i) => assert_eq!(i, b),
        e => panic!("{}: {e:?}", NAME),
    }
    let (_, st) = zk.get_data(&format!("{base}/web/b")).await.unwrap();
    assert_ne!(st.ephemeral_owner, old);

    // Unregistering deletes the node; the cache sees it go.
    within(W, ra.unregister()).await.unwrap().unwrap();
    match next_change(&mut cache).await {
        ServiceCacheEvent::Removed(i) => assert_eq!(i.id, "a"),
        e => panic!("{}: {e:?}", NAME),
    }
    assert!(zk.exists(&format!("{base}/web/a")).await.unwrap().is_none());
    drop(rb);
    match next_change(&mut cache).await {
        ServiceCacheEvent::Removed(i) => assert_eq!(i.id, "b"),
        e => panic!("{}: {e:?}", NAME),
    }
    zk.close().await;
    other.close().await;
}
