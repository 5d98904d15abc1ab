//! The data a releasing holder writes into the contenders after it: grants and notices
//! (see the module docs, protocol step 4), written and read.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::types::{GRANT, MAX_SUCCESSORS, NOTICE};
use crate::recipe::contender;

/// `marker`, then `names` one per line: the data of a grant or a notice.
fn marked<'a>(marker: &[u8], names: impl Iterator<Item = &'a str> + Clone) -> Bytes {
    let mut v =
        Vec::with_capacity(marker.len() + names.clone().map(|n| n.len() + 1).sum::<usize>());
    v.extend_from_slice(marker);
    for name in names {
        v.push(b'\n');
        v.extend_from_slice(name.as_bytes());
    }
    Bytes::from(v)
}

/// The grant data for a successor: [`GRANT`], then `tail` one name per line.
pub(super) fn grant_data(tail: &[String]) -> Bytes {
    marked(GRANT, tail.iter().map(String::as_str))
}

/// The notice data for the contender after `holder`: [`NOTICE`], `holder`, then `tail`.
pub(super) fn notice_data(holder: &str, tail: &[String]) -> Bytes {
    marked(
        NOTICE,
        core::iter::once(holder).chain(tail.iter().map(String::as_str)),
    )
}

/// A notice found in our node: the sequence number of the contender it says holds
/// (our predecessor, by its writer's listing) and the successors after us; `None` if
/// the data is no notice. Like a grant, only a write puts one there (version ≥ 1).
pub(super) fn parse_notice(data: &[u8], version: i32, ours: &str) -> Option<(i64, Vec<String>)> {
    let rest = data.strip_prefix(NOTICE).filter(|_| version >= 1)?;
    let rest = rest.strip_prefix(b"\n")?;
    let (holder, tail) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, &[][..]),
    };
    let holder = core::str::from_utf8(holder).ok()?;
    if !contender::may_be_granted(holder)
        || contender::order_key(holder)? >= contender::order_key(ours)?
    {
        return None;
    }
    Some((seq_number(holder)?, parse_tail(tail, ours)?))
}

/// A contender's sequence number (unique in its directory).
pub(super) fn seq_number(name: &str) -> Option<i64> {
    contender::order_key(name).and_then(|(seq, _)| seq.parse().ok())
}

/// The successors a grant found in our node hands on, or `None` if the data is no
/// grant. Only a write can put one there (a fresh node has version 0, and a grant is
/// written with version 0 expected); the names must follow `ours` in lock order.
pub(super) fn parse_grant(data: &[u8], version: i32, ours: &str) -> Option<Vec<String>> {
    parse_tail(data.strip_prefix(GRANT).filter(|_| version >= 1)?, ours)
}

/// The names after a grant's or a notice's head (`rest` empty or starting with a line
/// break), kept while they are `_c_` contenders after `ours` in lock order.
fn parse_tail(rest: &[u8], ours: &str) -> Option<Vec<String>> {
    if rest.first().is_some_and(|b| *b != b'\n') {
        return None;
    }
    let mut tail = Vec::new();
    let mut last = contender::order_key(ours)?;
    for part in rest.split(|b| *b == b'\n').skip(1) {
        let Ok(name) = core::str::from_utf8(part) else {
            break;
        };
        match contender::order_key(name) {
            Some(key)
                if key > last && contender::may_be_granted(name) && tail.len() < MAX_SUCCESSORS =>
            {
                last = key;
                tail.push(name.to_string());
            }
            _ => break,
        }
    }
    Some(tail)
}
