//! What every Curator interop test needs: one of the Java programs in `tests/curator/`
//! compiled against Debian's Curator 5.4 jars (`zk_recipes_testing::CuratorProgram`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use zk_recipes_testing::CuratorProgram;

/// Compiles `tests/curator/<program>.java`, once per program and process (`javac` is
/// seconds of CPU, and a program serves several tests): returns the program and the
/// classpath to run it with. The classes go to the target's temp directory
/// (`curator-classes/<program>`), compiled again by the next run of this binary.
pub fn compiled(program: &str) -> (Arc<CuratorProgram>, String) {
    static COMPILED: Mutex<BTreeMap<String, Arc<CuratorProgram>>> = Mutex::new(BTreeMap::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    let java = compiled
        .entry(program.to_string())
        .or_insert_with(|| {
            let src =
                Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/curator/{program}.java"));
            let classes = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("curator-classes")
                .join(program);
            Arc::new(CuratorProgram::compile_into(&src, &classes))
        })
        .clone();
    let cp = java.classpath.clone();
    (java, cp)
}

/// Reads a Java program's `ITEM <text>` lines until `DONE` (or its end) in a thread,
/// then waits for it; the items, in the order printed.
pub fn items_until_done(mut child: std::process::Child) -> std::thread::JoinHandle<Vec<String>> {
    use std::io::{BufRead, BufReader};
    let out = child.stdout.take().expect("the program's stdout piped");
    std::thread::spawn(move || {
        let mut items = Vec::new();
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            if let Some(item) = line.strip_prefix("ITEM ") {
                items.push(item.to_string());
            } else if line == "DONE" {
                break;
            }
        }
        let _ = child.wait();
        items
    })
}
