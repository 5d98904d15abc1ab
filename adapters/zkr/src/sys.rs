//! The Unix calls zkr needs and the standard library lacks: blocking and waiting for
//! signals (`pthread_sigmask`, `sigwait`), starting a command with the signal state a
//! shell would give it (`pre_exec`), and signalling a process group (`kill` with a
//! negative pid). The only `unsafe` in zkr; each call is a plain libc call on values
//! made here.

#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The signals zkr takes over while it runs a command: the command, in its own process
/// group, does not get the terminal's Ctrl-C directly, so zkr passes them on.
pub const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// `SIGTERM`.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGKILL`.
pub const SIGKILL: i32 = libc::SIGKILL;

/// A set of signals blocked in every thread of this process (threads started after the
/// call inherit the mask), to be received with [`Blocked::wait`]. A child inherits the
/// mask across `exec` (the standard library does not reset it): start commands with
/// [`start_clean`].
pub struct Blocked {
    set: libc::sigset_t,
}

fn sigset(signals: &[i32]) -> io::Result<libc::sigset_t> {
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before any other use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if libc::sigemptyset(&mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        for &s in signals {
            if libc::sigaddset(&mut set, s) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(set)
    }
}

/// Is `signal` ignored in this process (as `nohup` leaves SIGHUP, or a shell SIGINT in
/// a background job)? A signal the user's environment ignores stays ignored: zkr does
/// not take it over, and its command inherits the ignore, as from a shell.
pub fn ignored(signal: i32) -> bool {
    // SAFETY: `old` is a local out-value; a null `act` only reads the disposition.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Blocks `signals` in the calling thread and in every thread it starts from now on.
/// Call it before any other thread starts.
pub fn block(signals: &[i32]) -> io::Result<Blocked> {
    let set = sigset(signals)?;
    // SAFETY: `set` is initialised; the call only reads it and sets this thread's mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(Blocked { set })
}

impl Blocked {
    /// Waits for one of the blocked signals and returns its number.
    pub fn wait(&self) -> io::Result<i32> {
        let mut sig: libc::c_int = 0;
        // SAFETY: `self.set` was initialised by `block`; `sig` is a valid out pointer.
        let rc = unsafe { libc::sigwait(&self.set, &mut sig) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(sig)
    }
}

/// Makes `command` start with the signal state a shell gives a command, whatever zkr's
/// own threads block: an empty signal mask, and SIGPIPE and `reset` (the signals zkr
/// took over) at their default action (signals ignored when zkr started, which are not
/// in `reset`, stay ignored). On Linux the command also gets SIGTERM when zkr dies
/// (`PR_SET_PDEATHSIG`; if zkr is already gone when the child starts, the command is
/// not run): killed with SIGKILL, zkr cannot apply the loss rule, and the command must
/// not run on unguarded. Spawn from the thread that lives as long as zkr (the main
/// thread): the kernel sends the signal when the spawning thread ends.
pub fn start_clean(command: &mut Command, reset: &[i32]) -> io::Result<()> {
    let empty = sigset(&[])?;
    // Made before the fork: the child allocates nothing.
    let defaults: Vec<i32> = std::iter::once(libc::SIGPIPE)
        .chain(reset.iter().copied())
        .collect();
    #[cfg(target_os = "linux")]
    let parent = libc::pid_t::try_from(std::process::id())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the closure runs in the child between fork and exec, and calls only
    // async-signal-safe functions (signal, sigprocmask, prctl, getppid) on values
    // prepared before the fork; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            for &s in &defaults {
                if libc::signal(s, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(io::Error::last_os_error());
                }
            }
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    // zkr died between the fork and here: nothing guards the command.
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Sends `signal` to every process of group `pgid`. A group that is already gone is
/// not an error.
pub fn kill_group(pgid: u32, signal: i32) -> io::Result<()> {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    if pgid <= 1 {
        // -1 would signal every process we may signal; never that.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill takes plain integers; a negative pid names the process group.
    if unsafe { libc::kill(-pgid, signal) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(e)
    }
}

/// The name of signal `n` for messages (`SIGTERM`), or its number.
pub fn signal_name(n: i32) -> String {
    match n {
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        n => format!("signal {n}"),
    }
}
