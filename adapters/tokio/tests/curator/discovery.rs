//! Interoperability with Apache Curator 5.4's `curator-x-discovery` (Debian's
//! `libcurator-discovery-java`): a Java `ServiceDiscovery` (`CuratorDiscovery.java`) and
//! ours register under one base path; each sees the other's instance with every field
//! intact, and each sees the other's instance vanish when its process is killed
//! (SIGKILL: no unregistration, the session simply expires).
//!
//! What Curator does (checked in its source, `ServiceDiscoveryImpl`, `ServiceInstance`,
//! `JsonInstanceSerializer`, `UriSpec`, `ServiceCacheImpl`): an instance is the node
//! `<base>/<name>/<id>`, `EPHEMERAL` for a `DYNAMIC` instance, its data the Jackson
//! JSON of the instance (payload typed with `"@class"`), re-registered after a session
//! loss; the cache follows the children of `<base>/<name>` and reads each one's data.
//!
//! Our registrant is a process of its own: this test binary run again with
//! `DISCO_CHILD=<connect string>` and the filter of [`rust_registrant_child`].

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options, ServiceCacheEvent, ServiceInstance, ServiceType};

use crate::support::{self as curator_support, Proc};

const BASE: &str = "/interop/services";
const W: Duration = Duration::from_secs(20);

fn ours() -> ServiceInstance {
    let mut i = ServiceInstance::new("web", "rust-1", "10.2.2.2", 8080);
    i.ssl_port = Some(8443);
    i.payload = Some(r#"{"lang":"rust","n":[1,2]}"#.into());
    i.registration_time_utc = 1_700_000_000_123;
    i.uri_spec = Some(ServiceInstance::parse_uri_spec(
        "{scheme}://{address}:{port}/r",
    ));
    i.enabled = false;
    i
}

/// Our registrant, when run as a child of [`curator_and_ours_see_each_other`].
#[tokio::test]
#[ignore = "the registrant process of curator_and_ours_see_each_other"]
async fn rust_registrant_child() {
    let Ok(cs) = std::env::var("DISCO_CHILD") else {
        return;
    };
    let options = Options::default().session_timeout(Duration::from_secs(2));
    let zk = connect(&cs, options).await.unwrap();
    let mut r = zk.register_service(BASE, &ours()).unwrap();
    r.created().await.unwrap();
    println!("REGISTERED");
    tokio::time::sleep(Duration::from_secs(120)).await;
}

#[test]
fn curator_and_ours_see_each_other() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(see_each_other());
}

async fn see_each_other() {
    let server = TestServer::start().unwrap();
    let cs = server.connect_string();
    let (_java, cp) = curator_support::compiled("CuratorDiscovery");
    let zk = connect(&cs, Options::default()).await.unwrap();
    let mut cache = zk.service_cache(BASE, "web").unwrap();
    cache.synced().await.unwrap();

    let mut java = Proc::java(&cp, "CuratorDiscovery", &[&cs, BASE]);
    java.line("READY");
    let mut rust = Proc::this_test("discovery::rust_registrant_child", &[("DISCO_CHILD", &cs)]);
    rust.line("REGISTERED");

    // Ours reads Curator's instance with every field.
    let theirs = loop {
        match tokio::time::timeout(W, cache.next()).await.unwrap() {
            Some(ServiceCacheEvent::Added(i)) if i.id == "java-1" => break i,
            Some(_) => {}
            None => panic!("the cache ended"),
        }
    };
    assert_eq!(
        (
            theirs.name.as_str(),
            theirs.address.as_deref(),
            theirs.port,
            theirs.ssl_port
        ),
        ("web", Some("10.1.1.1"), Some(7070), Some(7443))
    );
    let payload = theirs.payload.clone().unwrap_or_default();
    assert!(
        payload.starts_with(r#"{"@class":"java.util.HashMap","#)
            && payload.contains(r#""lang":"java""#)
            && payload.contains(r#""n":7"#),
        "the payload as Jackson wrote it: {payload}"
    );
    assert_eq!(theirs.service_type, ServiceType::Dynamic);
    assert!(theirs.enabled && theirs.registration_time_utc > 0);
    assert_eq!(theirs.uri().as_deref(), Some("https://10.1.1.1:7443/j"));

    // Curator reads ours with every field.
    assert_eq!(
        java.line("SAW"),
        "SAW name=web id=rust-1 address=10.2.2.2 port=8080 sslPort=8443 \
         payload={lang=rust, n=[1, 2]} time=1700000000123 type=DYNAMIC enabled=false \
         uri=https://10.2.2.2:8080/r"
    );

    // Our process killed: Curator sees our instance go once its session expires.
    rust.kill9();
    java.line("GONE");

    // Curator's process killed: ours sees its instance go (ours went too, above).
    java.kill9();
    let mut gone = Vec::new();
    while gone.len() < 2 {
        match tokio::time::timeout(W, cache.next()).await.unwrap() {
            Some(ServiceCacheEvent::Removed(i)) => gone.push(i.id),
            Some(_) => {}
            None => panic!("the cache ended"),
        }
    }
    gone.sort();
    assert_eq!(gone, ["java-1", "rust-1"]);
    assert!(cache.instances().await.unwrap().is_empty());
    zk.close().await;
}
