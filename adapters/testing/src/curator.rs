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

/// A Java program compiled against Curator; its class directory goes on drop (unless
/// it was compiled into a directory of the caller's, [`CuratorProgram::compile_into`]).
pub struct CuratorProgram {
    _classes: Option<tempfile::TempDir>,
    /// The classpath to run it with (`java -cp <classpath> <Main>`).
    pub classpath: String,
}

impl CuratorProgram {
    /// Compiles the Java source `src` (panics with what to install if the JDK or the
    /// Curator jars are missing, or if `javac` fails).
    pub fn compile(src: &Path) -> CuratorProgram {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut program = Self::compile_into(src, dir.path());
        program._classes = Some(dir);
        program
    }

    /// [`compile`](Self::compile) into `classes` (emptied first, kept after): for a
    /// program compiled once and run by many tests (`javac` is a JVM start, seconds of
    /// CPU).
    pub fn compile_into(src: &Path, classes: &Path) -> CuratorProgram {
        let _ = std::fs::remove_dir_all(classes);
        std::fs::create_dir_all(classes).expect("the class directory");
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
        parts.push(classes.display().to_string());
        let classpath = parts.join(":");
        let status = Command::new("javac")
            .arg("-cp")
            .arg(&classpath)
            .arg("-d")
            .arg(classes)
            .arg(src)
            .status()
            .expect("javac (a JDK) is needed");
        assert!(status.success(), "javac failed on {}", src.display());
        CuratorProgram {
            _classes: None,
            classpath,
        }
    }
}
