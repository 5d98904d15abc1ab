//! `CYCLES=N <bench binary> <case>`: runs N cycles of one case of a machine bench and
//! nothing else (no criterion), so that an instruction counter sees only the machine:
//! `scripts/instructions` runs each case under callgrind at two N and reports the
//! difference per cycle (start-up cancels out). Load on the machine does not move it.

/// With `CYCLES=N` set: runs the case named by the first argument `N` times with
/// `run(case)` (false if there is no such case) and returns true; otherwise false (a
/// criterion run follows).
pub fn run_cycles(run: impl Fn(&str) -> bool) -> bool {
    let Ok(n) = std::env::var("CYCLES") else {
        return false;
    };
    let n: u64 = n.parse().expect("CYCLES=N: a whole number");
    let case = std::env::args().nth(1).unwrap_or_default();
    for _ in 0..n {
        assert!(run(&case), "no case {case:?}");
    }
    true
}
