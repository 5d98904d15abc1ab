//! What every Curator interop test needs: one of the Java programs in `tests/curator/`
//! compiled against Debian's Curator 5.4 jars (`zk_recipes_testing::CuratorProgram`).

use std::path::Path;

use zk_recipes_testing::CuratorProgram;

/// Compiles `tests/curator/<program>.java`; returns the program (keep it alive: its
/// classes go with it) and the classpath to run it with.
pub fn compiled(program: &str) -> (CuratorProgram, String) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/curator/{program}.java"));
    let java = CuratorProgram::compile(&src);
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
