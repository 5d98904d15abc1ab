//! What the clients report: one line per event on their standard output, the same for
//! the Rust clients of both adapters and the Java (Curator) ones.
//!
//! A line is `nemesis: <event> <fields...>`; times are microseconds since the Unix
//! epoch (the machine's real-time clock, which every process shares). The events:
//!
//! | line | meaning |
//! |---|---|
//! | `ready` | connected; the workload starts |
//! | `held <tenure> <token> <t>` | a lock, a leadership or a lease is ours from now (`token`: the fencing token; 0 for a lease) |
//! | `heard <tenure> suspended\|reconnected\|lost <t>` | an event of the hold, as the client heard it |
//! | `act <tenure> <token> <t>` | about to act as holder: checked at `t` that it holds (the client then waits for `ok` or `refused` on its standard input: the fenced store's verdict) |
//! | `acted <tenure> <t>` | the act is over |
//! | `ended <tenure> released\|lost\|failed <t>` | the hold is over |
//! | `add <t0> <t1> ok <value>` / `add <t0> <t1> doubt` / `add <t0> <t1> failed` | a counter increment: its value, in doubt (may have applied), or not applied |
//! | `put <item> <t0> <t1> ok\|doubt\|failed` | a queue put: acknowledged, in doubt (may have applied), or not applied |
//! | `take <item> <t>` | an item taken (at most once) |
//! | `take-doubt <t>` | a take failed in doubt: the item it was taking may be gone (at most once; one item, the clients take one at a time) |
//! | `claim <item> <t>` | an item claimed (at least once) |
//! | `complete <item> <t> ok\|doubt` | a claimed item completed |
//! | `error <text>` | something the client did not expect |
//! | `done <t>` | the client finished (after `stop` on its standard input) |

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
pub type Micros = i64;

/// Now, in [`Micros`].
pub fn now_micros() -> Micros {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as Micros)
        .unwrap_or(0)
}

/// The prefix of every report line.
pub const CLIENT_LINE_PREFIX: &str = "nemesis: ";

/// One event a client reported (see the module docs for the lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Connected.
    Ready,
    /// A hold began.
    Held {
        /// The client's name for the hold.
        tenure: String,
        /// Its fencing token (0 without one).
        token: i64,
        /// When.
        at: Micros,
    },
    /// An event of a hold.
    Heard {
        /// Which hold.
        tenure: String,
        /// `suspended`, `reconnected` or `lost`.
        what: String,
        /// When.
        at: Micros,
    },
    /// An act began, checked at `at`.
    Act {
        /// Which hold.
        tenure: String,
        /// The token it acts with.
        token: i64,
        /// When it checked that it holds.
        at: Micros,
    },
    /// An act ended.
    Acted {
        /// Which hold.
        tenure: String,
        /// When.
        at: Micros,
    },
    /// A hold ended.
    Ended {
        /// Which hold.
        tenure: String,
        /// `released`, `lost` or `failed`.
        how: String,
        /// When.
        at: Micros,
    },
    /// A counter increment.
    Add {
        /// Called at.
        from: Micros,
        /// Returned at.
        to: Micros,
        /// `Some(Some(v))`: acknowledged with value `v`; `Some(None)`: not applied;
        /// `None`: in doubt.
        outcome: Option<Option<i64>>,
    },
    /// A queue put.
    Put {
        /// The item (its data).
        item: String,
        /// Called at.
        from: Micros,
        /// Returned at.
        to: Micros,
        /// `Some(true)`: acknowledged; `Some(false)`: not applied; `None`: in doubt.
        outcome: Option<bool>,
    },
    /// A take failed with an error that says it may have applied.
    TakeDoubt {
        /// When.
        at: Micros,
    },
    /// An item taken at most once.
    Take {
        /// The item.
        item: String,
        /// When.
        at: Micros,
    },
    /// An item claimed.
    Claim {
        /// The item.
        item: String,
        /// When.
        at: Micros,
    },
    /// A claimed item completed.
    Complete {
        /// The item.
        item: String,
        /// When.
        at: Micros,
        /// Acknowledged (else in doubt).
        ok: bool,
    },
    /// Something unexpected.
    Error(String),
    /// Finished.
    Done {
        /// When.
        at: Micros,
    },
}

fn field<T: std::str::FromStr>(f: &[&str], i: usize) -> Result<T, String> {
    f.get(i)
        .ok_or_else(|| format!("field {i} missing"))?
        .parse()
        .map_err(|_| format!("field {i} malformed"))
}

impl Event {
    /// Parses a report line (with or without the prefix); `None` for a line that is
    /// not a report (the test harness's own output), `Err` for a malformed one.
    pub fn parse(line: &str) -> Option<Result<Event, String>> {
        let body = line.trim_end().strip_prefix(CLIENT_LINE_PREFIX)?;
        let f: Vec<&str> = body.split(' ').collect();
        let s = |i: usize| {
            f.get(i)
                .map(|s| s.to_string())
                .ok_or("field missing".to_string())
        };
        let parsed = (|| -> Result<Event, String> {
            Ok(match f[0] {
                "ready" => Event::Ready,
                "held" => Event::Held {
                    tenure: s(1)?,
                    token: field(&f, 2)?,
                    at: field(&f, 3)?,
                },
                "heard" => Event::Heard {
                    tenure: s(1)?,
                    what: s(2)?,
                    at: field(&f, 3)?,
                },
                "act" => Event::Act {
                    tenure: s(1)?,
                    token: field(&f, 2)?,
                    at: field(&f, 3)?,
                },
                "acted" => Event::Acted {
                    tenure: s(1)?,
                    at: field(&f, 2)?,
                },
                "ended" => Event::Ended {
                    tenure: s(1)?,
                    how: s(2)?,
                    at: field(&f, 3)?,
                },
                "add" => Event::Add {
                    from: field(&f, 1)?,
                    to: field(&f, 2)?,
                    outcome: match f.get(3).copied() {
                        Some("ok") => Some(Some(field(&f, 4)?)),
                        Some("failed") => Some(None),
                        Some("doubt") => None,
                        _ => return Err("add outcome".into()),
                    },
                },
                "put" => Event::Put {
                    item: s(1)?,
                    from: field(&f, 2)?,
                    to: field(&f, 3)?,
                    outcome: match f.get(4).copied() {
                        Some("ok") => Some(true),
                        Some("failed") => Some(false),
                        Some("doubt") => None,
                        _ => return Err("put outcome".into()),
                    },
                },
                "take-doubt" => Event::TakeDoubt { at: field(&f, 1)? },
                "take" => Event::Take {
                    item: s(1)?,
                    at: field(&f, 2)?,
                },
                "claim" => Event::Claim {
                    item: s(1)?,
                    at: field(&f, 2)?,
                },
                "complete" => Event::Complete {
                    item: s(1)?,
                    at: field(&f, 2)?,
                    ok: s(3)? == "ok",
                },
                "error" => Event::Error(body["error".len()..].trim().to_string()),
                "done" => Event::Done { at: field(&f, 1)? },
                other => return Err(format!("unknown event {other}")),
            })
        })();
        Some(parsed.map_err(|e| format!("{e} in {line:?}")))
    }

    /// The line that reports it (with the prefix).
    pub fn line(&self) -> String {
        let body = match self {
            Event::Ready => "ready".to_string(),
            Event::Held { tenure, token, at } => format!("held {tenure} {token} {at}"),
            Event::Heard { tenure, what, at } => format!("heard {tenure} {what} {at}"),
            Event::Act { tenure, token, at } => format!("act {tenure} {token} {at}"),
            Event::Acted { tenure, at } => format!("acted {tenure} {at}"),
            Event::Ended { tenure, how, at } => format!("ended {tenure} {how} {at}"),
            Event::Add { from, to, outcome } => match outcome {
                Some(Some(v)) => format!("add {from} {to} ok {v}"),
                Some(None) => format!("add {from} {to} failed"),
                None => format!("add {from} {to} doubt"),
            },
            Event::Put {
                item,
                from,
                to,
                outcome,
            } => {
                let how = match outcome {
                    Some(true) => "ok",
                    Some(false) => "failed",
                    None => "doubt",
                };
                format!("put {item} {from} {to} {how}")
            }
            Event::TakeDoubt { at } => format!("take-doubt {at}"),
            Event::Take { item, at } => format!("take {item} {at}"),
            Event::Claim { item, at } => format!("claim {item} {at}"),
            Event::Complete { item, at, ok } => {
                format!("complete {item} {at} {}", if *ok { "ok" } else { "doubt" })
            }
            Event::Error(text) => format!("error {text}"),
            Event::Done { at } => format!("done {at}"),
        };
        format!("{CLIENT_LINE_PREFIX}{body}")
    }
}

/// One reported event with its client, in the order the client reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The client (nemesis numbering).
    pub client: usize,
    /// What it reported.
    pub event: Event,
}

/// A client process frozen by the nemesis: from just before its SIGSTOP to just after
/// its SIGCONT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// The client.
    pub client: usize,
    /// Frozen from.
    pub from: Micros,
    /// Thawed at.
    pub to: Micros,
}

/// A write the fenced store received: the verdict it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreWrite {
    /// The client.
    pub client: usize,
    /// Its hold.
    pub tenure: String,
    /// The token it wrote with.
    pub token: i64,
    /// When the store decided.
    pub at: Micros,
    /// Accepted (else refused: a higher token was seen before).
    pub accepted: bool,
}

/// A workload's history: what its clients reported, in each client's order, the pauses
/// of its clients and what its fenced store decided.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every report, each client's in its order (clients interleaved as they came).
    pub lines: Vec<Line>,
    /// The pauses of the workload's clients.
    pub pauses: Vec<Pause>,
    /// The fenced store's decisions, in its order.
    pub store: Vec<StoreWrite>,
}

/// The fenced store of a lock or an election: refuses a token lower than the highest
/// it has accepted (no tokens: accepts everything).
#[derive(Debug, Default)]
pub struct FencedStore {
    highest: Option<i64>,
    fenced: bool,
}

impl FencedStore {
    /// A store that fences by token (`fenced`) or accepts every write.
    pub fn new(fenced: bool) -> FencedStore {
        FencedStore {
            highest: None,
            fenced,
        }
    }

    /// Decides a write with `token`.
    pub fn write(&mut self, token: i64) -> bool {
        if self.fenced && self.highest.is_some_and(|h| token < h) {
            return false;
        }
        self.highest = Some(self.highest.map_or(token, |h| h.max(token)));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_round_trips_through_its_line() {
        let events = [
            Event::Ready,
            Event::Held {
                tenure: "3.1".into(),
                token: 4294967299,
                at: 17,
            },
            Event::Heard {
                tenure: "3.1".into(),
                what: "suspended".into(),
                at: 18,
            },
            Event::Act {
                tenure: "3.1".into(),
                token: 5,
                at: 19,
            },
            Event::Acted {
                tenure: "3.1".into(),
                at: 20,
            },
            Event::Ended {
                tenure: "3.1".into(),
                how: "lost".into(),
                at: 21,
            },
            Event::Add {
                from: 1,
                to: 2,
                outcome: Some(Some(7)),
            },
            Event::Add {
                from: 1,
                to: 2,
                outcome: Some(None),
            },
            Event::Add {
                from: 1,
                to: 2,
                outcome: None,
            },
            Event::Put {
                item: "p0-3".into(),
                from: 1,
                to: 2,
                outcome: None,
            },
            Event::Put {
                item: "p0-5".into(),
                from: 1,
                to: 2,
                outcome: Some(false),
            },
            Event::TakeDoubt { at: 4 },
            Event::Take {
                item: "p0-3".into(),
                at: 3,
            },
            Event::Claim {
                item: "p0-4".into(),
                at: 3,
            },
            Event::Complete {
                item: "p0-4".into(),
                at: 4,
                ok: true,
            },
            Event::Error("unexpected thing: x".into()),
            Event::Done { at: 9 },
        ];
        for e in events {
            assert_eq!(Event::parse(&e.line()), Some(Ok(e.clone())), "{}", e.line());
        }
        assert_eq!(Event::parse("running 1 test"), None);
        assert!(matches!(Event::parse("nemesis: held x"), Some(Err(_))));
        assert!(matches!(Event::parse("nemesis: bogus"), Some(Err(_))));
    }

    #[test]
    fn the_store_refuses_lower_tokens_only_when_fenced() {
        let mut s = FencedStore::new(true);
        assert!(s.write(5));
        assert!(s.write(5));
        assert!(s.write(9));
        assert!(!s.write(5));
        let mut open = FencedStore::new(false);
        assert!(open.write(9) && open.write(5));
    }
}
