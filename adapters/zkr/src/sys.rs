//! The Unix calls zkr needs and the standard library lacks: blocking and waiting for
//! signals (`pthread_sigmask`, `sigwait`) and signalling a process group (`kill` with a
//! negative pid). The only `unsafe` in zkr; each call is a plain libc call on values
//! made here.

#![allow(unsafe_code)]

use std::io;

/// The signals zkr takes over while it runs a command: the command, in its own process
/// group, does not get the terminal's Ctrl-C directly, so zkr passes them on.
pub const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// `SIGTERM`.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGKILL`.
pub const SIGKILL: i32 = libc::SIGKILL;

/// A set of signals blocked in every thread of this process (threads started after the
/// call inherit the mask), to be received with [`Blocked::wait`]. Children start with
/// an empty mask (the standard library resets it before `exec`).
pub struct Blocked {
    set: libc::sigset_t,
}

/// Blocks `signals` in the calling thread and in every thread it starts from now on.
/// Call it before any other thread starts.
pub fn block(signals: &[i32]) -> io::Result<Blocked> {
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before any other use;
    // the calls only read and write it and the thread's own mask.
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
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Blocked { set })
    }
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
