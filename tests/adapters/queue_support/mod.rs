//! The queue scenarios through both adapters: a small trait over what they need,
//! implemented by the blocking adapter directly and by the tokio adapter on a shared
//! runtime (the lock's `tests/support` is left alone).
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)]

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use zk_recipes::client::Error;

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// An item held at least once.
pub trait Held: Send {
    fn name(&self) -> String;
    fn data(&self) -> Bytes;
    fn complete(self: Box<Self>) -> Result<(), Error>;
}

/// A queue handle of either adapter.
pub trait Q: Send {
    fn put_many(&mut self, items: Vec<Bytes>) -> Result<Vec<Option<String>>, Error>;
    fn put_priority(&mut self, data: Bytes, priority: u16) -> Result<Option<String>, Error>;
    fn take_batch_timeout(
        &mut self,
        k: usize,
        wait: Duration,
    ) -> Result<Vec<(String, Bytes)>, Error>;
    fn take_claimed_timeout(&mut self, wait: Duration) -> Result<Option<Box<dyn Held>>, Error>;
}

/// A client of either adapter.
pub trait Zq: Clone + Send + Sync + 'static {
    const NAME: &'static str;
    fn connect(cs: &str) -> Result<Self, Error>;
    fn queue(&self, dir: &str) -> Box<dyn Q>;
    fn priority_queue(&self, dir: &str) -> Box<dyn Q>;
    fn children(&self, dir: &str) -> Result<Vec<String>, Error>;
    fn close(&self);
}

// ----- blocking -----

use zk_recipes_blocking as zb;

struct BHeld(zb::Claimed);
impl Held for BHeld {
    fn name(&self) -> String {
        self.0.item().name.clone()
    }
    fn data(&self) -> Bytes {
        self.0.data().clone()
    }
    fn complete(self: Box<Self>) -> Result<(), Error> {
        self.0.complete()
    }
}

impl Q for zb::Queue {
    fn put_many(&mut self, items: Vec<Bytes>) -> Result<Vec<Option<String>>, Error> {
        zb::Queue::put_many(self, items)
    }
    fn put_priority(&mut self, data: Bytes, priority: u16) -> Result<Option<String>, Error> {
        zb::Queue::put_priority(self, data, priority)
    }
    fn take_batch_timeout(
        &mut self,
        k: usize,
        wait: Duration,
    ) -> Result<Vec<(String, Bytes)>, Error> {
        Ok(zb::Queue::take_batch_timeout(self, k, wait)?
            .into_iter()
            .map(|i| (i.name, i.data))
            .collect())
    }
    fn take_claimed_timeout(&mut self, wait: Duration) -> Result<Option<Box<dyn Held>>, Error> {
        Ok(zb::Queue::take_claimed_timeout(self, wait)?
            .map(|c| Box::new(BHeld(c)) as Box<dyn Held>))
    }
}

impl Zq for zb::Client {
    const NAME: &'static str = "blocking";
    fn connect(cs: &str) -> Result<Self, Error> {
        zb::connect(
            cs,
            zb::Options::default()
                .session_timeout(Duration::from_secs(6))
                .connect_timeout(Duration::from_secs(10))
                .call_timeout(Duration::from_secs(5)),
        )
    }
    fn queue(&self, dir: &str) -> Box<dyn Q> {
        Box::new(zb::Client::queue(self, dir))
    }
    fn priority_queue(&self, dir: &str) -> Box<dyn Q> {
        Box::new(zb::Client::priority_queue(self, dir))
    }
    fn children(&self, dir: &str) -> Result<Vec<String>, Error> {
        zb::Client::get_children(self, dir)
    }
    fn close(&self) {
        zb::Client::close(self)
    }
}

// ----- tokio -----

use zk_recipes_tokio as zt;

struct THeld(zt::Claimed);
impl Held for THeld {
    fn name(&self) -> String {
        self.0.item().name.clone()
    }
    fn data(&self) -> Bytes {
        self.0.data().clone()
    }
    fn complete(self: Box<Self>) -> Result<(), Error> {
        runtime().block_on(self.0.complete())
    }
}

impl Q for zt::Queue {
    fn put_many(&mut self, items: Vec<Bytes>) -> Result<Vec<Option<String>>, Error> {
        runtime().block_on(zt::Queue::put_many(self, items))
    }
    fn put_priority(&mut self, data: Bytes, priority: u16) -> Result<Option<String>, Error> {
        runtime().block_on(zt::Queue::put_priority(self, data, priority))
    }
    fn take_batch_timeout(
        &mut self,
        k: usize,
        wait: Duration,
    ) -> Result<Vec<(String, Bytes)>, Error> {
        Ok(runtime()
            .block_on(zt::Queue::take_batch_timeout(self, k, wait))?
            .into_iter()
            .map(|i| (i.name, i.data))
            .collect())
    }
    fn take_claimed_timeout(&mut self, wait: Duration) -> Result<Option<Box<dyn Held>>, Error> {
        Ok(runtime()
            .block_on(zt::Queue::take_claimed_timeout(self, wait))?
            .map(|c| Box::new(THeld(c)) as Box<dyn Held>))
    }
}

impl Zq for zt::Client {
    const NAME: &'static str = "tokio";
    fn connect(cs: &str) -> Result<Self, Error> {
        runtime().block_on(zt::connect(
            cs,
            zt::Options::default()
                .session_timeout(Duration::from_secs(6))
                .connect_timeout(Duration::from_secs(10)),
        ))
    }
    fn queue(&self, dir: &str) -> Box<dyn Q> {
        let _g = runtime().enter();
        Box::new(zt::Client::queue(self, dir))
    }
    fn priority_queue(&self, dir: &str) -> Box<dyn Q> {
        let _g = runtime().enter();
        Box::new(zt::Client::priority_queue(self, dir))
    }
    fn children(&self, dir: &str) -> Result<Vec<String>, Error> {
        runtime().block_on(zt::Client::get_children(self, dir))
    }
    fn close(&self) {
        runtime().block_on(zt::Client::close(self))
    }
}
