//! Simulated requests per second: 16 real clients (codec → session → client) against
//! the server model, each looping create / getData / delete, no faults.
//! `cargo bench --bench sim`

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zk_recipes::client::{Client, ClientEvent};
use zk_recipes::proto::*;
use zk_recipes::session::{SessionEvent, Token};
use zk_recipes::time::Instant;
use zk_recipes_sim::sim::{Actor, SimConfig, Simulation};

struct Mix {
    path: String,
    step: u64,
    pending: Option<Token>,
}

impl Actor for Mix {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        let answered = events
            .iter()
            .any(|e| matches!(e, ClientEvent::Session(SessionEvent::Reply(r)) if Some(r.token) == self.pending));
        let connected = matches!(
            client.session().state(),
            zk_recipes::session::SessionState::Connected
        );
        if (self.pending.is_none() && connected) || answered {
            let path = self.path.clone();
            let req = match self.step % 3 {
                0 => Request::Create(CreateRequest::new(
                    &path,
                    Bytes::from_static(b"x"),
                    Acl::open_unsafe(),
                    CreateMode::Persistent,
                )),
                1 => Request::GetData(PathWatch { path, watch: false }),
                _ => Request::Delete(DeleteRequest { path, version: -1 }),
            };
            self.step += 1;
            self.pending = client.submit(now, req).ok();
        }
    }
    fn wake_at(&self) -> Option<Instant> {
        None
    }
    fn restart(&mut self) {
        self.pending = None;
    }
}

fn run_once() -> u64 {
    let mut config = SimConfig::calm(7, 16);
    config.duration = core::time::Duration::from_secs(2);
    let mut sim = Simulation::new(config, |id| Mix {
        path: format!("/n{id}"),
        step: 0,
        pending: None,
    });
    sim.run(|_| Ok(())).unwrap();
    sim.server().requests_handled
}

fn bench(c: &mut Criterion) {
    let per_run = run_once();
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(per_run));
    g.sample_size(10);
    g.bench_function(
        format!("16 sessions create/getData/delete ({per_run} requests per run)"),
        |b| b.iter(run_once),
    );
    g.finish();
}

criterion_group!(sim, bench);
criterion_main!(sim);
