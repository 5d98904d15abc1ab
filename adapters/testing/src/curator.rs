//! Apache Curator 5.4 from Debian (`apt-get install -y libcurator-recipes-java
//! libcurator-discovery-java`): a Java
//! program compiled against its jars, for the interop tests and the benches that run a
//! Curator client next to ours.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The jars under `/usr/share/java` a Curator recipe or discovery program needs.
const JARS: &[&str] = &[
    "curator-recipes",
    "curator-x-discovery",
    "jackson-databind",
    "jackson-core",
    "jackson-annotations",
    "curator-framework",
    "curator-client",
    "zookeeper",
    "guava",
    "slf4j-api",
];

/// A Java program compiled against Curator; its class directory goes on drop.
pub struct CuratorProgram {
    _classes: tempfile::TempDir,
    /// The classpath to run it with (`java -cp <classpath> <Main>`).
    pub classpath: String,
}

impl CuratorProgram {
    /// Compiles the Java source `src` (panics with what to install if the JDK or the
    /// Curator jars are missing, or if `javac` fails).
    pub fn compile(src: &Path) -> CuratorProgram {
        let dir = tempfile::tempdir().expect("a temporary directory");
        Self::compile_into(&[src.to_path_buf()], dir)
    }

    /// Compiles the Java sources `srcs` in one `javac` run (one JVM start for all)
    /// into a new directory under `parent`, e.g. a test binary's
    /// `CARGO_TARGET_TMPDIR`; panics as [`compile`](Self::compile) does.
    pub fn compile_all_in(srcs: &[PathBuf], parent: &Path) -> CuratorProgram {
        let dir = tempfile::Builder::new()
            .prefix("curator-classes-")
            .tempdir_in(parent)
            .expect("a temporary directory");
        Self::compile_into(srcs, dir)
    }

    fn compile_into(srcs: &[PathBuf], dir: tempfile::TempDir) -> CuratorProgram {
        let mut parts: Vec<String> = JARS
            .iter()
            .map(|j| {
                let p = PathBuf::from(format!("/usr/share/java/{j}.jar"));
                assert!(
                    p.exists(),
                    "{} missing: install with `apt-get install -y libcurator-recipes-java libcurator-discovery-java`",
                    p.display()
                );
                p.display().to_string()
            })
            .collect();
        parts.push(dir.path().display().to_string());
        let classpath = parts.join(":");
        let status = Command::new("javac")
            .arg("-cp")
            .arg(&classpath)
            .arg("-d")
            .arg(dir.path())
            .args(srcs)
            .status()
            .expect("javac (a JDK) is needed");
        assert!(status.success(), "javac failed on {srcs:?}");
        CuratorProgram {
            _classes: dir,
            classpath,
        }
    }
}
