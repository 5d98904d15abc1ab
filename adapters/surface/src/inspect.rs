//! Describing recipes, read-only, for dashboards and tools: the same call in both forms,
//! a wrapper over the core machine ([`zk_recipes::recipe::inspect`]), which decides
//! what the nodes mean.

use zk_recipes::client::Error;
use zk_recipes::recipe::inspect::{
    Description, Inspect, InspectConfig, InspectEvent, Survey,
};

use super::Client;
#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};

#[form]
impl Client {
    /// What the recipe at `path` is and who takes part in it: a lock's holder and
    /// waiters, an election's leader and candidates, a semaphore's leases, a queue's
    /// length, oldest item and claims, a double barrier's members (each with its
    /// session, creation time and fencing token); [`Shape::Node`] for a node of no
    /// recipe layout. Reads only. `NoNode` if `path` does not exist.
    ///
    /// [`Shape::Node`]: zk_recipes::recipe::inspect::Shape::Node
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "inspect", path = %path))]
    pub async fn describe(&self, path: &str) -> Result<Description, Error> {
        let mut survey = self.survey(InspectConfig::new(path)).await?;
        survey.descriptions.pop().ok_or(Error::UnexpectedReply)
    }

    /// [`describe`](Self::describe) for every recipe directory at or below `path`:
    /// the path itself if it has a recipe layout, else each one found below it (at
    /// most 10,000 requests; `truncated` says the walk stopped short).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "inspect", path = %path))]
    pub async fn describe_below(&self, path: &str) -> Result<Survey, Error> {
        self.survey(InspectConfig {
            below: true,
            ..InspectConfig::new(path)
        })
        .await
    }

    /// Runs one look as `config` says.
    pub async fn survey(&self, config: InspectConfig) -> Result<Survey, Error> {
        let path = config.path.clone();
        let (hold, mut events) = self.host(Inspect::new(config))?;
        hold.run(|r, now| r.start(now))?;
        match events.next().await {
            Some(InspectEvent::Described(survey)) => Ok(survey),
            Some(InspectEvent::Failed(e)) => Err(e.at(&path)),
            Some(_) => Err(Error::UnexpectedReply),
            None => Err(self.dead()),
        }
    }
}
