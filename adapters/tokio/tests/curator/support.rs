//! What every Curator interop test needs: Debian's Curator 5.4 jars on a classpath and
//! one of the Java programs in `tests/curator/` compiled against them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

const JARS: &[&str] = &[
    "curator-recipes",
    "curator-framework",
    "curator-client",
    "zookeeper",
    "guava",
    "slf4j-api",
];

/// The Curator classpath (the jars under /usr/share/java) plus `extra`.
pub fn classpath(extra: &Path) -> String {
    let mut parts: Vec<String> = JARS
        .iter()
        .map(|j| {
            let p = PathBuf::from(format!("/usr/share/java/{j}.jar"));
            assert!(
                p.exists(),
                "{} missing: install with `apt-get install -y libcurator-recipes-java`",
                p.display()
            );
            p.display().to_string()
        })
        .collect();
    parts.push(extra.display().to_string());
    parts.join(":")
}

/// Compiles `tests/curator/<program>.java` into a temp dir; returns the dir (keep it
/// alive) and the classpath to run it with.
pub fn compiled(program: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/curator/{program}.java"));
    let cp = classpath(dir.path());
    let status = Command::new("javac")
        .arg("-cp")
        .arg(&cp)
        .arg("-d")
        .arg(dir.path())
        .arg(&src)
        .status()
        .expect("javac (JDK) is needed");
    assert!(status.success(), "javac failed");
    (dir, cp)
}
