//! The lifecycle every recipe that keeps a watched view shares, written once: the
//! group [`View`](super::group::View), the [`TreeCache`](super::cache::TreeCache) and
//! the [`ConfigReader`](super::config::ConfigReader). Its [`Link`] (the session, and
//! whether a retry waits for the backoff) serves the one-shot recipes too: the
//! [`ConfigWriter`](super::config::ConfigWriter), the value
//! [`Update`](super::value::Update), naming's [`Resolve`](super::naming::Resolve)
//! and [`IdGenerator`](super::naming::IdGenerator), the
//! [`OwnedNode`](super::node::OwnedNode) and the rendezvous
//! [`Master`](super::rendezvous::Master).
//!
//! | state | what it holds |
//! | --- | --- |
//! | [`Life`] | `Idle` (not started), `Running`, `Done` (ended: final event reported) |
//! | [`Link`] | `Down` (no session yet, or it expired), `Up`, `BackingOff` (a retry waits for the kit's backoff: the recipe's deadline) |
//! | `suspended` | `Suspended` was reported and the matching "back" event (`Reconnected`, `Resynced`, ...) not yet |
//!
//! A watcher's life: [`start`](Watcher::start) once; every `drive` passes
//! [`gate`](Watcher::gate) before sending (running, a session up, the retry allows);
//! a session change goes through [`session`](Watcher::session), which says what the
//! recipe must do ([`Back`]: re-read and re-arm its watches after a reconnect or a new
//! session; forget its requests and watches after an expiry; end when closed).

use super::kit::Kit;
use super::SessionChange;
use crate::time::Instant;

/// Where a watcher stands in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum Life {
    /// Not started.
    #[default]
    Idle,
    /// Following.
    Running,
    /// Ended (its final event reported).
    Done,
}

/// The session as a recipe that sends requests sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum Link {
    /// No session yet, or it expired: nothing can be sent.
    #[default]
    Down,
    /// A session is up.
    Up,
    /// A session is up and a retry waits for the kit's backoff (the recipe's deadline).
    BackingOff,
}

impl Link {
    /// A session is (again) up.
    pub fn up(&mut self) {
        if *self == Link::Down {
            *self = Link::Up;
        }
    }

    /// The session expired: nothing in flight, nothing to wait for.
    pub fn down(&mut self) {
        *self = Link::Down;
    }

    /// Nothing waits for the backoff any more (the recipe ended); the session stays.
    pub fn rest(&mut self) {
        if *self == Link::BackingOff {
            *self = Link::Up;
        }
    }

    /// May the recipe send at `now`? Notes a backoff to wait for (not a suspension:
    /// the reconnect drives the recipe again).
    pub fn gate<P, E>(&mut self, kit: &Kit<P, E>, now: Instant) -> bool {
        if *self == Link::Down {
            return false;
        }
        if !kit.allows(now) {
            *self = if kit.is_suspended() {
                Link::Up
            } else {
                Link::BackingOff
            };
            return false;
        }
        *self = Link::Up;
        true
    }

    /// The end of the backoff a retry waits for, if one does.
    pub fn deadline<P, E>(&self, kit: &Kit<P, E>) -> Option<Instant> {
        if *self == Link::BackingOff {
            kit.retry_at()
        } else {
            None
        }
    }

    /// Is a session up?
    pub fn is_up(&self) -> bool {
        *self != Link::Down
    }
}

/// The [`Protocol`](super::kit::Protocol) methods of a recipe whose only deadline is its
/// [`Link`]'s backoff, written once, for a recipe with fields `link` and `kit` that has
/// ended once `self.$field == $ended`; use it inside its `impl Protocol`:
///
/// * a timeout drives (`drive(now)`); `abandon => close` also writes an `on_abandon`
///   that is `self.close(now)` (the method named), as [`timeout_drives!`] does;
/// * the deadline is the end of the backoff the link waits for, none once ended;
/// * it is finished once ended with its events polled.
///
/// [`timeout_drives!`]: super::kit::timeout_drives
macro_rules! link_protocol {
    ($field:ident == $ended:path $(, abandon => $abandon:ident)?) => {
        $crate::recipe::kit::timeout_drives!($(abandon => $abandon)?);

        fn deadline(&self) -> Option<$crate::time::Instant> {
            if self.$field == $ended {
                None
            } else {
                self.link.deadline(&self.kit)
            }
        }

        fn finished(&self) -> bool {
            self.$field == $ended && self.kit.no_events()
        }
    };
}
pub(crate) use link_protocol;

/// The [`Protocol`](super::kit::Protocol) methods every watcher writes the same way,
/// written once, for a recipe with fields `watcher` and `kit` whose events `$event` have
/// the variant `Failed(Error)`; use it inside its `impl Protocol`:
///
/// * a notification of an ended watcher is dropped; any other goes to the recipe's
///   `on_notice(op, event) -> bool` (true: it was one of ours, drive);
/// * a session change goes through [`Watcher::session`], and what it asks ([`Back`])
///   to the recipe: `Resync { new }` to `on_resync(new)` (sync, read again, re-arm),
///   `Suspend` to `on_suspend()` (report it), `Expire` clears the kit's requests and
///   calls `forget()` (the watches and reads of the session), then `on_suspend()` if
///   it is to be reported, and `Close` ends with `Failed(Closed)` (`finish(event)`);
///   then it drives;
/// * a timeout drives (`drive(now)`), an abandon closes (`close(now)`), the deadline
///   is the watcher's backoff, and it is finished once ended with its events polled.
macro_rules! watcher_protocol {
    ($event:ident) => {
        fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
            if !self.watcher.is_done() && self.on_notice(op, event) {
                self.drive(now);
            }
        }

        fn on_session(&mut self, now: Instant, change: SessionChange) {
            use $crate::recipe::watcher::Back;
            match self.watcher.session(change) {
                Back::Nothing => {}
                Back::Resync { new } => self.on_resync(new),
                Back::Suspend => self.on_suspend(),
                Back::Expire { report } => {
                    self.kit.clear_requests();
                    self.forget();
                    if report {
                        self.on_suspend();
                    }
                }
                Back::Close => self.finish($event::Failed($crate::error::Error::Closed)),
            }
            self.drive(now);
        }

        fn on_timeout(&mut self, now: Instant) {
            self.drive(now);
        }

        fn on_abandon(&mut self, now: Instant) {
            self.close(now);
        }

        fn deadline(&self) -> Option<Instant> {
            self.watcher.deadline(&self.kit)
        }

        fn finished(&self) -> bool {
            self.watcher.is_done() && self.kit.no_events()
        }
    };
}
pub(crate) use watcher_protocol;

/// The public `start` and `close` of a watcher, written once, for a recipe with the
/// field `watcher` and the methods `valid()` (its paths: `Err` ends it with
/// `Failed`), `drive(now)` and `finish(event)` (ends with the final event); `$what`
/// says what it starts doing (for the docs), `$begin()` asks for its first reads. Use
/// it inside the recipe's `impl`.
macro_rules! watcher_calls {
    ($event:ident, $what:literal; $begin:ident) => {
        #[doc = concat!("Starts ", $what, " (once).")]
        pub fn start(&mut self, now: Instant) {
            if self.watcher.has_started() {
                return;
            }
            if let Err(e) = self.valid() {
                return self.finish($event::Failed(e));
            }
            self.watcher.start();
            self.$begin();
            self.drive(now);
        }

        #[doc = concat!("Stops; [`", stringify!($event), "::Closed`].")]
        pub fn close(&mut self, _now: Instant) {
            if !self.watcher.is_done() {
                self.finish($event::Closed);
            }
        }
    };
}
pub(crate) use watcher_calls;

/// What a watcher has still to do, typed: a small set of a recipe's own bits
/// (`Need::bit`), each a request to send or a report owed once its reads are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Need(u8);

impl Need {
    /// The bit `n` (0..8): a recipe names its own as constants.
    pub const fn bit(n: u8) -> Need {
        Need(1 << n)
    }

    /// Adds `n`.
    pub fn add(&mut self, n: Need) {
        self.0 |= n.0;
    }

    /// Is `n` there?
    pub fn has(self, n: Need) -> bool {
        self.0 & n.0 != 0
    }

    /// Removes `n`: true if it was there.
    pub fn take(&mut self, n: Need) -> bool {
        let had = self.has(n);
        self.0 &= !n.0;
        had
    }
}

/// What a session change asks of a watcher ([`Watcher::session`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Back {
    /// Nothing (not running, or a `Suspended` already reported).
    Nothing,
    /// A session is back (`new`: a new session after an expiry or the first one): sync,
    /// read again, re-arm what is not armed.
    Resync { new: bool },
    /// The session is suspended: report it (once).
    Suspend,
    /// The session expired: forget every request and watch; `report`: report
    /// `Suspended` (once).
    Expire { report: bool },
    /// The session was closed: end with `Failed(Closed)`.
    Close,
}

/// The shared lifecycle of a recipe that keeps a watched view; see the
/// [module docs](self).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Watcher {
    life: Life,
    link: Link,
    suspended: bool,
}

impl Watcher {
    /// Starts (once): true if it was idle.
    pub fn start(&mut self) -> bool {
        if self.life != Life::Idle {
            return false;
        }
        self.life = Life::Running;
        true
    }

    /// Ends (the recipe reports its final event).
    pub fn end(&mut self) {
        self.life = Life::Done;
    }

    /// Started and not ended.
    pub fn is_running(&self) -> bool {
        self.life == Life::Running
    }

    /// Started (ended or not).
    pub fn has_started(&self) -> bool {
        self.life != Life::Idle
    }

    /// Ended.
    pub fn is_done(&self) -> bool {
        self.life == Life::Done
    }

    /// A session is up.
    pub fn is_live(&self) -> bool {
        self.link.is_up()
    }

    /// `Suspended` reported, its "back" event not yet.
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// Running, a session up and the retry allows sending at `now` (see
    /// [`Link::gate`]).
    pub fn gate<P, E>(&mut self, kit: &Kit<P, E>, now: Instant) -> bool {
        self.is_running() && self.link.gate(kit, now)
    }

    /// The recipe's deadline: the end of the backoff a retry waits for.
    pub fn deadline<P, E>(&self, kit: &Kit<P, E>) -> Option<Instant> {
        if self.is_running() {
            self.link.deadline(kit)
        } else {
            None
        }
    }

    /// Marks `Suspended` reported: true if it is to be reported now (running, not
    /// reported since the last "back").
    pub fn suspend(&mut self) -> bool {
        if self.is_running() && !self.suspended {
            self.suspended = true;
            return true;
        }
        false
    }

    /// The "back" event is reported: true if `Suspended` was.
    pub fn resume(&mut self) -> bool {
        core::mem::take(&mut self.suspended)
    }

    /// Follows a session change (after the kit did): what the recipe must do.
    pub fn session(&mut self, change: SessionChange) -> Back {
        if self.is_done() {
            return Back::Nothing;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                self.link.up();
                if !self.is_running() {
                    return Back::Nothing;
                }
                Back::Resync {
                    new: matches!(change, SessionChange::Connected { .. }),
                }
            }
            SessionChange::Suspended => {
                if self.suspend() {
                    Back::Suspend
                } else {
                    Back::Nothing
                }
            }
            SessionChange::Expired => {
                self.link.down();
                Back::Expire {
                    report: self.suspend(),
                }
            }
            SessionChange::Closed => Back::Close,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_resyncs_only_while_running_and_reports_suspended_once() {
        let mut w = Watcher::default();
        let up = SessionChange::Connected { session_id: 1 };
        assert_eq!(w.session(up), Back::Nothing);
        assert!(w.is_live() && w.start() && !w.start());
        assert_eq!(w.session(up), Back::Resync { new: true });
        assert_eq!(w.session(SessionChange::Suspended), Back::Suspend);
        assert_eq!(w.session(SessionChange::Suspended), Back::Nothing);
        assert_eq!(
            w.session(SessionChange::Expired),
            Back::Expire { report: false }
        );
        assert!(!w.is_live() && w.resume() && !w.resume());
        w.end();
        assert_eq!(w.session(SessionChange::Closed), Back::Nothing);
        assert!(w.is_done() && w.has_started() && !w.is_running());
    }
}
