//! [`Provider`]: picks one instance of a service (Curator's `ServiceProvider`), with a
//! strategy and a down-instance policy (Curator's `DownInstancePolicy`).

use alloc::collections::BTreeMap;
use alloc::string::String;
use core::time::Duration;

use super::instance::ServiceInstance;
use crate::time::Instant;

/// How a [`Provider`] picks among the usable instances (sorted by id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Each in turn (Curator's `RoundRobinStrategy`).
    RoundRobin,
    /// Pseudo-random from a seed the caller gives (xorshift64*; the core has no RNG):
    /// the same seed and the same calls give the same picks (Curator's
    /// `RandomStrategy`).
    Random {
        /// The seed (0 is taken as 1).
        seed: u64,
    },
    /// The same instance as long as it is usable, else the next by round robin
    /// (Curator's `StickyStrategy` over round robin).
    Sticky,
}

/// When an instance reported failing is skipped (Curator's `DownInstancePolicy`):
/// from the `threshold`-th error within `timeout` of the first, until `timeout` after
/// the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DownPolicy {
    /// How long errors are remembered (Curator's default: 30 s).
    pub timeout: Duration,
    /// Errors that make an instance down (Curator's default: 2).
    pub threshold: u32,
}

impl Default for DownPolicy {
    fn default() -> Self {
        DownPolicy {
            timeout: Duration::from_secs(30),
            threshold: 2,
        }
    }
}

/// Picks an instance; see the [module docs](super). Time comes in through
/// [`note_error`](Self::note_error) and [`handle_timeout`](Self::handle_timeout)
/// (at [`poll_timeout`](Self::poll_timeout)), as for every machine.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Provider {
    strategy: Strategy,
    policy: DownPolicy,
    /// Round-robin position.
    turn: usize,
    /// The random state.
    state: u64,
    /// The sticky instance's id.
    sticky: Option<String>,
    /// Per instance id: errors reported and when the first was.
    errors: BTreeMap<String, (u32, Instant)>,
}

impl Provider {
    /// A provider with `strategy` and `policy`.
    pub fn new(strategy: Strategy, policy: DownPolicy) -> Self {
        let state = match strategy {
            Strategy::Random { seed } => seed.max(1),
            _ => 1,
        };
        Provider {
            strategy,
            policy,
            turn: 0,
            state,
            sticky: None,
            errors: BTreeMap::new(),
        }
    }

    /// Is instance `id` skipped now (down)?
    pub fn is_down(&self, id: &str) -> bool {
        self.errors
            .get(id)
            .is_some_and(|(n, _)| *n >= self.policy.threshold)
    }

    /// Instance `id` failed for the caller (Curator's `noteError`).
    pub fn note_error(&mut self, now: Instant, id: &str) {
        self.handle_timeout(now);
        let e = self.errors.entry(id.into()).or_insert((0, now));
        e.0 = e.0.saturating_add(1);
    }

    /// Forgets errors older than the policy's timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        let timeout = self.policy.timeout;
        self.errors.retain(|_, (_, first)| *first + timeout > now);
    }

    /// When the oldest remembered error is forgotten.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.errors
            .values()
            .map(|(_, first)| *first + self.policy.timeout)
            .min()
    }

    fn usable(&self, i: &ServiceInstance) -> bool {
        i.enabled && !self.is_down(&i.id)
    }

    /// Picks one of `instances` that is enabled and not down (`None` if there is none).
    pub fn pick<'a>(&mut self, instances: &'a [ServiceInstance]) -> Option<&'a ServiceInstance> {
        let n = instances.iter().filter(|i| self.usable(i)).count();
        if n == 0 {
            return None;
        }
        if let (Strategy::Sticky, Some(id)) = (self.strategy, &self.sticky) {
            if let Some(i) = instances.iter().find(|i| &i.id == id && self.usable(i)) {
                return Some(i);
            }
        }
        let k = match self.strategy {
            Strategy::Random { .. } => {
                // xorshift64*
                let mut x = self.state;
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                self.state = x;
                (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize % n
            }
            _ => {
                let k = self.turn % n;
                self.turn = self.turn.wrapping_add(1);
                k
            }
        };
        let picked = instances.iter().filter(|i| self.usable(i)).nth(k)?;
        if self.strategy == Strategy::Sticky {
            self.sticky = Some(picked.id.clone());
        }
        Some(picked)
    }
}
