//! What the benches that compare with kazoo need: a script of `benches/kazoo/` run by
//! Debian's Python (`python3-kazoo`; a `python3` earlier on PATH may lack kazoo), its
//! stdout read line by line, commands written to its stdin.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Debian's Python, which has `python3-kazoo`.
pub const PYTHON: &str = "/usr/bin/python3";

/// A running kazoo script.
pub struct Script {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Script {
    /// Starts `benches/kazoo/<script>` with `args` and waits for its `READY` line;
    /// `Err` with the line it printed instead (`SKIP <why>` when kazoo is missing).
    pub fn ready(script: &str, args: &[String]) -> Result<Script, String> {
        let path = format!("{}/benches/kazoo/{script}", env!("CARGO_MANIFEST_DIR"));
        let mut child = Command::new(PYTHON)
            .arg(path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{PYTHON} cannot be started: {e}"))?;
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = Script {
            child,
            stdin,
            lines,
        };
        match s.next() {
            ready if ready == "READY" => Ok(s),
            other => {
                let _ = s.child.wait();
                Err(other)
            }
        }
    }

    /// Its next line (`(no output)` once its output ends).
    pub fn next(&mut self) -> String {
        self.lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| "(no output)".into())
    }

    /// Writes `line` and a newline to its stdin.
    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits for it to exit: did it succeed?
    pub fn success(mut self) -> bool {
        self.child.wait().unwrap().success()
    }
}
