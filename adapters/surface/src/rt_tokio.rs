//! The async form's waiting primitives (tokio's channels and timer). Every item here
//! has a twin of the same name and shape in `rt_blocking.rs`, where the `async fn`s
//! are blocking `fn`s: the shared surface calls `x.await`, and the blocking form's
//! `#[form]` removes the `.await`.

use std::time::Instant;

use std::future::Future;

use tokio::sync::{mpsc, oneshot, watch};

pub use crate::common::{Published, Timeout};

/// A mutex held across waits.
pub struct Mutex<T>(tokio::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// A mutex holding `value`.
    pub fn new(value: T) -> Self {
        Mutex(tokio::sync::Mutex::new(value))
    }

    /// Waits for the lock.
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, T> {
        self.0.lock().await
    }
}

/// The sending side of a one-shot channel.
#[derive(Debug)]
pub struct OnceTx<T>(oneshot::Sender<T>);

impl<T> OnceTx<T> {
    /// Sends; false if the receiver is gone.
    pub fn send(self, value: T) -> bool {
        self.0.send(value).is_ok()
    }
}

/// The receiving side of a one-shot channel.
#[derive(Debug)]
pub struct OnceRx<T>(oneshot::Receiver<T>);

/// A one-shot channel.
pub fn oneshot<T>() -> (OnceTx<T>, OnceRx<T>) {
    let (tx, rx) = oneshot::channel();
    (OnceTx(tx), OnceRx(rx))
}

impl<T> OnceRx<T> {
    /// The value; `None` if the sender dropped without sending.
    pub async fn recv(self) -> Option<T> {
        self.0.await.ok()
    }

    /// The value, waiting until `deadline` at most (`None`: no limit).
    pub async fn recv_until(self, deadline: Option<Instant>) -> Result<Option<T>, Timeout> {
        match deadline {
            None => Ok(self.recv().await),
            Some(d) => tokio::time::timeout_at(d.into(), self.recv())
                .await
                .map_err(|_| Timeout),
        }
    }

    /// Polls for the value (`None`: the sender dropped).
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<T>> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|r| r.ok())
    }
}

/// The sending side of an unbounded channel.
#[derive(Debug)]
pub struct Tx<T>(mpsc::UnboundedSender<T>);

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
pub struct Rx<T>(mpsc::UnboundedReceiver<T>);

/// An unbounded channel.
pub fn channel<T>() -> (Tx<T>, Rx<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Tx(tx), Rx(rx))
}

impl<T> Rx<T> {
    /// The next value; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<T> {
        self.0.recv().await
    }

    /// The next value if one is waiting.
    pub fn try_recv(&mut self) -> Option<T> {
        self.0.try_recv().ok()
    }

    /// The next value, waiting until `deadline` at most (`None`: no limit).
    pub async fn recv_until(&mut self, deadline: Option<Instant>) -> Result<Option<T>, Timeout> {
        match deadline {
            None => Ok(self.recv().await),
            Some(d) => tokio::time::timeout_at(d.into(), self.recv())
                .await
                .map_err(|_| Timeout),
        }
    }
}

/// Never returns.
pub async fn forever() -> ! {
    loop {
        std::future::pending::<()>().await;
    }
}

/// Where the driver publishes its state for the handles.
#[derive(Debug)]
pub struct BoardTx(watch::Sender<Published>);

/// The handles' view of the driver's state.
#[derive(Clone, Debug)]
pub struct BoardRx(watch::Receiver<Published>);

/// A board starting at `Connecting`.
pub fn board() -> (BoardTx, BoardRx) {
    let (tx, rx) = watch::channel(Published::default());
    (BoardTx(tx), BoardRx(rx))
}

impl BoardTx {
    /// Changes the state and wakes every waiter.
    pub fn publish(&self, update: impl FnOnce(&mut Published)) {
        self.0.send_modify(update);
    }
}

impl Drop for BoardTx {
    fn drop(&mut self) {
        self.0.send_modify(|p| p.stopped = true);
    }
}

impl BoardRx {
    /// Reads the state.
    pub fn read<T>(&self, read: impl FnOnce(&Published) -> T) -> T {
        read(&self.0.borrow())
    }

    /// Waits until `done` holds or `deadline` passes; the state it saw last.
    pub async fn wait_until(
        &mut self,
        done: impl Fn(&Published) -> bool,
        deadline: Instant,
    ) -> Result<Published, Published> {
        let wait = self.0.wait_for(|p| p.stopped || done(p));
        let seen = match tokio::time::timeout_at(deadline.into(), wait).await {
            Ok(Ok(p)) => Some(p.clone()),
            _ => None,
        };
        seen.ok_or_else(|| self.0.borrow().clone())
    }
}
