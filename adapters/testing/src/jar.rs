//! Where the ZooKeeper server's classes are: the classpath a [`TestServer`] or a
//! [`TestEnsemble`] runs `java` with.
//!
//! Looked for in this order (a variable that is set but names nothing usable is an
//! error, not a reason to look further):
//! 1. `ZOOKEEPER_JAR`: a server jar whose manifest names its dependencies (Debian's
//!    does), or any classpath `java -cp` takes;
//! 2. `ZOOKEEPER_HOME`: an unpacked Apache release (`apache-zookeeper-3.x.y-bin`):
//!    `$ZOOKEEPER_HOME/lib/*` (its `zookeeper-3.x.y.jar` and every dependency) and
//!    `$ZOOKEEPER_HOME/conf`;
//! 3. Debian's `zookeeper` package: `/usr/share/java/zookeeper.jar` and
//!    `/etc/zookeeper/conf`.
//!
//! [`TestServer`]: crate::TestServer
//! [`TestEnsemble`]: crate::TestEnsemble

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// Debian's server jar.
pub const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The classpath to run a ZooKeeper server with, from the environment (see the
/// [module docs](self)); an error names every place it looked.
pub fn server_classpath() -> io::Result<String> {
    find_classpath(
        std::env::var_os("ZOOKEEPER_JAR"),
        std::env::var_os("ZOOKEEPER_HOME"),
        Path::new(DEBIAN_JAR),
    )
    .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))
}

/// [`server_classpath`] with its inputs given: `ZOOKEEPER_JAR`, `ZOOKEEPER_HOME` and
/// Debian's jar path.
pub fn find_classpath(
    jar: Option<OsString>,
    home: Option<OsString>,
    debian: &Path,
) -> Result<String, String> {
    let mut looked = Vec::new();
    match jar.filter(|j| !j.is_empty()) {
        Some(j) => {
            let path = PathBuf::from(&j);
            if path.is_file() {
                return Ok(path.display().to_string());
            }
            return Err(format!(
                "ZOOKEEPER_JAR={} names no file: point it at a ZooKeeper server jar, or unset it",
                path.display()
            ));
        }
        None => looked.push("ZOOKEEPER_JAR (not set)".into()),
    }
    match home.filter(|h| !h.is_empty()) {
        Some(h) => {
            let home = PathBuf::from(&h);
            let lib = home.join("lib");
            if release_jar(&lib).is_some() {
                let mut cp = format!("{}", lib.join("*").display());
                let conf = home.join("conf");
                if conf.is_dir() {
                    cp.push(':');
                    cp.push_str(&conf.display().to_string());
                }
                return Ok(cp);
            }
            return Err(format!(
                "ZOOKEEPER_HOME={} is not an unpacked Apache ZooKeeper release (no \
                 {}/zookeeper-*.jar): point it at the apache-zookeeper-3.x.y-bin folder, or unset it",
                home.display(),
                lib.display()
            ));
        }
        None => looked.push("ZOOKEEPER_HOME (not set)".into()),
    }
    if debian.is_file() {
        return Ok(format!("{}:/etc/zookeeper/conf", debian.display()));
    }
    looked.push(format!(
        "{} (Debian's zookeeper package: not installed)",
        debian.display()
    ));
    Err(format!(
        "no ZooKeeper server found; looked at {}. Install one: `sudo apt-get install -y \
         zookeeper` (Debian, Ubuntu), or unpack an Apache release \
         (apache-zookeeper-3.8.x-bin.tar.gz) and set ZOOKEEPER_HOME to its folder, or set \
         ZOOKEEPER_JAR. No JVM at hand? zk_recipes_testing::EmbeddedServer needs none.",
        looked.join(", ")
    ))
}

/// The `zookeeper-3.x.y.jar` in a release's `lib/`, if there is one.
fn release_jar(lib: &Path) -> Option<PathBuf> {
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("zookeeper-") && n.ends_with(".jar") && !n.contains("jute")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    #[test]
    fn zookeeper_jar_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let jar = dir.path().join("zk.jar");
        touch(&jar);
        let home = dir.path().join("release");
        touch(&home.join("lib/zookeeper-3.8.4.jar"));
        let cp = find_classpath(Some(jar.clone().into()), Some(home.into()), &jar).unwrap();
        assert_eq!(cp, jar.display().to_string());
    }

    #[test]
    fn an_unpacked_release_gives_its_lib_folder_and_conf() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("apache-zookeeper-3.8.4-bin");
        touch(&home.join("lib/zookeeper-3.8.4.jar"));
        touch(&home.join("lib/zookeeper-jute-3.8.4.jar"));
        std::fs::create_dir_all(home.join("conf")).unwrap();
        let missing = dir.path().join("none.jar");
        let cp = find_classpath(None, Some(home.clone().into()), &missing).unwrap();
        assert_eq!(
            cp,
            format!("{}/lib/*:{}/conf", home.display(), home.display())
        );
    }

    #[test]
    fn debians_jar_is_the_last_resort() {
        let dir = tempfile::tempdir().unwrap();
        let debian = dir.path().join("zookeeper.jar");
        touch(&debian);
        let cp = find_classpath(Some("".into()), None, &debian).unwrap();
        assert_eq!(cp, format!("{}:/etc/zookeeper/conf", debian.display()));
    }

    #[test]
    fn nothing_found_names_every_place_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let debian = dir.path().join("zookeeper.jar");
        let e = find_classpath(None, None, &debian).unwrap_err();
        assert!(e.contains("ZOOKEEPER_JAR (not set)"), "{e}");
        assert!(e.contains("ZOOKEEPER_HOME (not set)"), "{e}");
        assert!(e.contains(&debian.display().to_string()), "{e}");
        assert!(e.contains("apt-get install -y zookeeper"), "{e}");
    }

    #[test]
    fn a_variable_set_wrong_is_named_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let debian = dir.path().join("zookeeper.jar");
        touch(&debian);
        let jar = dir.path().join("gone.jar");
        let e = find_classpath(Some(jar.clone().into()), None, &debian).unwrap_err();
        assert!(
            e.contains(&format!("ZOOKEEPER_JAR={} names no file", jar.display())),
            "{e}"
        );
        let home = dir.path().join("not-a-release");
        touch(&home.join("lib/zookeeper-jute-3.8.4.jar"));
        let e = find_classpath(None, Some(home.clone().into()), &debian).unwrap_err();
        assert!(
            e.contains(&format!(
                "ZOOKEEPER_HOME={} is not an unpacked",
                home.display()
            )),
            "{e}"
        );
    }
}
