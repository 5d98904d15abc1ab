//! Each recipe call runs in a DEBUG span naming the recipe and its path, so a
//! `tracing` subscriber shows what the client does for which call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use zk_recipes_surface::blocking::{rt, Client, Command, Driver, Ended, Status};
use zk_recipes_surface::Options;

/// A driver that has ended: every call fails at once (the span is made first).
struct Ended_;

impl Driver for Ended_ {
    fn send(&self, _: Command) -> Result<(), Ended> {
        Err(Ended)
    }
}

/// Records every span as `name field=value ...`.
#[derive(Clone, Default)]
struct Spans {
    seen: Arc<Mutex<Vec<String>>>,
    next: Arc<AtomicU64>,
}

struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut line = span.metadata().name().to_string();
        span.record(&mut Line(&mut line));
        self.seen.lock().unwrap().push(line);
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_recipe_call_has_a_span_naming_the_recipe_and_its_path() {
    let (board_tx, board) = rt::board();
    board_tx.publish(|p| {
        p.status = Status::Suspended;
        p.session_id = 1;
    });
    let client = Client::connected(Box::new(Ended_), board, &Options::default()).unwrap();
    let spans = Spans::default();
    tracing::subscriber::with_default(spans.clone(), || {
        assert!(client.lock("/locks/a").acquire().is_err());
        assert!(client
            .queue("/jobs")
            .take_timeout(std::time::Duration::ZERO)
            .is_err());
    });
    let seen = spans.seen.lock().unwrap().clone();
    assert!(
        seen.contains(&r#"acquire recipe="lock" path=/locks/a"#.to_string()),
        "{seen:?}"
    );
    assert!(
        seen.contains(&r#"take_timeout recipe="queue" path=/jobs"#.to_string()),
        "{seen:?}"
    );
}
