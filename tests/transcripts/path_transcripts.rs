//! Transcript tests for `recipe::path`: scripted replies in, requests and results out.

use zk_recipes::client::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::path::DeleteAll;
use zk_recipes::recipe::{Machine, Recipe, SessionChange};
use zk_recipes::time::Instant;

const T: Instant = Instant::ZERO;

fn run(refuse_first: bool) -> Vec<Result<(), Error>> {
    let mut d = DeleteAll::new("/never/there");
    d.handle_session(T, SessionChange::Connected { session_id: 7 });
    d.start(T);
    let (op, r) = d.poll_request().unwrap();
    assert_eq!(r.op_code(), OpCode::GetChildren);
    let mut now = T;
    if refuse_first {
        // The session refuses the listing (too many pending): never applied.
        d.handle_reply(now, op, Err(Error::Overloaded));
        now = d.poll_timeout().expect("backoff");
        d.handle_timeout(now);
        let (op, r) = d.poll_request().expect("listed again");
        assert_eq!(r.op_code(), OpCode::GetChildren);
        d.handle_reply(now, op, Err(Error::Server(ErrorCode::NoNode)));
    } else {
        d.handle_reply(now, op, Err(Error::Server(ErrorCode::NoNode)));
    }
    std::iter::from_fn(|| d.poll_event()).collect()
}

/// `DeleteAll` documents `Err(Server(NoNode))` "if the node did not exist at the
/// start": a refused first listing (never applied) does not turn that into `Ok(())`.
#[test]
fn a_refused_first_listing_does_not_turn_no_node_into_success() {
    assert_eq!(run(false), [Err(Error::Server(ErrorCode::NoNode))]);
    assert_eq!(
        run(true),
        [Err(Error::Server(ErrorCode::NoNode))],
        "refusal reported as success"
    );
}
