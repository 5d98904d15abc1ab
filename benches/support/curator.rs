//! What the benches that compare with Apache Curator 5.4 need: Debian's Curator jars on
//! a classpath (`apt-get install libcurator-recipes-java`) and one of the Java programs
//! in `benches/curator/` compiled against them.

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

/// A compiled Java program; its class directory is removed on drop.
pub struct Compiled {
    dir: PathBuf,
    /// The classpath to run it with.
    pub classpath: String,
}

impl Drop for Compiled {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compiles `benches/curator/<program>.java`.
pub fn compiled(program: &str) -> Compiled {
    let dir = std::env::temp_dir().join(format!("zk-bench-{program}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
    parts.push(dir.display().to_string());
    let classpath = parts.join(":");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("benches/curator/{program}.java"));
    let status = Command::new("javac")
        .arg("-cp")
        .arg(&classpath)
        .arg("-d")
        .arg(&dir)
        .arg(&src)
        .status()
        .expect("javac (JDK) is needed");
    assert!(status.success(), "javac failed");
    Compiled { dir, classpath }
}

/// `mntr` value `key` of the server at `addr` (0 if missing).
#[allow(dead_code)] // not every bench counts requests
pub fn mntr(addr: std::net::SocketAddr, key: &str) -> i64 {
    zk_recipes_testing::four_letter(addr, "mntr")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}
