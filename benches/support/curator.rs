//! What the benches that compare with Apache Curator 5.4 need: Debian's Curator jars on
//! a classpath (`apt-get install libcurator-recipes-java`) and one of the Java programs
//! in `benches/curator/` compiled against them.

use std::path::Path;

pub use zk_recipes_testing::CuratorProgram;

/// Compiles `benches/curator/<program>.java`.
pub fn compiled(program: &str) -> CuratorProgram {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("benches/curator/{program}.java"));
    CuratorProgram::compile(&src)
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

/// Runs `benches/curator/<program>.java` with `args`, the protocol of the benches that
/// compare: it prints `READY`, starts on a line `go`, prints `RESULT <figures>`, closes
/// on another line. Returns the figures (the text after `RESULT `) and the requests the
/// server at `addr` received between `go` and `RESULT` (`mntr`'s `zk_packets_received`,
/// the probe's own packet subtracted).
#[allow(dead_code)] // not every bench runs a program this way
pub fn run_measured(program: &str, args: &[String], addr: std::net::SocketAddr) -> (String, i64) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let java = compiled(program);
    let mut child = Command::new("java")
        .args(["-cp", &java.classpath, program])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("the Curator program ended").unwrap();
    assert_eq!(next(), "READY");
    let before = mntr(addr, "zk_packets_received");
    stdin.write_all(b"go\n").unwrap();
    let result = next();
    let after = mntr(addr, "zk_packets_received");
    stdin.write_all(b"close\n").unwrap();
    assert!(child.wait().unwrap().success());
    let figures = result
        .strip_prefix("RESULT ")
        .unwrap_or_else(|| panic!("{program} said {result}"))
        .to_string();
    (figures, after - before - 1)
}
