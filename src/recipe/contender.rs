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
/// Curator's `InterProcessSemaphoreV2` lease marker (see [`semaphore`](super::semaphore)).
pub const LEASE: &str = "lease-";
/// kazoo's lock marker (created only by a lock with [`Naming::Kazoo`](super::lock::Naming::Kazoo)).
pub const KAZOO_LOCK: &str = "__lock__";
/// kazoo's read-lock marker (read only).
pub const KAZOO_READ: &str = "__rlock__";

/// Every known marker. None holds a digit, and none holds another: what lets
/// [`split`] read a name's marker from its fixed-width suffix.
pub const MARKERS: [&str; 7] = [LOCK, LATCH, READ, WRITE, LEASE, KAZOO_LOCK, KAZOO_READ];

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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
        let (marker, sequence) = split(name)?;
        Some(Contender {
            name: name.into(),
            marker,
            sequence: sequence.into(),
        })
    }

    /// Does this contender exclude readers (a writer or an exclusive holder)?
    pub fn is_writer(&self) -> bool {
        !matches!(self.marker, READ | KAZOO_READ)
    }
}

/// What orders a contender (the text after its last known marker, then its name);
/// `None` for children without a known marker. No allocation.
///
/// ```
/// use zk_recipes::recipe::contender::order_key;
/// assert!(order_key("_c_b-latch-0000000001") < order_key("_c_a-latch-0000000002"));
/// assert_eq!(order_key("ready"), None);
/// ```
pub fn order_key(name: &str) -> Option<(&str, &str)> {
    split(name).map(|(_, seq)| (seq, name))
}

/// Digits of the sequence number ZooKeeper appends to a sequential node's name.
const SEQUENCE_DIGITS: usize = 10;

/// Splits a child name into (marker, sequence text) without allocating: the text after
/// the last known marker (at the same position the longer marker).
///
/// O(1) for the usual name, a marker right before ZooKeeper's 10-digit suffix: no
/// marker holds a digit, so no occurrence of one overlaps the suffix, and none holds
/// another one ([`split_general`] would find no later occurrence inside that marker);
/// any other name takes the general rule. `contender_props` checks both agree.
pub fn split(name: &str) -> Option<(&'static str, &str)> {
    let bytes = name.as_bytes();
    if let Some(at) = bytes.len().checked_sub(SEQUENCE_DIGITS) {
        let (head, tail) = bytes.split_at(at);
        // Every byte looked at, no early exit: the compiler checks them side by side.
        if tail.iter().fold(true, |all, b| all & b.is_ascii_digit()) {
            if let Some(marker) = MARKERS.iter().find(|m| head.ends_with(m.as_bytes())) {
                // `at` follows an ASCII digit run's start: a char boundary.
                return Some((marker, name.get(at..)?));
            }
        }
    }
    split_general(name)
}

/// Where the last occurrence of `marker` starts in `name` (`str::rfind` on bytes, with
/// no searcher to set up: for names this short the set-up costs more than the search).
/// An ASCII marker can only match at a char boundary.
fn rfind(name: &[u8], marker: &[u8]) -> Option<usize> {
    let (&first, _) = marker.split_first()?;
    let last = name.len().checked_sub(marker.len())?;
    (0..=last).rev().find(|&i| {
        name.get(i) == Some(&first) && name.get(i..).is_some_and(|n| n.starts_with(marker))
    })
}

/// The general rule behind [`split`]: the last occurrence of any known marker (at the
/// same position the longer one), searched for in the whole name.
pub fn split_general(name: &str) -> Option<(&'static str, &str)> {
    let (at, marker) = MARKERS
        .iter()
        .filter_map(|m| rfind(name.as_bytes(), m.as_bytes()).map(|i| (i, *m)))
        .max_by_key(|(i, m)| (*i, m.len()))?;
    Some((marker, name.get(at + marker.len()..)?))
}

/// What blocks `ours` in a listing: how many lower contenders block it, and the
/// nearest one (the one to watch). `None` if `ours` is not in the listing. Readers are
/// blocked only by writers. One pass, no sorting, no allocation.
///
/// ```
/// use zk_recipes::recipe::contender::blockers;
/// let kids: Vec<String> = ["_c_a-lock-0000000003", "_c_b-lock-0000000001", "_c_me-lock-0000000005", "_c_c-lock-0000000009", "x"]
///     .iter().map(|s| s.to_string()).collect();
/// assert_eq!(blockers(&kids, "_c_me-lock-0000000005", false), Some((2, Some("_c_a-lock-0000000003"))));
/// ```
pub fn blockers<'a>(
    children: &'a [String],
    ours: &str,
    reader: bool,
) -> Option<(usize, Option<&'a str>)> {
    let (_, our_seq) = split(ours)?;
    let mut found = false;
    let mut count = 0;
    let mut nearest: Option<(&str, &str)> = None; // (sequence, name)
    for child in children {
        if child == ours {
            found = true;
            continue;
        }
        let Some((marker, seq)) = split(child) else {
            continue;
        };
        let lower = (seq, child.as_str()) < (our_seq, ours);
        let blocks = !reader || !matches!(marker, READ | KAZOO_READ);
        if lower && blocks {
            count += 1;
            if nearest.is_none_or(|n| (seq, child.as_str()) > n) {
                nearest = Some((seq, child.as_str()));
            }
        }
    }
    found.then_some((count, nearest.map(|(_, name)| name)))
}

/// The contenders right after `ours` in lock order, nearest first, at most `max`: whom
/// a releasing holder can hand the lock to (nothing can ever sort between two of them:
/// sequence numbers only grow). Only lock contenders with the protected prefix count
/// ([`may_be_granted`]); one of another kind (a latch, a lease, kazoo's) ends the run.
/// Linear in the listing: a partial selection, then a sort of the `max` kept.
///
/// ```
/// use zk_recipes::recipe::contender::successors;
/// let kids: Vec<String> = ["_c_c-lock-0000000009", "_c_me-lock-0000000005", "_c_a-lock-0000000003", "_c_b-lock-0000000007"]
///     .iter().map(|s| s.to_string()).collect();
/// assert_eq!(successors(&kids, "_c_me-lock-0000000005", 8), ["_c_b-lock-0000000007", "_c_c-lock-0000000009"]);
/// assert_eq!(successors(&kids, "_c_me-lock-0000000005", 1), ["_c_b-lock-0000000007"]);
/// ```
pub fn successors(children: &[String], ours: &str, max: usize) -> Vec<String> {
    let Some((_, our_seq)) = split(ours) else {
        return Vec::new();
    };
    let mut after: Vec<(&str, &str)> = children
        .iter()
        .filter_map(|c| order_key(c))
        .filter(|&k| k > (our_seq, ours))
        .collect();
    if max == 0 {
        return Vec::new();
    }
    if after.len() > max {
        after.select_nth_unstable(max - 1);
        after.truncate(max);
    }
    after.sort_unstable();
    after
        .into_iter()
        .map(|(_, name)| name)
        .take_while(|name| may_be_granted(name))
        .map(String::from)
        .collect()
}

/// A listing sorted once into lock order, for many contenders to look themselves up in
/// (the waiters of one session that share one listing of their directory): each
/// learns what [`blockers`] and [`successors`] would tell it in O(log n) plus the
/// successors it takes, instead of a pass over the whole listing each. It keeps
/// positions, not names: look up with the same listing it was built from.
///
/// ```
/// use zk_recipes::recipe::contender::{blockers, successors, SortedListing};
/// let kids: Vec<String> = ["_c_a-__WRIT__0000000003", "_c_b-__READ__0000000004", "_c_me-__READ__0000000005", "_c_c-lock-0000000009", "x"]
///     .iter().map(|s| s.to_string()).collect();
/// let sorted = SortedListing::new(&kids);
/// let me = "_c_me-__READ__0000000005";
/// assert_eq!(sorted.blockers(&kids, me, true), blockers(&kids, me, true));
/// assert_eq!(sorted.blockers(&kids, me, true), Some((1, Some("_c_a-__WRIT__0000000003"))));
/// assert_eq!(sorted.successors(&kids, me, 8), successors(&kids, me, 8));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SortedListing {
    /// Indices into the listing of the children with a known marker, in lock order.
    order: Vec<u32>,
    /// For each position `p` in `order`, and one past the end: how many writers
    /// (contenders that exclude readers) come before it, and the position + 1 of the
    /// nearest one (0: none).
    writers_before: Vec<(u32, u32)>,
}

impl SortedListing {
    /// Sorts `children` (a listing of at most `u32::MAX` names; any further are left
    /// out).
    pub fn new(children: &[String]) -> SortedListing {
        let mut keyed: Vec<(&str, &str, u32)> = children
            .iter()
            .take(u32::MAX as usize)
            .enumerate()
            .filter_map(|(i, c)| order_key(c).map(|(seq, name)| (seq, name, i as u32)))
            .collect();
        keyed.sort_unstable();
        let order: Vec<u32> = keyed.iter().map(|k| k.2).collect();
        let mut writers_before = Vec::with_capacity(order.len() + 1);
        let (mut count, mut nearest) = (0u32, 0u32);
        for (p, k) in keyed.iter().enumerate() {
            writers_before.push((count, nearest));
            if split(k.1).is_some_and(|(m, _)| !matches!(m, READ | KAZOO_READ)) {
                count += 1;
                nearest = p as u32 + 1;
            }
        }
        writers_before.push((count, nearest));
        SortedListing {
            order,
            writers_before,
        }
    }

    fn name<'a>(&self, children: &'a [String], p: usize) -> Option<&'a str> {
        let i = *self.order.get(p)? as usize;
        children.get(i).map(String::as_str)
    }

    /// Where `ours` sorts: the number of contenders below it, and whether the one at
    /// that position is `ours` itself.
    fn position(&self, children: &[String], ours: &str) -> Option<(usize, bool)> {
        let key = order_key(ours)?;
        let p = self
            .order
            .partition_point(|&i| children.get(i as usize).and_then(|c| order_key(c)) < Some(key));
        Some((p, self.name(children, p) == Some(ours)))
    }

    /// What [`blockers`] tells for `ours` in `children` (the listing this was built from).
    pub fn blockers<'a>(
        &self,
        children: &'a [String],
        ours: &str,
        reader: bool,
    ) -> Option<(usize, Option<&'a str>)> {
        let (p, found) = self.position(children, ours)?;
        if !found {
            return None;
        }
        if !reader {
            let nearest = p.checked_sub(1).and_then(|q| self.name(children, q));
            return Some((p, nearest));
        }
        let (count, nearest) = self.writers_before.get(p).copied().unwrap_or((0, 0));
        let nearest = (nearest as usize)
            .checked_sub(1)
            .and_then(|q| self.name(children, q));
        Some((count as usize, nearest))
    }

    /// What [`successors`] tells for `ours` in `children` (the listing this was built
    /// from).
    pub fn successors(&self, children: &[String], ours: &str, max: usize) -> Vec<String> {
        let Some(key) = order_key(ours) else {
            return Vec::new();
        };
        let after = self
            .order
            .partition_point(|&i| children.get(i as usize).and_then(|c| order_key(c)) <= Some(key));
        (after..self.order.len())
            .filter_map(|q| self.name(children, q))
            .take(max)
            .take_while(|name| may_be_granted(name))
            .map(String::from)
            .collect()
    }
}

/// Can a releasing holder hand the lock to this contender: a lock contender (`lock-`,
/// `__READ__`, `__WRIT__`) with the protected prefix (ours or Curator's)? Not a latch
/// or lease in the same directory (their node data is theirs), nor kazoo's.
pub fn may_be_granted(name: &str) -> bool {
    name.starts_with("_c_") && matches!(split(name), Some((LOCK | READ | WRITE, _)))
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
