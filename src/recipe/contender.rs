//! Contender node names shared with Apache Curator (and readable from kazoo):
//! `_c_<uuid>-<marker><10-digit sequence>`, ordered by the text after the last known
//! marker (Curator's `fixForSorting`), children without a known marker ignored.

use alloc::string::String;
use alloc::vec::Vec;

/// Curator's `InterProcessMutex` marker.
pub const LOCK: &str = "lock-";
/// Curator's `LeaderLatch` marker.
pub const LATCH: &str = "latch-";
/// Curator's read-lock marker.
pub const READ: &str = "__READ__";
/// Curator's write-lock marker.
pub const WRITE: &str = "__WRIT__";
/// kazoo's lock marker (read only: we never create it).
pub const KAZOO_LOCK: &str = "__lock__";
/// kazoo's read-lock marker (read only).
pub const KAZOO_READ: &str = "__rlock__";

const MARKERS: [&str; 6] = [LOCK, LATCH, READ, WRITE, KAZOO_LOCK, KAZOO_READ];

/// The prefix of every node this contender creates: `_c_<id>-`. Curator calls this
/// "protection": it lets a client find its node after a lost create reply.
pub fn protected_prefix(id: &str) -> String {
    let mut s = String::with_capacity(id.len() + 4);
    s.push_str("_c_");
    s.push_str(id);
    s.push('-');
    s
}

/// A child of a contention directory that carries a known marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contender {
    /// The child's name.
    pub name: String,
    /// The marker it carries (the last one in its name).
    pub marker: &'static str,
    /// What sorts it: the text after the marker (normally the 10-digit sequence).
    pub sequence: String,
}

impl Contender {
    /// Parses a child name; `None` for children without a known marker.
    ///
    /// ```
    /// use zk_recipes::recipe::contender::{Contender, WRITE};
    /// let c = Contender::parse("_c_6f1c2a4e-__WRIT__0000000007").unwrap();
    /// assert_eq!((c.marker, c.sequence.as_str()), (WRITE, "0000000007"));
    /// assert!(Contender::parse("config").is_none());
    /// ```
    pub fn parse(name: &str) -> Option<Contender> {
        let (at, marker) = MARKERS
            .iter()
            .filter_map(|m| name.rfind(m).map(|i| (i, *m)))
            // The last marker wins; at the same position the longer one (none overlap today).
            .max_by_key(|(i, m)| (*i, m.len()))?;
        Some(Contender {
            name: name.into(),
            marker,
            sequence: name[at + marker.len()..].into(),
        })
    }

    /// Does this contender exclude readers (a writer or an exclusive holder)?
    pub fn is_writer(&self) -> bool {
        !matches!(self.marker, READ | KAZOO_READ)
    }
}

/// The children with known markers, in lock order.
pub fn sorted(children: &[String]) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .iter()
        .filter_map(|c| Contender::parse(c))
        .collect();
    out.sort_by(|a, b| {
        a.sequence
            .cmp(&b.sequence)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}
