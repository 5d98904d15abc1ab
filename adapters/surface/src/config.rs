//! Configuration (several nodes read and written as one): thin
//! typed wrappers over `zk_recipes::recipe::config`, where the protocols (the paper's
//! ready node, or `multi`) and their guarantees are described.
//!
//! A [`ConfigReaderHandle`] owns its hosted reader and its event stream: `snapshot`
//! reads that stream, so events it passes over are not seen again by `next`. Dropping
//! the handle stops the reader.
//!

use bytes::Bytes;
pub use zk_recipes::recipe::config::{
    ConfigMode, ConfigSnapshot, ReaderConfig, ReaderEvent, WriterConfig,
};
use zk_recipes::recipe::config::{ConfigReader, ConfigWriter, WriterEvent};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A configuration reader ([`Client::config_reader`]): its events and its calls
/// (`snapshot`, `refresh`).
pub type ConfigReaderHandle = Handle<ConfigReader>;

#[form]
impl Handle<ConfigReader> {
    /// Waits for the next complete configuration (`Snapshot`), passing over
    /// `NotReady`. Fails if the reader ends first.
    pub async fn snapshot(&mut self) -> Result<ConfigSnapshot, Error> {
        self.outcome(snapshot_outcome).await
    }

    /// Reads again now (after `sync` if the reader was made with
    /// [`ReaderConfig::sync_first`]): for a reader told by another channel that the
    /// configuration changed.
    pub fn refresh(&self) -> Result<(), Error> {
        self.hosted.run(|r, now| r.refresh(now))
    }
}

fn snapshot_outcome(e: &ReaderEvent) -> Option<Result<ConfigSnapshot, Error>> {
    match e {
        ReaderEvent::Snapshot(s) => Some(Ok(s.clone())),
        ReaderEvent::Failed(e) => Some(Err(e.clone())),
        ReaderEvent::Closed => Some(Err(Error::Finished)),
        _ => None,
    }
}

#[form]
impl Client {
    /// Reads configuration nodes `paths` under the paper's `ready`-node protocol.
    pub fn config_reader(&self, ready: &str, paths: &[&str]) -> Result<ConfigReaderHandle, Error> {
        self.config_reader_with(ReaderConfig::ready_node(ready, paths))
    }

    /// [`config_reader`](Self::config_reader) with a full configuration (the `multi`
    /// mode, `sync` before every read).
    pub fn config_reader_with(&self, config: ReaderConfig) -> Result<ConfigReaderHandle, Error> {
        Handle::start(self, ConfigReader::new(config), |r, now| r.start(now))
    }

    /// Writes `updates` (path, value) as one configuration: with the paper's protocol
    /// around the `ready` node ([`ConfigMode::ReadyNode`]), or as one `multi`
    /// ([`ConfigMode::Multi`]; `ready` is not used). Missing nodes are created.
    pub async fn write_config(
        &self,
        ready: &str,
        updates: Vec<(String, Bytes)>,
        mode: ConfigMode,
    ) -> Result<(), Error> {
        let mut config = WriterConfig::ready_node(ready);
        config.mode = mode;
        self.config_writer(config, updates).await
    }

    /// [`write_config`](Self::write_config) with a full configuration (ACL, the limit
    /// on one `multi`).
    pub async fn config_writer(
        &self,
        config: WriterConfig,
        updates: Vec<(String, Bytes)>,
    ) -> Result<(), Error> {
        Handle::start(self, ConfigWriter::new(config, updates), |w, now| w.start(now))?
            .outcome(writer_outcome)
            .await
    }
}

fn writer_outcome(e: &WriterEvent) -> Option<Result<(), Error>> {
    match e {
        WriterEvent::Written => Some(Ok(())),
        WriterEvent::Failed(e) => Some(Err(e.clone())),
        _ => None,
    }
}
