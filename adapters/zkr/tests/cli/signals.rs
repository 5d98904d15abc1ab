//! What reaches a command run directly (not through `sh -c`, whose shell resets its own
//! signal mask and would hide a mask inherited from zkr): the loss rule's SIGTERM, the
//! signals passed on, and SIGTERM when zkr itself is killed.

use super::*;

/// A command run directly (no shell in between, which would reset its signal mask):
/// Perl (always on Debian) that records `started <pid>`, then `term`, `int` or `hup`
/// when that signal reaches it, and dies of it (exit 128 + N, as a program that cleans
/// up and re-raises does). A command that never sees the signal is killed by zkr's
/// SIGKILL after `--grace` instead: 137, and no mark.
const TRAPS: &str = r#"
my $f = shift;
sub mark { open(my $h, '>>', $f) or die "$f: $!"; print $h "$_[0]\n"; close $h }
my $got;
$SIG{$_} = sub { $got = $_[0] } for qw(TERM INT HUP);
mark("started $$");
for (1 .. 600) {
    select(undef, undef, undef, 0.1);
    next unless $got;
    mark(lc $got);
    $SIG{$got} = 'DEFAULT';
    kill $got, $$;
    sleep 1;
    exit 99;
}
exit 3;
"#;

/// `zkr ARGS -- perl TRAPS MARK`, started and running its command. The grace is long
/// (20 s): a command stopped within the tests' 10 s was stopped by its signal.
fn trapping(server: &TestServer, args: &[&str], mark: &Path) -> Proc {
    let mut c = zkr(server);
    c.args(args)
        .args(["--grace", "20s", "--", "perl", "-e", TRAPS])
        .arg(mark);
    started(c, mark)
}

/// The pid the trapping command recorded.
fn trapped_pid(mark: &Path) -> u32 {
    let text = fs::read_to_string(mark).unwrap();
    let line = text.lines().find(|l| l.starts_with("started ")).unwrap();
    line["started ".len()..].parse().unwrap()
}

/// Is process `pid` gone (or a zombie nobody reaped yet)?
fn gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// A signal mask field (`SigBlk:`, `SigIgn:`) of a `/proc/PID/status` text.
fn mask_field(status: &str, name: &str) -> u64 {
    let line = status.lines().find(|l| l.starts_with(name)).unwrap();
    u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
}

/// `signals` as a `/proc/PID/status` mask.
pub(crate) fn mask(signals: &[u32]) -> u64 {
    signals.iter().map(|s| 1u64 << (s - 1)).sum()
}

/// The signals among SIGHUP, SIGINT and SIGTERM this test process ignores (and hands
/// down to the zkr it starts): run under `nohup`, SIGHUP. zkr keeps those ignored.
pub(crate) fn ignored_here() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    mask_field(&status, "SigIgn:") & mask(&[1, 2, 15])
}

/// The command starts as a shell would start it: no signal blocked, and none of the
/// ones zkr takes over (nor SIGPIPE) ignored; one that zkr's environment ignores
/// (`nohup`'s SIGHUP) stays ignored. `cat` is run directly, not through `sh -c`
/// (a shell resets its own mask and would hide the defect).
/// What reaches a command run directly, on one server (each costs a JVM start).
#[test]
fn signals_and_a_command_run_directly() {
    let server = TestServer::start().unwrap();
    a_command_starts_with_no_signal_blocked_or_ignored(&server);
    signals_reach_a_command_run_directly(&server);
}

fn a_command_starts_with_no_signal_blocked_or_ignored(server: &TestServer) {
    for args in [
        &["lock", "/locks/mask"][..],
        &["elect", "/election/mask", "--id", "m"][..],
        &["barrier", "/barrier/mask", "--count", "1"][..],
    ] {
        let o = zkr(server)
            .args(args)
            .args(["--", "cat", "/proc/self/status"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
        let status = stdout(&o);
        assert_eq!(
            mask_field(&status, "SigBlk:"),
            0,
            "{args:?}: blocked in CMD"
        );
        // SIGPIPE (which zkr's runtime ignores) at its default; the others as the
        // environment left them (not ignored, unless zkr was started ignoring them).
        assert_eq!(
            mask_field(&status, "SigIgn:") & mask(&[1, 2, 13, 15]),
            ignored_here(),
            "{args:?}: ignored in CMD"
        );
    }
    // Under `nohup` (SIGHUP ignored when zkr starts) zkr leaves SIGHUP alone: the
    // command starts with it ignored too, as a shell would start it.
    let o = Command::new("nohup")
        .arg(env!("CARGO_BIN_EXE_zkr"))
        .env("ZK_SERVERS", server.connect_string())
        .args(["lock", "/locks/nohup", "--", "cat", "/proc/self/status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let status = stdout(&o);
    assert_eq!(mask_field(&status, "SigBlk:"), 0);
    assert_eq!(
        mask_field(&status, "SigIgn:") & mask(&[1, 2, 13, 15]),
        mask(&[1]) | ignored_here(),
        "SIGHUP ignored, as nohup left it"
    );
}

/// The signals of the loss rule and the ones passed on reach a command run directly:
/// it runs its trap and dies of the signal (143, 130, 129), long before the 20 s grace
/// would have SIGKILLed it (137). And when zkr itself is killed (-9), the command gets
/// SIGTERM at once (see docs/zkr.md): it does not run on unguarded.
fn signals_reach_a_command_run_directly(server: &TestServer) {
    let zk = client(server);
    let dir = tempfile::tempdir().unwrap();
    let within = Duration::from_secs(10);

    // The lock node deleted: SIGTERM, the trap runs, 143.
    let mark = dir.path().join("deleted");
    let mut lock = trapping(server, &["lock", "/locks/deleted"], &mark);
    delete_lock_node(&zk, "/locks/deleted");
    assert_eq!(wait_exit(&mut lock.0, within).code(), Some(143));
    wait_for(&mark, "term", Duration::ZERO);

    // SIGTERM, SIGINT (Ctrl-C) and SIGHUP sent to zkr are passed on to the command.
    for (sig, name, number) in [
        ("-TERM", "term", 15),
        ("-INT", "int", 2),
        ("-HUP", "hup", 1),
    ] {
        if ignored_here() & mask(&[number]) != 0 {
            continue; // ignored in this environment (nohup): zkr leaves it ignored
        }
        let code = 128 + number as i32;
        let mark = dir.path().join(name);
        let mut lock = trapping(server, &["lock", "/locks/passed"], &mark);
        signal(&lock.0, sig);
        assert_eq!(wait_exit(&mut lock.0, within).code(), Some(code), "{sig}");
        wait_for(&mark, name, Duration::ZERO);
    }

    // zkr killed under `lock` and under `elect`: the command gets SIGTERM at once.
    for (args, dir_node) in [
        (&["lock", "/locks/killed"][..], "/locks/killed"),
        (
            &["elect", "/election/killed", "--id", "k"][..],
            "/election/killed",
        ),
    ] {
        let mark = dir.path().join(dir_node.replace('/', "_"));
        let mut run = trapping(server, args, &mark);
        let pid = trapped_pid(&mark);
        signal(&run.0, "-KILL");
        assert_eq!(wait_exit(&mut run.0, within).code(), None, "{args:?}");
        wait_for(&mark, "term", within);
        let deadline = Instant::now() + within;
        while !gone(pid) {
            assert!(Instant::now() < deadline, "{args:?}: CMD {pid} still runs");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A dropped connection under `--stop-on-suspend` stops the command at once with a
/// SIGTERM it receives (143), not SIGKILL after the grace.
#[test]
fn a_lost_server_under_stop_on_suspend_sigterms_a_command_run_directly() {
    let mut server = TestServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("mark");
    let mut lock = trapping(
        &server,
        &[
            "lock",
            "/locks/eager",
            "--session-timeout",
            "30s",
            "--stop-on-suspend",
        ],
        &mark,
    );
    let killed_at = Instant::now();
    server.kill().unwrap();
    assert_eq!(
        wait_exit(&mut lock.0, Duration::from_secs(15)).code(),
        Some(143)
    );
    wait_for(&mark, "term", Duration::ZERO);
    assert!(killed_at.elapsed() < Duration::from_secs(15));
}
