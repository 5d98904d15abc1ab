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
