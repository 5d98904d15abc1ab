//! Demo: start a real ZooKeeper with the test support and talk to it with the codec.
//! `scripts/demo` runs it.

use bytes::Bytes;
use zk_recipes::proto::*;
use zk_recipes_testing::{RawClient, TestServer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestServer::start()?;
    println!("ZooKeeper running at {}", server.connect_string());
    let mut c = RawClient::connect(server.addr(), 10_000)?;
    println!(
        "session 0x{:x}, timeout {} ms",
        c.session.session_id, c.session.timeout_ms
    );
    let create = Request::Create(CreateRequest::new(
        "/demo",
        Bytes::from_static(b"hello"),
        Acl::open_unsafe(),
        CreateMode::Persistent,
    ));
    println!("create /demo -> {:?}", c.call(&create)?.1);
    let get = Request::GetData(PathWatch {
        path: "/demo".into(),
        watch: true,
    });
    println!("getData /demo -> {:?}", c.call(&get)?.1);
    let set = Request::SetData(SetDataRequest {
        path: "/demo".into(),
        data: Bytes::from_static(b"world"),
        version: -1,
    });
    c.call(&set)?;
    println!("watch fired: {:?}", c.take_events());
    println!(
        "mntr zk_znode_count = {}",
        server.mntr_value("zk_znode_count")?
    );
    c.call(&Request::CloseSession)?;
    Ok(())
}
