//! What every Curator interop test needs: the Java programs of `tests/curator/`
//! compiled against Debian's Curator 5.4 jars (`zk_recipes_testing::CuratorProgram`),
//! and a child process to talk to (a Java peer, or our side as a process of its own).

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use zk_recipes_testing::CuratorProgram;

/// Every program of `tests/curator/`, compiled once per test binary run in one `javac`
/// run (a JVM start each cost about 3 s of CPU per test).
static PROGRAMS: OnceLock<CuratorProgram> = OnceLock::new();

/// Checks that `tests/curator/<program>.java` is compiled (all of them are, once, on
/// the first call) and returns the classpath to run it with. The classes live under
/// the binary's `CARGO_TARGET_TMPDIR` (a static is never dropped: directories of runs
/// that ended more than an hour ago are removed here).
pub fn compiled(program: &str) -> ((), String) {
    let java = PROGRAMS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator");
        let mut srcs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "java"))
            .collect();
        srcs.sort();
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR"));
        remove_stale(parent);
        CuratorProgram::compile_all_in(&srcs, parent)
    });
    let classes = java.classpath.rsplit(':').next().unwrap();
    assert!(
        Path::new(classes).join(format!("{program}.class")).exists(),
        "no tests/curator/{program}.java"
    );
    ((), java.classpath.clone())
}

/// Removes the class directories of earlier runs (older than an hour).
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < hour_ago);
        if old
            && e.file_name()
                .to_string_lossy()
                .starts_with("curator-classes-")
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
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

/// A child process (a Java peer, or this test binary run again as our side's process)
/// whose stdout lines are read in a thread; killed with SIGKILL on drop.
pub struct Proc {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

/// How long [`Proc::line`] waits for a line.
const LINE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Proc {
    /// Starts `cmd` with stdin and stdout piped (stderr dropped unless
    /// `INTEROP_STDERR` is set).
    pub fn spawn(mut cmd: std::process::Command) -> Proc {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("INTEROP_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("the process starts");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    /// `java -cp <cp> <main> <args...>`.
    pub fn java(cp: &str, main: &str, args: &[&str]) -> Proc {
        let mut cmd = std::process::Command::new("java");
        cmd.arg("-cp").arg(cp).arg(main).args(args);
        Proc::spawn(cmd)
    }

    /// This test binary run again for the ignored test `test` alone, with `env` set
    /// (our side's process, which a test can kill).
    pub fn this_test(test: &str, env: &[(&str, &str)]) -> Proc {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", test, "--ignored", "--nocapture"]);
        cmd.envs(env.iter().copied());
        Proc::spawn(cmd)
    }

    /// The next line that starts with `prefix`, skipping others (libtest's own
    /// lines); panics after 30 s without one, or if the process's output ends.
    pub fn line(&mut self, prefix: &str) -> String {
        let deadline = std::time::Instant::now() + LINE_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let l = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no `{prefix}` line: {e}"));
            if l.starts_with(prefix) {
                return l;
            }
        }
    }

    /// Skips lines until one equals `line` (30 s at most).
    pub fn until(&mut self, line: &str) {
        let deadline = std::time::Instant::now() + LINE_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l == line => return,
                Ok(_) => {}
                Err(e) => panic!("no line `{line}`: {e}"),
            }
        }
    }

    /// Writes `command` and a newline to its stdin.
    pub fn send(&mut self, command: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("stdin piped");
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
    }

    /// SIGKILL (`Child::kill` on Unix), then reaped.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Every line up to (not including) one equal to `end` (30 s at most).
    pub fn lines_until(&mut self, end: &str) -> Vec<String> {
        let deadline = std::time::Instant::now() + LINE_WAIT;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l == end => return lines,
                Ok(l) => lines.push(l),
                Err(e) => panic!("no line `{end}`: {e}"),
            }
        }
    }
}
