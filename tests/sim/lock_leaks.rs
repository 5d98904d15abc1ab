//! Issue 9, defect 7: the watch registrations of finished attempts leaked (500
//! timed-out attempts left 500 registrations on the holder's node, re-armed at every
//! reconnect, until `max_watches` refused every watch). A client polling
//! `acquire_timeout` against a long-held lock must end with no registration left.

use std::time::Duration;

use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::time::Instant;
use zk_recipes_sim::sim::{Actor, SimConfig, Simulation};

struct User {
    holder: bool,
    handle: Option<RecipeHandle<Lock>>,
    attempts: u32,
    not_acquired: u32,
}

impl Actor for User {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        for ev in events {
            if let ClientEvent::Recipe { id, event } = ev {
                if self.handle.map(|h| h.id()) == Some(*id) {
                    match event.downcast_ref::<LockEvent>() {
                        Some(LockEvent::NotAcquired) => {
                            self.not_acquired += 1;
                            self.handle = None;
                        }
                        Some(e) if e.ends_attempt() => self.handle = None,
                        _ => {}
                    }
                }
            }
        }
        let wanted = if self.holder { 1 } else { 500 };
        if self.handle.is_none()
            && self.attempts < wanted
            && (self.holder || now.as_micros() > 50_000)
        {
            self.attempts += 1;
            let id = format!("{}-{}", self.holder, self.attempts);
            let h = client.add(
                now,
                Lock::new(LockConfig::new("/held", LockKind::Exclusive, &id)),
            );
            let deadline = (!self.holder).then(|| now + Duration::from_millis(20));
            client.command(now, h, |l, now| l.acquire(now, deadline));
            self.handle = Some(h);
        }
    }
    fn wake_at(&self) -> Option<Instant> {
        (!self.holder && self.handle.is_none() && self.attempts < 500)
            .then(|| Instant::from_micros(60_000))
    }
    fn restart(&mut self) {
        self.handle = None;
    }
}

#[test]
fn timed_out_attempts_leave_no_watch_registration_behind() {
    let mut config = SimConfig::calm(7, 2);
    config.duration = Duration::from_secs(30);
    let mut sim = Simulation::new(config, |i| User {
        holder: i == 0,
        handle: None,
        attempts: 0,
        not_acquired: 0,
    });
    sim.run(|_| Ok(())).unwrap();
    let poller = &sim.actors()[1];
    assert_eq!(poller.attempts, 500);
    assert_eq!(poller.not_acquired, 500, "the holder never lets go");
    let client = sim.client(1);
    assert_eq!(client.recipes(), 0, "every attempt was dropped");
    assert_eq!(
        client.session().watch_count(),
        0,
        "registrations of finished attempts are forgotten"
    );
    // The holder still holds, with its own-node watch.
    assert_eq!(sim.client(0).session().watch_count(), 1);
}
