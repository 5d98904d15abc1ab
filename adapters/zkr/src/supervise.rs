//! Running CMD: in a process group of its own, watched together with what zkr holds for
//! it. The loss rule: when the hold ends (lock or leadership lost), CMD's whole group gets
//! SIGTERM, then SIGKILL if it is still running `grace` later. Signals zkr receives
//! (SIGINT, SIGTERM, SIGHUP) are passed on to the group, with the same escalation.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::sys;
use crate::zk::Hold;

/// How often zkr looks at CMD while it waits on the hold's events (the latency of
/// noticing that CMD exited).
const POLL: Duration = Duration::from_millis(20);

/// How a supervised run ended.
pub struct Ended {
    /// CMD's exit status.
    pub status: ExitStatus,
    /// Why the hold ended while CMD ran, if it did.
    pub lost: Option<String>,
}

/// CMD could not be started.
pub struct SpawnError {
    /// The shell's convention: 127 not found, 126 found but not runnable.
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

/// The exit code that reports `status` as a shell does: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(u8::MAX),
        (None, Some(s)) => u8::try_from(128 + (s & 0x7f)).unwrap_or(u8::MAX),
        (None, None) => u8::MAX,
    }
}

/// Starts `cmd` with `env` added in its own process group, the signals zkr took over
/// (`taken`) at their default action and nothing blocked.
fn spawn(cmd: &[String], env: &[(&str, String)], taken: &[i32]) -> Result<Child, SpawnError> {
    let Some((program, args)) = cmd.split_first() else {
        return Err(SpawnError {
            code: 127,
            message: "no command given".into(),
        });
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    sys::start_clean(&mut command, taken).map_err(|e| SpawnError {
        code: 126,
        message: format!("cannot prepare to run {program}: {e}"),
    })?;
    command.spawn().map_err(|e| SpawnError {
        code: if e.kind() == io::ErrorKind::NotFound {
            127
        } else {
            126
        },
        message: format!("cannot run {program}: {e}"),
    })
}

/// Runs `cmd` with `env` added, in its own process group, until it exits. While it runs,
/// `hold` (if any) is watched: once it ends, the loss rule applies. Signals arriving on
/// `signals` are passed on to the group; `taken` (the signals zkr blocks to receive
/// them) start at their default action in CMD, with nothing blocked
/// ([`sys::start_clean`]).
pub fn run(
    cmd: &[String],
    env: &[(&str, String)],
    mut hold: Option<&mut dyn Hold>,
    grace: Duration,
    signals: &Receiver<i32>,
    taken: &[i32],
) -> Result<Ended, SpawnError> {
    let mut child = spawn(cmd, env, taken)?;
    let group = child.id();
    let mut lost: Option<String> = None;
    // When to send SIGKILL, and after which signal: set by the first SIGTERM (or
    // forwarded signal).
    let mut kill_at: Option<(Instant, i32)> = None;
    // Set once zkr asked CMD to stop (loss or forwarded signal).
    let mut stopping = false;
    let signal = |sig: i32| {
        if let Err(e) = sys::kill_group(group, sig) {
            eprintln!(
                "zkr: cannot send {} to CMD's process group: {e}",
                sys::signal_name(sig)
            );
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if stopping {
                    // Whatever CMD left behind in its group must not outlive the hold.
                    let _ = sys::kill_group(group, sys::SIGKILL);
                }
                return Ok(Ended { status, lost });
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("zkr: cannot wait for CMD: {e}");
                signal(sys::SIGKILL);
                let status = child
                    .wait()
                    .unwrap_or_else(|_| ExitStatus::from_raw(0xff00));
                return Ok(Ended { status, lost });
            }
        }
        match (lost.is_none(), hold.as_deref_mut()) {
            (true, Some(h)) => {
                if let Some(why) = h.wait_loss(POLL) {
                    eprintln!("zkr: lost: {why}; sending SIGTERM to CMD's process group");
                    signal(sys::SIGTERM);
                    stopping = true;
                    kill_at.get_or_insert((Instant::now() + grace, sys::SIGTERM));
                    lost = Some(why);
                }
            }
            _ => std::thread::sleep(POLL),
        }
        while let Ok(sig) = signals.try_recv() {
            eprintln!(
                "zkr: got {}; passing it on to CMD's process group",
                sys::signal_name(sig)
            );
            signal(sig);
            stopping = true;
            kill_at.get_or_insert((Instant::now() + grace, sig));
        }
        if let Some((_, first)) = kill_at.filter(|(t, _)| Instant::now() >= *t) {
            eprintln!(
                "zkr: CMD still running {} after {}; sending SIGKILL",
                crate::duration::show(grace),
                sys::signal_name(first)
            );
            signal(sys::SIGKILL);
            kill_at = None;
        }
    }
}
