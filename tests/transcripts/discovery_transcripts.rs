//! Transcript tests for `recipe::discovery`: the instance JSON against what Curator 5.4
//! writes, the registration's and the cache's exact requests and events, and the
//! provider's picks.

use super::kit::*;
use core::time::Duration;
use zk_recipes::recipe::discovery::{
    DownPolicy, InstanceError, Provider, Registration, RegistrationEvent, ServiceCache,
    ServiceCacheEvent, ServiceInstance, ServiceType, Strategy, UriPart,
};

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;

/// Bytes Curator 5.4's `JsonInstanceSerializer<Map>` wrote for an instance with a
/// `HashMap` payload, an SSL port and a `uriSpec` (captured from the real jar).
const CURATOR: &str = r#"{"name":"web","id":"id-1","address":"10.0.0.1","port":8080,"sslPort":8443,"payload":{"@class":"java.util.HashMap","k":"v"},"registrationTimeUTC":1795975317077,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/x","variable":false}]}}"#;

fn curators() -> ServiceInstance {
    let mut i = ServiceInstance::new("web", "id-1", "10.0.0.1", 8080);
    i.ssl_port = Some(8443);
    i.payload = Some(r#"{"@class":"java.util.HashMap","k":"v"}"#.into());
    i.registration_time_utc = 1_795_975_317_077;
    i.uri_spec = Some(ServiceInstance::parse_uri_spec(
        "{scheme}://{address}:{port}/x",
    ));
    i
}

#[test]
fn an_instance_curator_wrote_reads_with_every_field() {
    let i = ServiceInstance::from_json(CURATOR.as_bytes()).unwrap();
    assert_eq!(i, curators());
    assert!(i.enabled, "Curator 5.4 leaves `enabled` out: enabled");
    assert_eq!(i.uri().as_deref(), Some("https://10.0.0.1:8080/x"));
}

#[test]
fn we_write_curators_fields_in_its_order_plus_enabled() {
    let json = curators().to_json().unwrap();
    let expected = format!("{},\"enabled\":true}}", &CURATOR[..CURATOR.len() - 1]);
    assert_eq!(json, expected);
    let mut off = curators();
    off.enabled = false;
    off.payload = None;
    off.uri_spec = None;
    off.port = None;
    off.service_type = ServiceType::Static;
    assert_eq!(
        off.to_json().unwrap(),
        r#"{"name":"web","id":"id-1","address":"10.0.0.1","port":null,"sslPort":8443,"payload":null,"registrationTimeUTC":1795975317077,"serviceType":"STATIC","uriSpec":null,"enabled":false}"#
    );
}

#[test]
fn strings_are_escaped_and_unescaped() {
    let mut i = ServiceInstance::new("w\"e\\b\n", "é😀\u{1}", "h", 1);
    i.payload = Some("\"\\u00e9\\ud83d\\ude00\"".into());
    let json = i.to_json().unwrap();
    assert!(
        json.starts_with(r#"{"name":"w\"e\\b\n","id":"é😀\u0001","#),
        "{json}"
    );
    assert_eq!(ServiceInstance::from_json(json.as_bytes()).unwrap(), i);
    let read = ServiceInstance::from_json(
        br#"{"id":"\u00e9\ud83d\ude00","name":"a\/b","extra":[{"x":1}]}"#,
    )
    .unwrap();
    assert_eq!((read.id.as_str(), read.name.as_str()), ("é😀", "a/b"));
    assert!(read.enabled && read.address.is_none() && read.payload.is_none());
}

#[test]
fn unreadable_instances_are_clear_errors() {
    assert_eq!(
        ServiceInstance::from_json(br#"{"name":"web"}"#),
        Err(InstanceError::Missing("id"))
    );
    assert_eq!(
        ServiceInstance::from_json(br#"{"name":"w","id":"1","serviceType":"ODD"}"#),
        Err(InstanceError::Field("serviceType"))
    );
    assert_eq!(
        ServiceInstance::from_json(br#"{"name":"w","id":"1","port":4294967296}"#),
        Err(InstanceError::Syntax {
            at: 28,
            what: "an integer in 32 bits"
        })
    );
    assert!(ServiceInstance::from_json(br#"{"name":"w","id":"1"} x"#).is_err());
    assert!(ServiceInstance::from_json(b"").is_err());
}

fn connected<R: Recipe>(r: &mut R) {
    r.handle_session(T, SessionChange::Connected { session_id: S });
}

#[test]
fn registration_creates_the_ephemeral_instance_node_and_unregisters() {
    let mine = ServiceInstance::new("web", "me", "h", 1);
    let json = mine.to_json().unwrap();
    let mut r = Registration::new("/s", &mine).unwrap();
    connected(&mut r);
    r.register(T);
    let s = expect_sent!(
        r,
        [
            format!("create2 /s/web/me e '{json}'"),
            "get! /s/web/me".to_string()
        ]
    );
    let stat = st().czxid(5).mzxid(5).owner(S);
    r.handle_reply(T, s[0].0, created2("/s/web/me", stat));
    r.handle_reply(T, s[1].0, data(&json, stat));
    assert_eq!(events(&mut r), [RegistrationEvent::Created { stat }]);
    assert!(r.is_registered());
    // An update writes the new JSON.
    let mut moved = mine.clone();
    moved.port = Some(2);
    r.update(T, &moved).unwrap();
    let new = moved.to_json().unwrap();
    let s = expect_sent!(r, [format!("set /s/web/me '{new}'")]);
    r.handle_reply(T, s[0].0, stat_reply(stat.mzxid(6).version(1)));
    assert_eq!(
        events(&mut r),
        [RegistrationEvent::DataSet {
            stat: stat.mzxid(6).version(1)
        }]
    );
    // Another id is not an update.
    let other = ServiceInstance::new("web", "other", "h", 1);
    assert!(r.update(T, &other).is_err());
    assert!(sent(&mut r).is_empty());
    r.unregister(T);
    let s = expect_sent!(r, ["delete /s/web/me"]);
    r.handle_reply(T, s[0].0, ok());
    assert_eq!(events(&mut r), [RegistrationEvent::Removed]);
    assert!(r.is_done());
}

#[test]
fn static_instances_are_persistent_and_sequential_ones_are_refused() {
    let mut i = ServiceInstance::new("web", "st", "h", 1);
    i.service_type = ServiceType::Permanent;
    let mut r = Registration::new("/s", &i).unwrap();
    connected(&mut r);
    r.register(T);
    let s = sent(&mut r);
    let l = lines(&s);
    assert!(l[0].starts_with("create2 /s/web/st '{"), "{l:?}");
    i.service_type = ServiceType::DynamicSequential;
    let mut r = Registration::new("/s", &i).unwrap();
    connected(&mut r);
    r.register(T);
    assert!(sent(&mut r).is_empty());
    assert_eq!(
        events(&mut r),
        [RegistrationEvent::Failed {
            error: Error::Server(ErrorCode::BadArguments)
        }]
    );
    i.service_type = ServiceType::Dynamic;
    i.payload = Some("{oops".into());
    assert!(Registration::new("/s", &i).is_err());
}

fn inst(id: &str, port: i32) -> ServiceInstance {
    ServiceInstance::new("web", id, "h", port)
}

fn json(i: &ServiceInstance) -> String {
    i.to_json().unwrap()
}

#[test]
fn cache_reports_added_updated_removed_and_unreadable() {
    let mut c = ServiceCache::new("/s", "web", Strategy::RoundRobin, DownPolicy::default());
    connected(&mut c);
    c.start(T);
    let s = expect_sent!(c, ["list! /s/web"]);
    c.handle_reply(T, s[0].0, children(&["b", "a"]));
    let r = expect_sent!(c, ["get! /s/web/a", "get! /s/web/b"]);
    c.handle_reply(
        T,
        r[0].0,
        data(&json(&inst("a", 1)), st().czxid(1).mzxid(1)),
    );
    c.handle_reply(
        T,
        r[1].0,
        data(&json(&inst("b", 2)), st().czxid(2).mzxid(2)),
    );
    assert_eq!(
        events(&mut c),
        [
            ServiceCacheEvent::Added(inst("a", 1)),
            ServiceCacheEvent::Added(inst("b", 2)),
            ServiceCacheEvent::Synced
        ]
    );
    // a changes: one read of a, no listing (no herd).
    c.handle_watch(T, r[0].0, &ev(EventType::NodeDataChanged, "/s/web/a"));
    let r2 = expect_sent!(c, ["get! /s/web/a"]);
    c.handle_reply(
        T,
        r2[0].0,
        data(&json(&inst("a", 9)), st().czxid(1).mzxid(3)),
    );
    assert_eq!(events(&mut c), [ServiceCacheEvent::Updated(inst("a", 9))]);
    // b's data becomes unreadable: removed from the cache, reported.
    c.handle_watch(T, r[1].0, &ev(EventType::NodeDataChanged, "/s/web/b"));
    let r3 = expect_sent!(c, ["get! /s/web/b"]);
    c.handle_reply(T, r3[0].0, data("junk", st().czxid(2).mzxid(4)));
    assert_eq!(
        events(&mut c),
        [
            ServiceCacheEvent::Removed(inst("b", 2)),
            ServiceCacheEvent::Unreadable {
                id: "b".into(),
                error: InstanceError::Syntax { at: 0, what: "`{`" }
            }
        ]
    );
    assert_eq!(c.instances(), [inst("a", 9)]);
    // a is deleted: removed at once.
    c.handle_watch(T, r2[0].0, &ev(EventType::NodeDeleted, "/s/web/a"));
    assert_eq!(events(&mut c), [ServiceCacheEvent::Removed(inst("a", 9))]);
    assert!(c.instances().is_empty());
    assert_eq!(c.pick(T), None);
}

#[test]
fn round_robin_skips_disabled_and_down_instances_until_the_policy_forgets() {
    let mut off = inst("c", 3);
    off.enabled = false;
    let all = [inst("a", 1), inst("b", 2), off];
    let policy = DownPolicy {
        timeout: Duration::from_secs(30),
        threshold: 2,
    };
    let mut p = Provider::new(Strategy::RoundRobin, policy);
    let ids = |p: &mut Provider, n: usize| -> Vec<String> {
        (0..n).map(|_| p.pick(&all).unwrap().id.clone()).collect()
    };
    assert_eq!(ids(&mut p, 4), ["a", "b", "a", "b"]);
    p.note_error(T, "a");
    assert!(!p.is_down("a"), "one error is below the threshold");
    p.note_error(T + Duration::from_secs(1), "a");
    assert!(p.is_down("a"));
    assert_eq!(ids(&mut p, 2), ["b", "b"]);
    assert_eq!(p.poll_timeout(), Some(T + Duration::from_secs(30)));
    p.handle_timeout(T + Duration::from_secs(29));
    assert!(p.is_down("a"));
    p.handle_timeout(T + Duration::from_secs(30));
    assert!(!p.is_down("a") && p.poll_timeout().is_none());
    assert_eq!(ids(&mut p, 2), ["a", "b"]);
}

#[test]
fn random_picks_follow_the_seed_and_sticky_keeps_its_instance() {
    let all: Vec<ServiceInstance> = (0..5).map(|k| inst(&format!("i{k}"), k)).collect();
    let picks = |seed| {
        let mut p = Provider::new(Strategy::Random { seed }, DownPolicy::default());
        (0..20)
            .map(|_| p.pick(&all).unwrap().port.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(picks(7), picks(7));
    assert_ne!(picks(7), picks(8));
    assert!(
        picks(7)
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 2
    );
    let policy = DownPolicy {
        timeout: Duration::from_secs(1),
        threshold: 1,
    };
    let mut p = Provider::new(Strategy::Sticky, policy);
    let first = p.pick(&all).unwrap().id.clone();
    assert!((0..5).all(|_| p.pick(&all).unwrap().id == first));
    p.note_error(T, &first);
    let next = p.pick(&all).unwrap().id.clone();
    assert_ne!(next, first);
    assert!((0..5).all(|_| p.pick(&all).unwrap().id == next));
}

#[test]
fn uri_specs_parse_and_build_as_curators() {
    assert_eq!(
        ServiceInstance::parse_uri_spec("{scheme}://x:{port}"),
        [
            UriPart {
                value: "scheme".into(),
                variable: true
            },
            UriPart {
                value: "://x:".into(),
                variable: false
            },
            UriPart {
                value: "port".into(),
                variable: true
            },
        ]
    );
    let mut i = inst("a", 80);
    i.uri_spec = Some(ServiceInstance::parse_uri_spec(
        "{scheme}://{address}:{port}/{name}",
    ));
    assert_eq!(i.uri().as_deref(), Some("http://h:80/web"));
}
