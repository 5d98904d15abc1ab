//! [`Counter`]: a shared counter on [`Update`] (see the [module docs](super)).

use alloc::collections::VecDeque;
use bytes::Bytes;

use super::update::{Proposal, Update, UpdateConfig, UpdateEvent};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{forward_parts, one_part, recipe_events, to_parts, Events, Parts};
use crate::recipe::{Machine, OpId, Recipe, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// How a counter is stored in its node (see the [module docs](super)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterFormat {
    /// 4-byte big-endian `int`: Curator's `SharedCount`.
    I32,
    /// 8-byte big-endian `long`: Curator's `DistributedAtomicLong`.
    I64,
}

impl CounterFormat {
    /// The node's data length in this format, in bytes.
    pub fn width(self) -> usize {
        match self {
            CounterFormat::I32 => 4,
            CounterFormat::I64 => 8,
        }
    }

    /// `value` as this format stores it (an `I32` keeps the low 32 bits).
    ///
    /// ```
    /// use zk_recipes::recipe::value::CounterFormat;
    /// assert_eq!(&CounterFormat::I32.encode(258)[..], [0, 0, 1, 2]);
    /// assert_eq!(&CounterFormat::I64.encode(-2)[..], [0xff; 7].iter().chain(&[0xfe]).copied().collect::<Vec<_>>());
    /// ```
    pub fn encode(self, value: i64) -> Bytes {
        match self {
            CounterFormat::I32 => Bytes::copy_from_slice(&(value as i32).to_be_bytes()),
            CounterFormat::I64 => Bytes::copy_from_slice(&value.to_be_bytes()),
        }
    }

    /// `value + delta`; `None` if `delta` or the sum does not fit this format's width.
    fn add(self, value: i64, delta: i64) -> Option<i64> {
        match self {
            CounterFormat::I32 => {
                let d = i32::try_from(delta).ok()?;
                (value as i32).checked_add(d).map(i64::from)
            }
            CounterFormat::I64 => value.checked_add(delta),
        }
    }
}

/// The counter value stored in `data` (empty data counts as 0); [`Error::BadCounter`]
/// for any other length than the format's.
///
/// ```
/// use zk_recipes::recipe::value::{counter_value, CounterFormat};
/// assert_eq!(counter_value(&[0, 0, 0, 42], CounterFormat::I32), Ok(42));
/// assert_eq!(counter_value(&[0xff; 8], CounterFormat::I64), Ok(-1));
/// assert_eq!(counter_value(&[], CounterFormat::I64), Ok(0));
/// assert!(counter_value(&[1, 2, 3], CounterFormat::I32).is_err());
/// ```
pub fn counter_value(data: &[u8], format: CounterFormat) -> Result<i64, Error> {
    let bad = || Error::BadCounter {
        expected: format.width(),
        found: data.len(),
    };
    if data.is_empty() {
        return Ok(0);
    }
    match format {
        CounterFormat::I32 => <[u8; 4]>::try_from(data)
            .map(|b| i64::from(i32::from_be_bytes(b)))
            .map_err(|_| bad()),
        CounterFormat::I64 => <[u8; 8]>::try_from(data)
            .map(i64::from_be_bytes)
            .map_err(|_| bad()),
    }
}

/// What a [`Counter`] reports: one of `Added`, `Value` or `Failed` per operation, in the
/// order the operations were asked; `Closed` is final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterEvent {
    /// An [`add`](Counter::add) is applied, exactly once.
    Added {
        /// The value it was applied to.
        before: i64,
        /// The value written.
        after: i64,
        /// The node's Stat after the write.
        stat: Stat,
    },
    /// A [`get`](Counter::get): the value (0 for a missing node).
    Value {
        /// The value.
        value: i64,
        /// The node's Stat (`None`: missing).
        stat: Option<Stat>,
    },
    /// The operation failed; the counter goes on with the next one. For an `add`,
    /// `error.may_have_applied()` says whether it may be in the node all the same.
    Failed {
        /// The cause ([`Error::BadCounter`] for malformed data,
        /// [`Error::CounterOverflow`] for an add out of the format's range: nothing
        /// written).
        error: Error,
    },
    /// Ended by [`close`](Counter::close), abandonment or a closed session. Final.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CounterOp {
    Add(i64),
    Get,
}

/// A shared counter; see the [module docs](super).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Counter {
    format: CounterFormat,
    update: Update,
    ops: VecDeque<CounterOp>,
    current: Option<CounterOp>,
    /// The add in flight: (before, after).
    plan: Option<(i64, i64)>,
    /// The get's answer, or why the operation ends with `Keep`.
    outcome: Option<Result<(i64, Option<Stat>), Error>>,
    started: bool,
    closed: bool,
    events: Events<CounterEvent>,
}

impl Counter {
    /// A counter in node `path`, stored in `format`.
    pub fn new(path: &str, format: CounterFormat) -> Self {
        Self::with_config(UpdateConfig::new(path), format)
    }

    /// A counter with the update options of `config` (`sync_first`, `acl`;
    /// `create_if_missing` is forced on and `confirm_by_data` off).
    pub fn with_config(mut config: UpdateConfig, format: CounterFormat) -> Self {
        config.create_if_missing = true;
        config.confirm_by_data = false;
        Counter {
            format,
            update: Update::new(config),
            ops: VecDeque::new(),
            current: None,
            plan: None,
            outcome: None,
            started: false,
            closed: false,
            events: Events::default(),
        }
    }

    /// The format.
    pub fn format(&self) -> CounterFormat {
        self.format
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.update.config().path
    }

    /// Operations asked and not answered yet.
    pub fn pending(&self) -> usize {
        self.ops.len() + usize::from(self.current.is_some())
    }

    /// Adds `delta` (negative subtracts): [`CounterEvent::Added`] or `Failed`. Ignored
    /// once the counter has ended.
    pub fn add(&mut self, now: Instant, delta: i64) {
        self.ask(now, CounterOp::Add(delta));
    }

    /// Reads the value: [`CounterEvent::Value`] or `Failed`. Ignored once the counter
    /// has ended.
    pub fn get(&mut self, now: Instant) {
        self.ask(now, CounterOp::Get);
    }

    /// Ends: operations not answered yet fail with `Closed`, then
    /// [`CounterEvent::Closed`]. (A write on the wire may still be applied: its add
    /// fails with a `may_have_applied` error.)
    pub fn close(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.closed = true; // no next operation starts
        self.update.handle_abandon(now);
        self.pump(now);
        for _ in self.ops.drain(..) {
            self.events.emit(CounterEvent::Failed {
                error: Error::Closed,
            });
        }
        self.events.emit(CounterEvent::Closed);
    }

    fn ask(&mut self, now: Instant, op: CounterOp) {
        if self.closed {
            return; // ended: nothing follows `Closed`
        }
        self.ops.push_back(op);
        self.pump(now);
    }

    /// Starts the next operation when none runs; turns the update's events into ours.
    fn pump(&mut self, now: Instant) {
        loop {
            self.start_next(now);
            let Some(e) = self.update.poll_event() else {
                return;
            };
            let Some(op) = self.current else {
                continue; // an update's end with no operation (closed while idle)
            };
            match e {
                UpdateEvent::Current { data, stat } => self.on_current(now, op, data, stat),
                UpdateEvent::Updated { stat } => {
                    self.current = None;
                    if let Some((before, after)) = self.plan.take() {
                        self.events.emit(CounterEvent::Added {
                            before,
                            after,
                            stat,
                        });
                    }
                }
                UpdateEvent::Kept => {
                    self.current = None;
                    let e = match self.outcome.take() {
                        Some(Ok((value, stat))) => CounterEvent::Value { value, stat },
                        Some(Err(error)) => CounterEvent::Failed { error },
                        None => CounterEvent::Failed {
                            error: Error::UnexpectedReply,
                        },
                    };
                    self.events.emit(e);
                }
                UpdateEvent::Failed { error } => {
                    self.current = None;
                    self.events.emit(CounterEvent::Failed { error });
                }
            }
        }
    }

    /// Starts the next operation asked, if none runs (an add whose delta does not fit
    /// the format fails at once).
    fn start_next(&mut self, now: Instant) {
        while self.current.is_none() && !self.closed {
            match self.ops.pop_front() {
                Some(CounterOp::Add(delta)) if self.format.add(0, delta).is_none() => {
                    self.events.emit(CounterEvent::Failed {
                        error: Error::Server(ErrorCode::BadArguments),
                    });
                }
                Some(op) => {
                    self.current = Some(op);
                    self.plan = None;
                    self.outcome = None;
                    if self.started {
                        let add = matches!(op, CounterOp::Add(_));
                        self.update.begin(now, add);
                    } else {
                        self.started = true;
                        self.update.start(now);
                    }
                }
                None => return,
            }
        }
    }

    /// The update's `Current` for operation `op`: propose the add's result, or keep
    /// (a get, a malformed value, an add out of range).
    fn on_current(&mut self, now: Instant, op: CounterOp, data: Option<Bytes>, stat: Option<Stat>) {
        let value = counter_value(data.as_deref().unwrap_or(&[]), self.format);
        match (op, value) {
            (CounterOp::Add(delta), Ok(before)) => match self.format.add(before, delta) {
                Some(after) => {
                    self.plan = Some((before, after));
                    let data = self.format.encode(after);
                    self.update.propose(now, Proposal::Set(data));
                }
                None => {
                    self.outcome = Some(Err(Error::CounterOverflow {
                        value: before,
                        delta,
                        width: self.format.width(),
                    }));
                    self.update.propose(now, Proposal::Keep);
                }
            },
            (CounterOp::Get, Ok(v)) => {
                self.outcome = Some(Ok((v, stat)));
                self.update.propose(now, Proposal::Keep);
            }
            (_, Err(e)) => {
                self.outcome = Some(Err(e));
                self.update.propose(now, Proposal::Keep);
            }
        }
    }
}

/// Its one part: the update.
impl Parts for Counter {
    type Part = Update;

    one_part!(update);
}

impl Machine for Counter {
    forward_parts!(pump; handle_reply, handle_timeout, poll_request, poll_timeout);

    fn handle_watch(&mut self, _now: Instant, _op: OpId, _event: &WatchEvent) {}

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        if change == SessionChange::Closed {
            // The update in flight ends as abandoned (ConnectionLoss if in doubt).
            return self.close(now);
        }
        to_parts::session(self, now, change);
        self.pump(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn is_done(&self) -> bool {
        self.closed && self.events.is_empty()
    }
}

recipe_events!(Counter => CounterEvent, events.poll);
