//! Contender names: the O(1) reading of a name's marker from ZooKeeper's fixed-width
//! sequence suffix (`contender::split`) agrees with the general rule (the last known
//! marker anywhere in the name, `contender::split_general`) on arbitrary names.

use proptest::prelude::*;
use zk_recipes::recipe::contender::{self, split, split_general, MARKERS};

/// A name made of pieces that make the cases meet: markers, digit runs (10 digits, more,
/// fewer), protected prefixes, stray marker fragments and arbitrary text.
fn name() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        proptest::sample::select(MARKERS.to_vec()).prop_map(String::from),
        (0u64..10_000_000_000).prop_map(|n| format!("{n:010}")),
        "[0-9]{1,12}",
        Just("_c_".to_string()),
        "[0-9a-f]{8}-",
        proptest::sample::select(vec![
            "_", "__", "-", "lock", "READ", "__rlock", "latch", "é"
        ])
        .prop_map(String::from),
        ".{0,6}",
    ];
    proptest::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

/// A listing: contender names of every marker (some ours, some duplicates, some with
/// the same sequence) among arbitrary names.
fn listing() -> impl Strategy<Value = Vec<String>> {
    let contender = (
        proptest::sample::select(vec!["_c_a-", "_c_b-", "x-", ""]),
        proptest::sample::select(MARKERS.to_vec()),
        0u64..40,
    )
        .prop_map(|(prefix, marker, seq)| format!("{prefix}{marker}{seq:010}"));
    let child = prop_oneof![4 => contender, 1 => name()];
    proptest::collection::vec(child, 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    /// Issue 25: waiters sharing one listing look themselves up in it sorted once; what
    /// each learns is what a pass over the listing tells.
    #[test]
    fn a_sorted_listing_tells_what_a_pass_over_it_tells(
        children in listing(),
        pick in any::<proptest::sample::Index>(),
        other in name(),
        reader in any::<bool>(),
        max in 0usize..6,
    ) {
        let sorted = contender::SortedListing::new(&children);
        let ours = if children.is_empty() { other.clone() } else { pick.get(&children).clone() };
        for ours in [&ours, &other] {
            prop_assert_eq!(
                sorted.blockers(&children, ours, reader),
                contender::blockers(&children, ours, reader),
                "{:?} in {:?}", ours, children
            );
            prop_assert_eq!(
                sorted.successors(&children, ours, max),
                contender::successors(&children, ours, max),
                "{:?} in {:?}", ours, children
            );
        }
    }

    #[test]
    fn the_fast_split_agrees_with_the_general_rule(name in name()) {
        prop_assert_eq!(split(&name), split_general(&name), "{:?}", name);
    }

    /// The general rule's own search (bytes, no searcher) finds what `str::rfind` finds.
    #[test]
    fn the_general_rule_is_the_last_marker_rfind_finds(name in name()) {
        prop_assert_eq!(split_general(&name), last_marker_by_rfind(&name), "{:?}", name);
    }

    #[test]
    fn a_curator_name_is_read_by_its_suffix(
        id in "[0-9a-f-]{0,40}",
        marker in proptest::sample::select(MARKERS.to_vec()),
        seq in 0u64..10_000_000_000,
    ) {
        let name = format!("_c_{id}-{marker}{seq:010}");
        let expected = format!("{seq:010}");
        prop_assert_eq!(split(&name), Some((marker, expected.as_str())));
        prop_assert_eq!(split(&name), split_general(&name));
    }
}

/// The general rule written with `str::rfind`: the last occurrence of any marker (at
/// the same position the longer one).
fn last_marker_by_rfind(name: &str) -> Option<(&'static str, &str)> {
    let (at, marker) = MARKERS
        .iter()
        .filter_map(|m| name.rfind(m).map(|i| (i, *m)))
        .max_by_key(|(i, m)| (*i, m.len()))?;
    Some((marker, &name[at + marker.len()..]))
}

/// What the fast path relies on: no marker holds a digit, nor another marker.
#[test]
fn markers_hold_no_digit_and_no_other_marker() {
    for m in MARKERS {
        assert!(!m.bytes().any(|b| b.is_ascii_digit()), "{m}");
        for other in MARKERS {
            assert!(m == other || !m.contains(other), "{m} holds {other}");
        }
    }
}

/// Names the two once could disagree on if the fast path took the first marker found
/// at the suffix instead of the general rule's choice: kept as fixed cases.
#[test]
fn fixed_cases() {
    for name in [
        "_c_x-lock-0000000001",
        "_c_x-lock-00000000001",
        "_c_x-lock-0000000001-latch-",
        "_c_lock-x-latch-0000000002",
        "x__rlock__0000000003",
        "x__lock__0000000004",
        "lock-lock-0000000005",
        "0000000006",
        "lock-",
        "é-lock-0000000007",
    ] {
        assert_eq!(split(name), split_general(name), "{name}");
        assert_eq!(split_general(name), last_marker_by_rfind(name), "{name}");
    }
    assert_eq!(
        contender::order_key("_c_a-lock-0000000001"),
        Some(("0000000001", "_c_a-lock-0000000001"))
    );
}
