//! Tree cache benchmark against a real ZooKeeper 3.8 (disk-backed data dir): `cargo
//! bench --bench cache` (`BENCH_QUICK=1`: a 2,000-node subtree).
//!
//! A subtree of 10,001 nodes (the root, 100 directories, 99 leaves of 32 bytes in each)
//! is created once; then, for our `TreeCache` (tokio adapter) and for Curator 5.4's
//! `CuratorCache` (`benches/curator/CuratorCacheBench.java`, Debian's
//! `libcurator-recipes-java`) on the same server and subtree, in turn:
//!
//! * load: time from starting the cache to `Initialized`;
//! * memory per cached node: live heap after the load minus before, divided by the
//!   nodes cached (ours: a counting global allocator in this process; Curator: used JVM
//!   heap after full GCs — a coarser measure);
//! * changes per second: a second session sets the data of 2,000 leaves (all requests
//!   in flight at once); the time until the cache has reported all 2,000 `Changed`.
//!
//! The bench fails (panics) if a cache misses a node or a change.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
mod curator;

use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, CacheEvent, Client, CreateOptions, Options};

mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicIsize, Ordering};

    /// Live heap bytes of this process.
    pub static LIVE: AtomicIsize = AtomicIsize::new(0);

    pub struct Counting;

    // SAFETY: forwards to the system allocator unchanged; only counts.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
            unsafe { System.realloc(p, l, new) }
        }
    }
}

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

fn live() -> isize {
    counting::LIVE.load(Ordering::Relaxed)
}

const ROOT: &str = "/bench-cache";
const CHANGES: usize = 2_000;

/// Runs `ops` with at most `width` in flight.
async fn pipelined<F>(ops: Vec<F>, width: usize)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for op in ops {
        if set.len() >= width {
            set.join_next().await.unwrap().unwrap();
        }
        set.spawn(op);
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

async fn populate(zk: &Client, dirs: usize, leaves: usize) -> Vec<String> {
    let opts = CreateOptions::default();
    zk.create(ROOT, "", &opts).await.unwrap();
    let mut ops = Vec::new();
    for d in 0..dirs {
        let zk = zk.clone();
        ops.push(async move {
            let p = format!("{ROOT}/d{d:03}");
            zk.create(&p, "", &CreateOptions::default()).await.unwrap();
        });
    }
    pipelined(ops, 256).await;
    let mut paths = Vec::new();
    let mut ops = Vec::new();
    for d in 0..dirs {
        for l in 0..leaves {
            let p = format!("{ROOT}/d{d:03}/leaf-{l:03}");
            paths.push(p.clone());
            let zk = zk.clone();
            ops.push(async move {
                let data = format!("{:032}", p.len() * 7919);
                zk.create(&p, data, &CreateOptions::default())
                    .await
                    .unwrap();
            });
        }
    }
    pipelined(ops, 256).await;
    paths
}

struct Figures {
    nodes: usize,
    load: Duration,
    bytes_per_node: f64,
    changes_per_s: f64,
}

async fn ours(cs: &str, changed: &[String]) -> Figures {
    let reader = connect(cs, Options::default()).await.unwrap();
    let writer = connect(cs, Options::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = live();
    let t = Instant::now();
    let mut cache = reader.tree_cache(ROOT).unwrap();
    let nodes = cache.initialized().await.unwrap();
    let load = t.elapsed();
    // The events of the load were read and dropped; what is left is the cache.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let held = live() - before;
    let ops: Vec<_> = changed
        .iter()
        .map(|p| {
            let (w, p) = (writer.clone(), p.clone());
            async move {
                w.set_data(&p, "changed-by-zk-recipes-bench-0000", None)
                    .await
                    .unwrap();
            }
        })
        .collect();
    let t = Instant::now();
    let writes = tokio::spawn(pipelined(ops, CHANGES));
    let mut seen = 0;
    while seen < changed.len() {
        match tokio::time::timeout(Duration::from_secs(60), cache.next())
            .await
            .expect("a change missed")
            .expect("the cache ended")
        {
            CacheEvent::Changed { .. } => seen += 1,
            e => panic!("unexpected {e:?}"),
        }
    }
    let changes_per_s = changed.len() as f64 / t.elapsed().as_secs_f64();
    writes.await.unwrap();
    drop(cache);
    Figures {
        nodes,
        load,
        bytes_per_node: held as f64 / nodes as f64,
        changes_per_s,
    }
}

fn curator(cs: &str, changed: &[String]) -> Figures {
    let java = curator::compiled("CuratorCacheBench");
    let list = std::env::temp_dir().join(format!("zk-bench-cache-{}.txt", std::process::id()));
    std::fs::write(&list, changed.join("\n")).unwrap();
    let out = Command::new("java")
        .args([
            "-Xmx1g",
            "-cp",
            &java.classpath,
            "CuratorCacheBench",
            cs,
            ROOT,
        ])
        .arg(&list)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&list);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "CuratorCacheBench: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let f: Vec<f64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
    Figures {
        nodes: f[0] as usize,
        load: Duration::from_millis(f[1] as u64),
        bytes_per_node: f[2],
        changes_per_s: f[3],
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (dirs, leaves) = if quick { (20, 99) } else { (100, 99) };
    let server = TestServer::start().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    let t = Instant::now();
    let paths = populate(&zk, dirs, leaves).await;
    let total = 1 + dirs + paths.len();
    println!(
        "server {cs} (data dir on disk); {total} nodes created in {:?}",
        t.elapsed()
    );
    // Every 5th leaf changes (2,000 of 9,900).
    let step = (paths.len() / CHANGES).max(1);
    let changed: Vec<String> = paths.iter().step_by(step).take(CHANGES).cloned().collect();
    let a = ours(&cs, &changed).await;
    assert_eq!(a.nodes, total, "our cache missed nodes");
    let c = tokio::task::spawn_blocking({
        let (cs, changed) = (cs.clone(), changed.clone());
        move || curator(&cs, &changed)
    })
    .await
    .unwrap();
    assert_eq!(c.nodes, total, "Curator's cache missed nodes");
    println!();
    println!(
        "| {:<24} | {:>7} | {:>9} | {:>14} | {:>12} |",
        "cache", "nodes", "load ms", "bytes / node", "changes / s"
    );
    println!(
        "|{:-<26}|{:->9}|{:->11}|{:->16}|{:->14}|",
        "", "", "", "", ""
    );
    for (name, f) in [
        ("zk-recipes TreeCache", &a),
        ("Curator 5.4 CuratorCache", &c),
    ] {
        println!(
            "| {:<24} | {:>7} | {:>9} | {:>14.0} | {:>12.0} |",
            name,
            f.nodes,
            f.load.as_millis(),
            f.bytes_per_node,
            f.changes_per_s
        );
    }
    println!(
        "({} changes; ours: heap counted by a global allocator; Curator: JVM used heap after GC)",
        changed.len()
    );
    drop(zk);
}
