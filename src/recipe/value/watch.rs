//! [`CounterWatch`]: a counter's every value (see the [module docs](super)).

use super::counter::{counter_value, CounterFormat};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::Events;
use crate::recipe::node::{NodeWatch, NodeWatchEvent};
use crate::recipe::{Machine, Recipe};
use crate::time::Instant;

/// What a [`CounterWatch`] reports. `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterWatchEvent {
    /// The counter's value: the first one read, then one per new version of the node
    /// (a write of the same value is a new version and is reported too). A missing node
    /// counts as 0, as for [`Counter::get`](super::Counter::get) (`stat` is `None`).
    Value {
        /// The value.
        value: i64,
        /// The node's Stat (`None`: missing).
        stat: Option<Stat>,
    },
    /// The node holds data of the wrong length for the format
    /// ([`Error::BadCounter`]). Not final: the watch goes on, and the next valid version
    /// is reported as `Value`.
    Malformed {
        /// [`Error::BadCounter`] with the lengths.
        error: Error,
        /// The node's Stat.
        stat: Stat,
    },
    /// The connection dropped (or the session expired): the value may be stale.
    Suspended,
    /// The session is back; the node is read again (a change missed meanwhile is
    /// reported as `Value`).
    Reconnected,
    /// Ended: the node cannot be read (`NoAuth`, an invalid path) or the session was
    /// closed. Final.
    Failed(Error),
    /// Ended by [`close`](CounterWatch::close). Final.
    Closed,
}

impl CounterWatchEvent {
    /// What a "next change" call answers for this event, the same in every adapter:
    /// `Ok(value)` for a [`Value`](Self::Value), `Err(BadCounter)` for a
    /// [`Malformed`](Self::Malformed) node (the watch goes on), the final error for
    /// [`Failed`](Self::Failed), `Err(Finished)` for [`Closed`](Self::Closed); `None`
    /// for `Suspended` / `Reconnected` (no change to report: keep waiting).
    pub fn change(&self) -> Option<Result<i64, Error>> {
        match self {
            CounterWatchEvent::Value { value, .. } => Some(Ok(*value)),
            CounterWatchEvent::Malformed { error, .. } | CounterWatchEvent::Failed(error) => {
                Some(Err(error.clone()))
            }
            CounterWatchEvent::Closed => Some(Err(Error::Finished)),
            CounterWatchEvent::Suspended | CounterWatchEvent::Reconnected => None,
        }
    }

    /// Does this event end the watch?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            CounterWatchEvent::Failed(_) | CounterWatchEvent::Closed
        )
    }
}

/// Follows a shared counter's value: a [`NodeWatch`](NodeWatch) on its node
/// whose data is decoded in `format` (the rules of [`counter_value`]: empty data and a
/// missing node count as 0, any other wrong length is
/// [`Malformed`](CounterWatchEvent::Malformed)). Every version the server reports is
/// reported; a deleted and re-created node is followed; after a reconnect the node is
/// read again after a `sync` (nothing missed, nothing reported twice).
///
/// ```
/// use zk_recipes::recipe::value::{CounterFormat, CounterWatch, CounterWatchEvent};
/// use zk_recipes::recipe::{Machine, Recipe, SessionChange};
/// use zk_recipes::proto::{Response, Stat};
/// use zk_recipes::time::Instant;
/// let t = Instant::ZERO;
/// let mut w = CounterWatch::new("/hits", CounterFormat::I32);
/// w.handle_session(t, SessionChange::Connected { session_id: 1 });
/// w.start(t);
/// let (read, _) = w.poll_request().unwrap(); // getData /hits, watch
/// let data = CounterFormat::I32.encode(7);
/// w.handle_reply(t, read, Ok(Response::Data { data, stat: Stat::default() }));
/// assert_eq!(w.poll_event().and_then(|e| e.change()), Some(Ok(7)));
/// assert_eq!(w.value(), Some(Ok(7)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CounterWatch {
    format: CounterFormat,
    watch: NodeWatch,
    events: Events<CounterWatchEvent>,
    /// The last value reported (`None`: nothing read yet).
    last: Option<Result<i64, Error>>,
}

impl CounterWatch {
    /// Follows the counter in node `path`, stored in `format`, once
    /// [`start`](Self::start)ed.
    pub fn new(path: &str, format: CounterFormat) -> Self {
        CounterWatch {
            format,
            watch: NodeWatch::new(path),
            events: Events::default(),
            last: None,
        }
    }

    /// The format.
    pub fn format(&self) -> CounterFormat {
        self.format
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.watch.path()
    }

    /// The value as last reported: `None` before the first read, `Err(BadCounter)`
    /// while the node is malformed.
    pub fn value(&self) -> Option<Result<i64, Error>> {
        self.last.clone()
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.watch.has_ended()
    }

    crate::recipe::kit::part_calls!(
        watch, pump;
        /// Starts following (once).
        start,
        /// `sync`, then read again (see [`NodeWatch::refresh`](NodeWatch::refresh)).
        refresh,
        /// Stops following; [`CounterWatchEvent::Closed`].
        close,
    );

    fn pump(&mut self) {
        use NodeWatchEvent as N;
        while let Some(e) = self.watch.poll_event() {
            let e = match e {
                N::Data { data, stat } => match counter_value(&data, self.format) {
                    Ok(value) => CounterWatchEvent::Value {
                        value,
                        stat: Some(stat),
                    },
                    Err(error) => CounterWatchEvent::Malformed { error, stat },
                },
                N::Missing { .. } => CounterWatchEvent::Value {
                    value: 0,
                    stat: None,
                },
                N::Suspended => CounterWatchEvent::Suspended,
                N::Reconnected => CounterWatchEvent::Reconnected,
                N::Failed(error) => CounterWatchEvent::Failed(error),
                N::Closed => CounterWatchEvent::Closed,
            };
            if let Some(v) = e.change().filter(|_| !e.is_final()) {
                self.last = Some(v);
            }
            self.events.emit(e);
        }
    }
}

impl Machine for CounterWatch {
    crate::recipe::kit::follow_part!(watch, pump);

    fn handle_abandon(&mut self, now: Instant) {
        self.watch.handle_abandon(now);
        self.pump();
    }
}

crate::recipe::kit::recipe_events!(CounterWatch => CounterWatchEvent, events.poll);
