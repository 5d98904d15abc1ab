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
