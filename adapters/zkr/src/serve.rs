//! `zkr serve`: the embedded server (`zk-recipes-server`) for local development and
//! tests, in the spirit of a single-node dev mode: a ZooKeeper-compatible server in
//! this process, in memory, until SIGINT, SIGTERM or SIGHUP. Not for production: one
//! node, no persistence (everything is gone when it stops).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Args;
use zk_recipes_server::EmbeddedServer;

use crate::signals::Signals;
use crate::{fail, line, sys};

/// `zkr serve`'s options.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The port (ZooKeeper's usual 2181 by default; 0: a free one, printed).
    #[arg(long, short, default_value_t = 2181)]
    port: u16,

    /// The address to listen on. The server has no authentication beyond ZooKeeper's
    /// ACLs: keep it on loopback.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,

    /// Empty containers and expired TTL nodes are reaped this often (as ZooKeeper's
    /// `znode.container.checkIntervalMs`).
    #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
    container_check: Duration,
}

/// Serves until a signal; 0 then, 125 if it could not start.
pub fn run(args: &ServeArgs) -> Result<u8, u8> {
    // zkr's signal handling, as for a command that runs CMD (a signal ignored when zkr
    // started, as `nohup`'s SIGHUP, stays ignored); taken over before the server's
    // thread starts, so that it inherits the mask. The server is the "command": from
    // here the signals come to `rx`.
    let signals = Signals::take_over().map_err(fail)?;
    signals.start()?;
    let addr = SocketAddr::new(args.host, args.port);
    let server = EmbeddedServer::builder()
        .addr(addr)
        .container_check(args.container_check)
        .start()
        .map_err(|e| fail(format!("serve on {addr}: {e}")))?;
    eprintln!(
        "zkr: a ZooKeeper-compatible server for development and tests only (in memory, \
         one node, nothing kept when it stops); Ctrl-C stops it"
    );
    line(&server.connect_string())?;
    let signal = signals
        .rx
        .recv()
        .map_err(|_| fail("the signal thread ended"))?;
    eprintln!("zkr: got {}; stopping the server", sys::signal_name(signal));
    server.stop();
    Ok(0)
}
