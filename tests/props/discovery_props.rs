//! Property tests for service discovery: the registration and the cache of its
//! service over arbitrary replies, faults and other sessions' changes
//! (`zk_recipes_sim::testkit::discovery`): safety after every step, liveness and
//! cleanliness once faults stop; and the instance JSON: what we write reads back the
//! same, and any bytes read give an instance or an error, never a panic.

use proptest::prelude::*;
use zk_recipes::recipe::discovery::{ServiceInstance, ServiceType, UriPart};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]
    #[test]
    fn discovery_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes_sim::testkit::discovery::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9.:-]{0,12}",
        any::<String>(),
        Just("q\"\\/\u{1}\u{7f}é😀\n".to_string()),
    ]
}

fn payload() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(
            "{\"@class\":\"java.util.HashMap\",\"k\":[1,-2.5e3,true,null]}".into()
        )),
        any::<i64>().prop_map(|n| Some(format!("{n}"))),
        text().prop_map(|s| {
            let plain: String = s
                .chars()
                .filter(|c| !c.is_control() && !matches!(c, '\\' | '"'))
                .collect();
            Some(format!("\"{plain}\""))
        }),
    ]
}

prop_compose! {
    fn instance()(
        name in text(), id in text(), address in proptest::option::of(text()),
        port in proptest::option::of(any::<i32>()), ssl_port in proptest::option::of(any::<i32>()),
        payload in payload(), registration_time_utc in any::<i64>(), t in 0..4u8,
        uri in proptest::option::of(proptest::collection::vec((text(), any::<bool>()), 0..4)),
        enabled in any::<bool>(),
    ) -> ServiceInstance {
        ServiceInstance {
            name, id, address, port, ssl_port, payload, registration_time_utc,
            service_type: [ServiceType::Dynamic, ServiceType::Static, ServiceType::Permanent, ServiceType::DynamicSequential][usize::from(t)],
            uri_spec: uri.map(|v| v.into_iter().map(|(value, variable)| UriPart { value, variable }).collect()),
            enabled,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn instance_json_round_trips(i in instance()) {
        let json = i.to_json().unwrap();
        prop_assert_eq!(ServiceInstance::from_json(json.as_bytes()).unwrap(), i);
    }

    #[test]
    fn any_bytes_read_without_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = ServiceInstance::from_json(&data);
    }

    #[test]
    fn json_like_text_reads_without_panic(s in "[{}\\[\\]\":,0-9a-z\\\\ .eE+-]{0,120}") {
        let _ = ServiceInstance::from_json(s.as_bytes());
    }
}

/// A payload is refused unless it is one JSON value; deep nesting is refused, not a
/// stack overflow.
#[test]
fn bad_payloads_and_deep_nesting_are_errors() {
    let mut i = ServiceInstance::new("web", "1", "h", 1);
    for bad in ["", "{", "[1,]", "01", "1 2", "nul", "\"\\x\""] {
        i.payload = Some(bad.into());
        assert!(i.to_json().is_err(), "{bad:?}");
    }
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    i.payload = Some(deep.clone());
    assert!(i.to_json().is_err());
    let doc = format!("{{\"name\":\"web\",\"id\":\"1\",\"payload\":{deep}}}");
    assert!(ServiceInstance::from_json(doc.as_bytes()).is_err());
}

/// The harness is not vacuous: over many pseudo-random schedules instances come, change,
/// go and become unreadable, our node is lost and re-created, picks skip down
/// instances, and the common faults hit the session.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::discovery::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 1_000, 200) {
        total += zk_recipes_sim::testkit::discovery::run(&schedule).unwrap();
    }
    println!("{total:?}");
    assert!(
        total.added > 1_000 && total.updated > 0 && total.removed > 0,
        "{total:?}"
    );
    assert!(total.unreadable > 0 && total.syncs > 1_000, "{total:?}");
    assert!(
        total.created > 1_000 && total.lost > 0 && total.reconnected > 0,
        "{total:?}"
    );
    assert!(total.picks > 0 && total.picks_around_down > 0, "{total:?}");
    assert!(total.operator_deletes > 0, "{total:?}");
    let f = total.faults;
    assert!(f.lost_replies > 0 && f.stale_reconnects > 0, "{f:?}");
    assert!(f.refusals > 0 && f.expiries > 0, "{f:?}");
}
