//! Inputs the recipe fuzz targets once failed on, replayed through the same harness
//! function the target calls (`zk_recipes_sim::testkit::<target>::run`). Each input is kept
//! byte for byte as `tests/data/fuzz/<target>-<hash>` (libFuzzer's crash artifact, the
//! `crash-` prefix replaced by the target's name); every one must now pass. Drop new
//! findings there: a file naming no known target fails
//! `every_kept_input_names_a_target_replayed_here`.

use std::path::PathBuf;

type Harness = fn(&[u8]) -> Result<(), String>;

/// The byte-driven fuzz targets and the harness each calls.
const TARGETS: &[(&str, Harness)] = &[
    ("cache", |b| {
        zk_recipes_sim::testkit::cache::run(b).map(drop)
    }),
    ("config", |b| {
        zk_recipes_sim::testkit::config::run(b).map(drop)
    }),
    ("delay_queue", |b| {
        zk_recipes_sim::testkit::delay_queue::run(b).map(drop)
    }),
    // (Not replayed: the target's own check that a service instance's JSON reads back
    // the same; a finding there is pinned in the instance's tests.)
    ("discovery", |b| {
        zk_recipes_sim::testkit::discovery::run(b).map(drop)
    }),
    (
        "double_barrier",
        zk_recipes_sim::testkit::double_barrier::run,
    ),
    ("election", zk_recipes_sim::testkit::election::run),
    ("group", |b| {
        zk_recipes_sim::testkit::group::run(b).map(drop)
    }),
    ("inspect", zk_recipes_sim::testkit::inspect::run),
    ("lease", |b| {
        zk_recipes_sim::testkit::lease::run(b).map(drop)
    }),
    ("lock", zk_recipes_sim::testkit::lock::run),
    ("multi_lock", |b| {
        zk_recipes_sim::testkit::multi_lock::run(b).map(drop)
    }),
    ("naming", |b| {
        zk_recipes_sim::testkit::naming::run(b).map(drop)
    }),
    ("partitioner", |b| {
        zk_recipes_sim::testkit::partitioner::run(b).map(drop)
    }),
    ("queue", |b| {
        zk_recipes_sim::testkit::queue::run(b).map(drop)
    }),
    ("semaphore", |b| {
        zk_recipes_sim::testkit::semaphore::run(b).map(drop)
    }),
    ("server_input", zk_recipes_sim::testkit::server_input::run),
    ("session", zk_recipes_sim::testkit::session::run),
    ("ttl_node", |b| {
        zk_recipes_sim::testkit::ttl_node::run(b).map(drop)
    }),
    ("two_phase", zk_recipes_sim::testkit::two_phase::run),
    ("value", |b| {
        zk_recipes_sim::testkit::value::run(b).map(drop)
    }),
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz")
}

/// The kept inputs as (target, file name, bytes).
fn kept() -> Vec<(String, String, Vec<u8>)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some((target, _hash)) = name.rsplit_once('-') else {
            panic!("{name}: not <target>-<hash>");
        };
        all.push((
            target.to_string(),
            name.clone(),
            std::fs::read(&path).unwrap(),
        ));
    }
    all.sort();
    all
}

/// Replays every kept input of `target`; the number replayed.
fn replay(target: &str) -> usize {
    let (_, run) = TARGETS.iter().find(|(t, _)| *t == target).unwrap();
    let mut checked = 0;
    for (t, name, bytes) in kept() {
        if t == target {
            run(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_kept_input_names_a_target_replayed_here() {
    for (target, name, _) in kept() {
        assert!(
            TARGETS.iter().any(|(t, _)| *t == target),
            "{name}: no harness for target {target}"
        );
    }
}

/// The fuzz targets that drive no harness of the test kit with their bytes (the codec's
/// round trip, the frame decoder, the simulator fed by the fuzzer's choices): a finding
/// of theirs is pinned as a test of the part it broke, not kept here.
const NOT_REPLAYED: &[&str] = &["codec_roundtrip", "frame_decode", "sim_schedule"];

#[test]
fn every_schedule_fuzz_target_has_a_harness_here() {
    let targets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for entry in std::fs::read_dir(targets).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        let target = name.strip_suffix(".rs").unwrap_or(&name);
        assert!(
            NOT_REPLAYED.contains(&target) || TARGETS.iter().any(|(t, _)| *t == target),
            "fuzz target {target}: its kept inputs would not be replayed (add it to TARGETS)"
        );
    }
}

/// `double_barrier-cfdc2b9c…` (a 300 s run, ~54 s in): the schedule has 212 peers
/// arrive; the harness's liveness phase let one peer leave per round for 200 rounds,
/// so 13 were still in `b` and our participation (in `Leaving`, our node deleted,
/// watching a peer) correctly waited for them. The harness now gives the phase rounds
/// for every member present.
#[test]
fn double_barrier_inputs() {
    assert!(replay("double_barrier") >= 1);
}

/// `cache-ed7463c6…` (a 300 s run, ~275 s in): a tiny cache (`max_nodes` 4, one-shot
/// watches) failed with `TooLarge` though the subtree never held more than 4 nodes: the
/// resync after a reconnect counted `/r/b/a`, cached but deleted while away and not
/// re-read yet, toward the limit when `/r/a/a` was listed. The machine was wrong: it
/// now counts only the nodes the load has seen (`cache_transcripts.rs`:
/// `a_resync_counts_only_the_nodes_it_has_seen_toward_max_nodes`).
#[test]
fn cache_inputs() {
    assert!(replay("cache") >= 1);
}

/// Every other target's kept inputs (none may be kept yet).
#[test]
fn other_targets_inputs() {
    for (target, _) in TARGETS {
        if !["double_barrier", "cache"].contains(target) {
            replay(target);
        }
    }
}
