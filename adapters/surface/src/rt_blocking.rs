//! The blocking form's waiting primitives (std channels, a mutex and a condition
//! variable): the twins, name for name, of `rt_tokio.rs`'s, with every `async fn` a
//! blocking `fn`. No tokio here.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar};
use std::time::Instant;

pub use crate::common::{Published, Timeout};

/// A mutex held across waits.
pub struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// A mutex holding `value`.
    pub fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    /// Waits for the lock (a panic while it was held does not poison it here).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sending side of a one-shot channel.
#[derive(Debug)]
pub struct OnceTx<T>(mpsc::Sender<T>);

impl<T> OnceTx<T> {
    /// Sends; false if the receiver is gone.
    pub fn send(self, value: T) -> bool {
        self.0.send(value).is_ok()
    }
}

/// The receiving side of a one-shot channel.
#[derive(Debug)]
pub struct OnceRx<T>(mpsc::Receiver<T>);

/// A one-shot channel.
pub fn oneshot<T>() -> (OnceTx<T>, OnceRx<T>) {
    let (tx, rx) = mpsc::channel();
    (OnceTx(tx), OnceRx(rx))
}

fn recv_until<T>(rx: &mpsc::Receiver<T>, deadline: Option<Instant>) -> Result<Option<T>, Timeout> {
    let Some(deadline) = deadline else {
        return Ok(rx.recv().ok());
    };
    let left = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(v) => Ok(Some(v)),
        Err(RecvTimeoutError::Timeout) => Err(Timeout),
        Err(RecvTimeoutError::Disconnected) => Ok(None),
    }
}

impl<T> OnceRx<T> {
    /// The value; `None` if the sender dropped without sending.
    pub fn recv(self) -> Option<T> {
        self.0.recv().ok()
    }

    /// The value, waiting until `deadline` at most (`None`: no limit).
    pub fn recv_until(self, deadline: Option<Instant>) -> Result<Option<T>, Timeout> {
        recv_until(&self.0, deadline)
    }
}

/// The sending side of an unbounded channel.
#[derive(Debug)]
pub struct Tx<T>(mpsc::Sender<T>);

impl<T> Clone for Tx<T> {
    fn clone(&self) -> Self {
        Tx(self.0.clone())
    }
}

impl<T> Tx<T> {
    /// Sends; false if the receiver is gone.
    pub fn send(&self, value: T) -> bool {
        self.0.send(value).is_ok()
    }
}

/// The receiving side of an unbounded channel.
#[derive(Debug)]
pub struct Rx<T>(mpsc::Receiver<T>);

/// An unbounded channel.
pub fn channel<T>() -> (Tx<T>, Rx<T>) {
    let (tx, rx) = mpsc::channel();
    (Tx(tx), Rx(rx))
}

impl<T> Rx<T> {
    /// The next value; `None` once every sender is gone.
    pub fn recv(&mut self) -> Option<T> {
        self.0.recv().ok()
    }

    /// The next value if one is waiting.
    pub fn try_recv(&mut self) -> Option<T> {
        self.0.try_recv().ok()
    }

    /// The next value, waiting until `deadline` at most (`None`: no limit).
    pub fn recv_until(&mut self, deadline: Option<Instant>) -> Result<Option<T>, Timeout> {
        recv_until(&self.0, deadline)
    }
}

/// Never returns.
pub fn forever() -> ! {
    loop {
        std::thread::park();
    }
}

#[derive(Debug, Default)]
struct Board {
    state: std::sync::Mutex<Published>,
    changed: Condvar,
}

/// Where the driver publishes its state for the handles.
#[derive(Debug)]
pub struct BoardTx(Arc<Board>);

/// The handles' view of the driver's state.
#[derive(Clone, Debug)]
pub struct BoardRx(Arc<Board>);

/// A board starting at `Connecting`.
pub fn board() -> (BoardTx, BoardRx) {
    let b = Arc::new(Board::default());
    (BoardTx(b.clone()), BoardRx(b))
}

impl BoardTx {
    /// Changes the state and wakes every waiter.
    pub fn publish(&self, update: impl FnOnce(&mut Published)) {
        update(&mut self.0.state.lock().unwrap_or_else(|e| e.into_inner()));
        self.0.changed.notify_all();
    }
}

impl Drop for BoardTx {
    fn drop(&mut self) {
        self.publish(|p| p.stopped = true);
    }
}

impl BoardRx {
    /// Reads the state.
    pub fn read<T>(&self, read: impl FnOnce(&Published) -> T) -> T {
        read(&self.0.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits until `done` holds or `deadline` passes; the state it saw last.
    // Both sides are the same state (a copy of the board); boxing one would only add
    // an allocation.
    #[allow(clippy::result_large_err)]
    pub fn wait_until(
        &mut self,
        done: impl Fn(&Published) -> bool,
        deadline: Instant,
    ) -> Result<Published, Published> {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if state.stopped || done(&state) {
                return Ok(state.clone());
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Err(state.clone());
            };
            state = match self.0.changed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
    }
}
