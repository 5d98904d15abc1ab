//! ZooKeeper's four-letter words: a connection whose first four bytes are one gets a
//! text answer and is closed (what the real server does before any handshake).

use alloc::format;
use alloc::string::String;

use crate::model::Stats;

/// The version the server reports (`srvr`, `mntr`).
pub const VERSION: &str = "3.8.0-zk-recipes-embedded";

/// The words a 3.8 server knows; the ones not answered here are refused as a server
/// whose `4lw.commands.whitelist` leaves them out refuses them.
const KNOWN: &[&[u8; 4]] = &[
    b"conf", b"cons", b"crst", b"dirs", b"dump", b"envi", b"gtmk", b"hash", b"isro", b"mntr",
    b"ruok", b"srst", b"srvr", b"stat", b"stmk", b"wchc", b"wchp", b"wchs",
];

/// The answer to `word`, if it is a four-letter word (else the bytes are the length
/// prefix of a handshake).
pub fn answer(word: &[u8; 4], stats: &Stats) -> Option<String> {
    if !KNOWN.contains(&word) {
        return None;
    }
    let text = match word {
        b"ruok" => String::from("imok"),
        b"isro" => String::from("rw"),
        b"srvr" | b"stat" => format!(
            "Zookeeper version: {VERSION}\n\
             Latency min/avg/max: 0/0.0/0\n\
             Received: {}\nSent: {}\nConnections: {}\nOutstanding: 0\n\
             Zxid: 0x{:x}\nMode: standalone\nNode count: {}\n",
            stats.received, stats.sent, stats.connections, stats.zxid, stats.znodes
        ),
        b"mntr" => format!(
            "zk_version\t{VERSION}\n\
             zk_server_state\tstandalone\n\
             zk_packets_received\t{}\n\
             zk_packets_sent\t{}\n\
             zk_num_alive_connections\t{}\n\
             zk_outstanding_requests\t0\n\
             zk_znode_count\t{}\n\
             zk_watch_count\t{}\n\
             zk_ephemerals_count\t{}\n\
             zk_global_sessions\t{}\n",
            stats.received,
            stats.sent,
            stats.connections,
            stats.znodes,
            stats.watches,
            stats.ephemerals,
            stats.sessions
        ),
        other => format!(
            "{} is not executed because it is not in the whitelist.\n",
            String::from_utf8_lossy(other)
        ),
    };
    Some(text)
}
