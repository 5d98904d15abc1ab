use crate::error::ConnectStringError;
use crate::proto::Chroot;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A parsed connection string: `host1:port,host2:port/optional/chroot`.
///
/// ```
/// use zk_recipes::session::ConnectString;
/// let cs: ConnectString = "10.0.0.1:2181,zk2:2182/app".parse().unwrap();
/// assert_eq!(cs.hosts(), &["10.0.0.1:2181".to_string(), "zk2:2182".to_string()]);
/// assert_eq!(cs.chroot().root(), Some("/app"));
/// let bare: ConnectString = "localhost".parse().unwrap();
/// assert_eq!(bare.hosts(), &["localhost:2181".to_string()]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConnectString {
    hosts: Vec<String>,
    chroot: Chroot,
}

impl ConnectString {
    /// `host:port` entries, in the order given (the session shuffles them).
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The chroot (possibly none).
    pub fn chroot(&self) -> &Chroot {
        &self.chroot
    }
}

impl core::str::FromStr for ConnectString {
    type Err = ConnectStringError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (hosts_part, chroot) = match s.find('/') {
            Some(i) => (
                &s[..i],
                Chroot::new(&s[i..]).map_err(ConnectStringError::BadChroot)?,
            ),
            None => (s, Chroot::NONE),
        };
        let mut hosts = Vec::new();
        for entry in hosts_part
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
        {
            // `[v6]:port`, `host:port`, or `host` (default port 2181).
            let has_port = match entry.rfind(':') {
                Some(i) if entry.starts_with('[') => entry[..i].ends_with(']'),
                Some(i) => !entry[..i].contains(':'),
                None => false,
            };
            if has_port {
                let i = entry.rfind(':').unwrap_or(0);
                if i == 0 || entry[i + 1..].parse::<u16>().is_err() {
                    return Err(ConnectStringError::BadHost(entry.to_string()));
                }
                hosts.push(entry.to_string());
            } else {
                hosts.push(alloc::format!("{entry}:2181"));
            }
        }
        if hosts.is_empty() {
            return Err(ConnectStringError::NoHosts);
        }
        Ok(ConnectString { hosts, chroot })
    }
}
