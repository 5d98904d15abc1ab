use std::time::{Duration, Instant};

/// A client with the scenarios' options ([`crate::common::options`]); panics if none.
#[form]
pub async fn connect(cs: &str) -> zk::Client {
    zk::connect(cs, crate::common::options())
        .await
        .unwrap_or_else(|e| panic!("{NAME}: connect to {cs}: {e}"))
}

/// Waits for a status satisfying `done`, every transition seen (a transient one such
/// as `Expired { renewing: true }` too); `None` if none within `within`.
#[form]
pub async fn wait_status(
    zk: &zk::Client,
    within: Duration,
    done: fn(&zk::Status) -> bool,
) -> Option<zk::Status> {
    let mut s = zk.status_stream();
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match s.next_timeout(left).await {
            Ok(st) if done(&st) => return Some(st),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Waits (`within` at most) for an owned node to be created; its Stat.
#[form]
pub async fn created<R: zk_recipes::recipe::node::NodeCommands>(
    node: &mut zk::NodeHandle<R>,
    within: Duration,
) -> Result<zk::Stat, zk::Error> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match node.next_timeout(left).await? {
            Some(zk::OwnedNodeEvent::Created { stat }) => return Ok(stat),
            Some(zk::OwnedNodeEvent::Failed { error }) => return Err(error),
            Some(_) => {}
            None => return Err(zk::Error::Finished),
        }
    }
}
