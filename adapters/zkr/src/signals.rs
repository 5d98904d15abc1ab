//! The signals of a command that runs CMD: zkr takes SIGINT, SIGTERM and SIGHUP over
//! (blocked in every thread, received by one with `sigwait`). While CMD runs they go to
//! CMD's process group (see `supervise`); before that they interrupt zkr's wait (the
//! session is closed, so nothing is left queued or held).

use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sys;
use crate::zk::Zk;

/// Where the signals go now.
#[derive(Default)]
struct Gate {
    running: bool,
    interrupted: Option<i32>,
    zk: Option<Zk>,
}

/// The signal side of a command that runs CMD.
pub struct Signals {
    gate: Arc<Mutex<Gate>>,
    /// The signals to pass on to CMD's group while it runs.
    pub rx: Receiver<i32>,
    /// The signals taken over (blocked in every thread of zkr, reset in CMD).
    pub taken: Vec<i32>,
}

impl Signals {
    /// Takes SIGINT, SIGTERM and SIGHUP over, but not one zkr was started with ignored
    /// (`nohup`'s SIGHUP): that one stays ignored, in CMD too. Call before any thread
    /// starts.
    pub fn take_over() -> Result<Signals, String> {
        let taken: Vec<i32> = sys::FORWARDED
            .into_iter()
            .filter(|&s| !sys::ignored(s))
            .collect();
        let blocked = sys::block(&taken).map_err(|e| format!("block signals: {e}"))?;
        let gate = Arc::new(Mutex::new(Gate::default()));
        let (tx, rx) = mpsc::channel();
        let g = gate.clone();
        std::thread::Builder::new()
            .name("zkr-signals".into())
            .spawn(move || {
                while let Ok(sig) = blocked.wait() {
                    let mut gate = g.lock().unwrap_or_else(|e| e.into_inner());
                    if gate.running {
                        let _ = tx.send(sig);
                        continue;
                    }
                    if gate.interrupted.is_some() {
                        continue;
                    }
                    gate.interrupted = Some(sig);
                    match &gate.zk {
                        Some(zk) => {
                            eprintln!(
                                "zkr: got {} while waiting; closing the session",
                                sys::signal_name(sig)
                            );
                            zk.close();
                        }
                        None => std::process::exit(128 + sig),
                    }
                }
            })
            .map_err(|e| format!("start the signal thread: {e}"))?;
        Ok(Signals { gate, rx, taken })
    }

    fn gate(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session to close if a signal interrupts a wait.
    pub fn attach(&self, zk: &Zk) {
        self.gate().zk = Some(zk.clone());
    }

    /// The signal that interrupted a wait, if one did: zkr's exit code for it.
    pub fn interrupted(&self) -> Option<u8> {
        self.gate().interrupted.map(crate::signal_exit)
    }

    /// From now on signals go to CMD; `Err(code)` if one interrupted the wait already.
    pub fn start(&self) -> Result<(), u8> {
        let mut gate = self.gate();
        match gate.interrupted {
            Some(sig) => Err(crate::signal_exit(sig)),
            None => {
                gate.running = true;
                Ok(())
            }
        }
    }

    /// CMD has ended: signals interrupt zkr's waits again.
    pub fn stop(&self) {
        self.gate().running = false;
    }
}
