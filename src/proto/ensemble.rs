//! The ensemble's dynamic configuration, as `/zookeeper/config` holds it (3.5+):
//! one `server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]` line per
//! member and a `version=<hex>` line. [`EnsembleConfig::parse`] reads it;
//! [`EnsembleConfig::client_hosts`] is the connect string's host list it implies.
//!
//! ```
//! use zk_recipes::proto::{EnsembleConfig, ServerRole};
//! let text = "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
//!             server.2=10.0.0.2:2888:3888:observer;0.0.0.0:2182\n\
//!             version=100000003";
//! let config = EnsembleConfig::parse(text).unwrap();
//! assert_eq!(config.version, 0x1_0000_0003);
//! assert_eq!(config.servers[1].role, ServerRole::Observer);
//! // A wildcard client address means "the server's own host".
//! assert_eq!(config.client_hosts(), ["127.0.0.1:2181", "10.0.0.2:2182"]);
//! assert!(EnsembleConfig::parse("server.x=oops").is_err());
//! ```

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// The path of the configuration node (outside any chroot).
pub const CONFIG_NODE: &str = "/zookeeper/config";

/// A member's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerRole {
    /// Votes (the default).
    Participant,
    /// Serves clients, does not vote.
    Observer,
}

/// One `server.N=...` line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    /// The server id (`N`).
    pub id: u64,
    /// The quorum (peer) address's host.
    pub host: String,
    /// Followers connect to the leader here.
    pub quorum_port: u16,
    /// Leader election.
    pub election_port: u16,
    /// Participant or observer.
    pub role: ServerRole,
    /// Where clients connect (`host:port`; a wildcard or missing host is replaced by
    /// [`host`](Self::host)); `None` if the line names no client port.
    pub client: Option<String>,
}

/// The parsed content of `/zookeeper/config`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EnsembleConfig {
    /// The members, in the order the node lists them.
    pub servers: Vec<ServerSpec>,
    /// The configuration's version (`version=`, hexadecimal; 0 if absent): what
    /// `reconfig`'s `from_config` names.
    pub version: i64,
}

/// Why a configuration text does not parse.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigError {
    /// The offending line.
    pub line: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad ensemble config line {:?}: {}",
            self.line, self.reason
        )
    }
}

impl EnsembleConfig {
    /// Parses the data of `/zookeeper/config` as read: UTF-8 text (else an error naming
    /// it), then [`parse`](Self::parse).
    pub fn from_data(data: &[u8]) -> Result<EnsembleConfig, ConfigError> {
        let text = core::str::from_utf8(data).map_err(|_| ConfigError {
            line: alloc::string::String::from_utf8_lossy(data).into_owned(),
            reason: "not UTF-8",
        })?;
        EnsembleConfig::parse(text)
    }

    /// Parses the text of `/zookeeper/config`. Unknown keys are ignored (ZooKeeper may
    /// add some); a malformed `server.N` or `version` line is an error naming it.
    pub fn parse(text: &str) -> Result<EnsembleConfig, ConfigError> {
        let mut config = EnsembleConfig::default();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let bad = |reason| ConfigError {
                line: line.to_string(),
                reason,
            };
            let Some((key, value)) = line.split_once('=') else {
                return Err(bad("no `=`"));
            };
            let (key, value) = (key.trim(), value.trim());
            if key == "version" {
                config.version = i64::from_str_radix(value, 16)
                    .map_err(|_| bad("version is not hexadecimal"))?;
            } else if let Some(id) = key.strip_prefix("server.") {
                let id = id.parse().map_err(|_| bad("server id is not a number"))?;
                config.servers.push(parse_server(id, value).map_err(bad)?);
            }
        }
        Ok(config)
    }

    /// The client addresses (`host:port`) of the members that have one, in order:
    /// the host list a session tracking the ensemble uses.
    pub fn client_hosts(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter_map(|s| s.client.clone())
            .collect()
    }
}

/// `host:quorum:election[:role][;client]`, with `[v6]` hosts allowed.
fn parse_server(id: u64, value: &str) -> Result<ServerSpec, &'static str> {
    let (peer, client) = match value.split_once(';') {
        Some((peer, client)) => (peer.trim(), Some(client.trim())),
        None => (value, None),
    };
    let (host, rest) = split_host(peer).ok_or("no quorum address")?;
    let mut parts = rest.split(':');
    let port = |p: Option<&str>| p.and_then(|p| p.parse::<u16>().ok());
    let quorum_port = port(parts.next()).ok_or("bad quorum port")?;
    let election_port = port(parts.next()).ok_or("bad election port")?;
    let role = match parts.next() {
        None | Some("participant") => ServerRole::Participant,
        Some("observer") => ServerRole::Observer,
        Some(_) => return Err("unknown role"),
    };
    if parts.next().is_some() {
        return Err("too many fields");
    }
    let client = match client.filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(client_address(c, host).ok_or("bad client address")?),
    };
    Ok(ServerSpec {
        id,
        host: host.to_string(),
        quorum_port,
        election_port,
        role,
        client,
    })
}

/// `host:rest` or `[v6]:rest` → (host, rest).
fn split_host(s: &str) -> Option<(&str, &str)> {
    if let Some(v6) = s.strip_prefix('[') {
        let end = v6.find(']')?;
        let rest = v6[end + 1..].strip_prefix(':')?;
        return Some((&s[..end + 2], rest));
    }
    let (host, rest) = s.split_once(':')?;
    (!host.is_empty()).then_some((host, rest))
}

/// `port`, `host:port` or `[v6]:port`; a wildcard or missing host is the server's.
fn client_address(c: &str, server_host: &str) -> Option<String> {
    let (host, port) = match split_host(c) {
        Some((host, port)) => (host, port),
        None => ("", c),
    };
    let port: u16 = port.parse().ok()?;
    let host = match host {
        "" | "0.0.0.0" | "[::]" | "[0:0:0:0:0:0:0:0]" => server_host,
        h => h,
    };
    Some(alloc::format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_zookeeper_3_8_writes() {
        let text = "server.1=127.0.0.1:40001:40002:participant;127.0.0.1:40000\n\
                    server.2=127.0.0.1:40011:40012:participant;127.0.0.1:40010\n\
                    server.4=[::1]:40031:40032:observer;[::1]:40030\n\
                    server.5=h5:1:2;2185\n\
                    server.6=h6:1:2\n\
                    version=200000005\n";
        let c = EnsembleConfig::parse(text).unwrap();
        assert_eq!(c.version, 0x2_0000_0005);
        assert_eq!(c.servers.len(), 5);
        assert_eq!(c.servers[2].host, "[::1]");
        assert_eq!(c.servers[2].role, ServerRole::Observer);
        assert_eq!(c.servers[4].client, None);
        assert_eq!(
            c.client_hosts(),
            [
                "127.0.0.1:40000",
                "127.0.0.1:40010",
                "[::1]:40030",
                "h5:2185"
            ]
        );
    }

    #[test]
    fn malformed_lines_are_named() {
        for bad in [
            "server.1=h",
            "server.1=h:1",
            "server.1=h:1:2:leader",
            "server.1=h:1:2;h:x",
            "server.a=h:1:2",
            "version=zz",
            "garbage",
            "server.1=:1:2",
            "server.1=[::1:1:2",
        ] {
            let e = EnsembleConfig::parse(bad).unwrap_err();
            assert_eq!(e.line, bad);
        }
        assert_eq!(
            EnsembleConfig::parse("").unwrap(),
            EnsembleConfig::default()
        );
    }
}
