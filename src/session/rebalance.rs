//! The ensemble tracker's state and its pure rules (a leaf of the session): which
//! reads are of the configuration node, where their watches live, and the rebalancing
//! decision (see [`ensemble`](super::ensemble) for how the session follows the ensemble).

use alloc::string::String;
use alloc::vec::Vec;

use super::rng::Rng;
use crate::proto::{Chroot, Request, CONFIG_NODE};

/// The tracker's state.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    /// A read of the config node is on the wire.
    pub(super) reading: bool,
    /// The version of the last configuration applied.
    pub(super) version: Option<i64>,
}

/// Is `request` a read of the configuration node (sent outside the chroot)?
pub(super) fn reads_config(request: &Request) -> bool {
    matches!(request, Request::GetData(p) | Request::Exists(p) if p.path == CONFIG_NODE)
}

/// The server path of a watched path: the configuration node's `reads` (data and exist
/// watches) are outside the chroot.
pub(super) fn server_path(chroot: &Chroot, path: &str, reads: bool) -> String {
    if reads && path == CONFIG_NODE {
        path.into()
    } else {
        chroot.prefix(path)
    }
}

/// What a new host list means for the connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Rebalance {
    /// The order to try the new list in (indices into it); the first is next.
    pub(super) order: Vec<usize>,
    /// Leave the current server now (for `order[0]`).
    pub(super) leave: bool,
}

/// The rebalancing decision (see the module docs) for a client on `current` (a host of
/// `old`) when the membership becomes `new` (not empty).
pub(super) fn rebalance(old: &[String], current: &str, new: &[String], rng: &mut Rng) -> Rebalance {
    let mut shuffled: Vec<usize> = (0..new.len()).collect();
    rng.shuffle(&mut shuffled);
    let (kept, added): (Vec<usize>, Vec<usize>) =
        shuffled.iter().partition(|&&i| old.contains(&new[i]));
    let stays = new.iter().position(|h| h == current);
    let grew = new.len() > old.len();
    let first_added = |kept: Vec<usize>, added: Vec<usize>| {
        let mut order = added;
        order.extend(kept);
        order
    };
    match stays {
        Some(here) => {
            // Move with probability (new - old) / new: a draw in 0..new below new - old.
            if grew && rng.below(new.len()) < new.len() - old.len() {
                return Rebalance {
                    order: first_added(kept, added),
                    leave: true,
                };
            }
            let mut order = shuffled;
            if let Some(at) = order.iter().position(|&i| i == here) {
                order.rotate_left(at);
            }
            Rebalance {
                order,
                leave: false,
            }
        }
        None if grew => Rebalance {
            order: first_added(kept, added),
            leave: true,
        },
        None => {
            // To a kept server with probability kept·(old−new) / (new·(old−kept)).
            let numerator = kept.len() * (old.len() - new.len());
            let denominator = new.len() * old.len().saturating_sub(kept.len());
            let to_kept = denominator == 0 || rng.below(denominator) < numerator;
            let order = if to_kept {
                let mut order = kept;
                order.extend(added);
                order
            } else {
                first_added(kept, added)
            };
            Rebalance { order, leave: true }
        }
    }
}

/// For tests: the rebalancing of one client.
#[cfg(test)]
pub(super) fn rebalance_for_test(
    old: &[&str],
    current: &str,
    new: &[&str],
    seed: u64,
) -> (Vec<String>, bool) {
    let old: Vec<String> = old.iter().map(|s| String::from(*s)).collect();
    let new: Vec<String> = new.iter().map(|s| String::from(*s)).collect();
    let r = rebalance(&old, current, &new, &mut Rng::new(seed));
    (r.order.iter().map(|&i| new[i].clone()).collect(), r.leave)
}
