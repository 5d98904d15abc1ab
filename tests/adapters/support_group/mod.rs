//! Group membership and rendezvous through both adapters: handles as trait objects,
//! each call waiting at most `within`, so the scenarios in `group_rendezvous.rs` are
//! written once.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use bytes::Bytes;
use zk_recipes::client::Error;
use zk_recipes::proto::Stat;
use zk_recipes::recipe::group::{Member, ViewEvent};
use zk_recipes::recipe::node::OwnedNodeEvent;
use zk_recipes::recipe::rendezvous::RendezvousEvent;

use crate::support::{runtime, Zk};

/// A node kept in place (member, coordinator, publisher).
pub trait NodeH: Send {
    fn next(&mut self, within: Duration) -> Option<OwnedNodeEvent>;
    fn created(&mut self, within: Duration) -> Result<Stat, Error>;
    fn set_data(&mut self, data: &'static str, within: Duration) -> Result<Stat, Error>;
    fn delete(self: Box<Self>, within: Duration) -> Result<(), Error>;
}

pub trait ViewH: Send {
    fn next(&mut self, within: Duration) -> Option<ViewEvent>;
    fn synced(&mut self, within: Duration) -> Result<Vec<Member>, Error>;
}

pub trait RoleH: Send {
    fn next(&mut self, within: Duration) -> Option<RendezvousEvent>;
    fn publish(&self, address: &'static str);
}

pub trait GroupZk: Zk {
    fn member(&self, dir: &str, id: &str, data: &'static str) -> Box<dyn NodeH>;
    fn coordinator(&self, path: &str) -> Box<dyn NodeH>;
    fn publisher(&self, path: &str, address: &'static str) -> Box<dyn NodeH>;
    fn view(&self, dir: &str) -> Box<dyn ViewH>;
    fn master(&self, path: &str, address: &'static str) -> Box<dyn RoleH>;
    fn worker(&self, path: &str) -> Box<dyn RoleH>;
}

fn timed_out<T>() -> Result<T, Error> {
    Err(Error::Timeout)
}

// ----- blocking -----

use zk_recipes_blocking as zb;

impl<R: zk_recipes::recipe::node::NodeCommands> NodeH for zb::NodeHandle<R> {
    fn next(&mut self, within: Duration) -> Option<OwnedNodeEvent> {
        self.next_timeout(within).ok().flatten()
    }
    fn created(&mut self, within: Duration) -> Result<Stat, Error> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next_timeout(left)? {
                Some(OwnedNodeEvent::Created { stat }) => return Ok(stat),
                Some(OwnedNodeEvent::Failed { error }) => return Err(error),
                Some(_) => {}
                None => return Err(Error::Finished),
            }
        }
    }
    fn set_data(&mut self, data: &'static str, _within: Duration) -> Result<Stat, Error> {
        zb::NodeHandle::set_data(self, data)
    }
    fn delete(self: Box<Self>, _within: Duration) -> Result<(), Error> {
        zb::NodeHandle::delete(*self)
    }
}

impl ViewH for zb::GroupView {
    fn next(&mut self, within: Duration) -> Option<ViewEvent> {
        self.next_timeout(within).ok().flatten()
    }
    fn synced(&mut self, _within: Duration) -> Result<Vec<Member>, Error> {
        zb::GroupView::synced(self)
    }
}

impl RoleH for zb::RendezvousHandle<zk_recipes::recipe::rendezvous::Worker> {
    fn next(&mut self, within: Duration) -> Option<RendezvousEvent> {
        self.next_timeout(within).ok().flatten()
    }
    fn publish(&self, _: &'static str) {}
}

impl RoleH for zb::RendezvousHandle<zk_recipes::recipe::rendezvous::Master> {
    fn next(&mut self, within: Duration) -> Option<RendezvousEvent> {
        self.next_timeout(within).ok().flatten()
    }
    fn publish(&self, address: &'static str) {
        zb::RendezvousHandle::publish(self, address).unwrap();
    }
}

impl GroupZk for zb::Client {
    fn member(&self, dir: &str, id: &str, data: &'static str) -> Box<dyn NodeH> {
        Box::new(self.group_member(dir, id, data).unwrap())
    }
    fn coordinator(&self, path: &str) -> Box<dyn NodeH> {
        Box::new(self.rendezvous_coordinator(path).unwrap())
    }
    fn publisher(&self, path: &str, address: &'static str) -> Box<dyn NodeH> {
        Box::new(self.rendezvous_publisher(path, address).unwrap())
    }
    fn view(&self, dir: &str) -> Box<dyn ViewH> {
        Box::new(self.group_view(dir).unwrap())
    }
    fn master(&self, path: &str, address: &'static str) -> Box<dyn RoleH> {
        Box::new(self.rendezvous_master(path, address).unwrap())
    }
    fn worker(&self, path: &str) -> Box<dyn RoleH> {
        Box::new(self.rendezvous_worker(path).unwrap())
    }
}

// ----- tokio -----

use zk_recipes_tokio as zt;

fn block<T>(within: Duration, f: impl std::future::Future<Output = T>) -> Option<T> {
    runtime().block_on(async { tokio::time::timeout(within, f).await.ok() })
}

impl<R: zk_recipes::recipe::node::NodeCommands> NodeH for zt::NodeHandle<R> {
    fn next(&mut self, within: Duration) -> Option<OwnedNodeEvent> {
        block(within, zt::NodeHandle::next(self)).flatten()
    }
    fn created(&mut self, within: Duration) -> Result<Stat, Error> {
        block(within, zt::NodeHandle::created(self)).unwrap_or_else(timed_out)
    }
    fn set_data(&mut self, data: &'static str, within: Duration) -> Result<Stat, Error> {
        block(within, zt::NodeHandle::set_data(self, data)).unwrap_or_else(timed_out)
    }
    fn delete(self: Box<Self>, within: Duration) -> Result<(), Error> {
        block(within, zt::NodeHandle::delete(*self)).unwrap_or_else(timed_out)
    }
}

impl ViewH for zt::GroupView {
    fn next(&mut self, within: Duration) -> Option<ViewEvent> {
        block(within, zt::GroupView::next(self)).flatten()
    }
    fn synced(&mut self, within: Duration) -> Result<Vec<Member>, Error> {
        block(within, zt::GroupView::synced(self)).unwrap_or_else(timed_out)
    }
}

impl RoleH for zt::RendezvousHandle<zk_recipes::recipe::rendezvous::Worker> {
    fn next(&mut self, within: Duration) -> Option<RendezvousEvent> {
        block(within, zt::RendezvousHandle::next(self)).flatten()
    }
    fn publish(&self, _: &'static str) {}
}

impl RoleH for zt::RendezvousHandle<zk_recipes::recipe::rendezvous::Master> {
    fn next(&mut self, within: Duration) -> Option<RendezvousEvent> {
        block(within, zt::RendezvousHandle::next(self)).flatten()
    }
    fn publish(&self, address: &'static str) {
        zt::RendezvousHandle::publish(self, Bytes::from_static(address.as_bytes())).unwrap();
    }
}

impl GroupZk for zt::Client {
    fn member(&self, dir: &str, id: &str, data: &'static str) -> Box<dyn NodeH> {
        Box::new(self.group_member(dir, id, data).unwrap())
    }
    fn coordinator(&self, path: &str) -> Box<dyn NodeH> {
        Box::new(self.rendezvous_coordinator(path).unwrap())
    }
    fn publisher(&self, path: &str, address: &'static str) -> Box<dyn NodeH> {
        Box::new(self.rendezvous_publisher(path, address).unwrap())
    }
    fn view(&self, dir: &str) -> Box<dyn ViewH> {
        Box::new(self.group_view(dir).unwrap())
    }
    fn master(&self, path: &str, address: &'static str) -> Box<dyn RoleH> {
        Box::new(self.rendezvous_master(path, address).unwrap())
    }
    fn worker(&self, path: &str) -> Box<dyn RoleH> {
        Box::new(self.rendezvous_worker(path).unwrap())
    }
}
