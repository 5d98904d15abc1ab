//! Transcript tests for `recipe::delay_queue` (the queue's machines in
//! `Format::Delay`): scripted replies in, exact requests and events out, in the queue's
//! `short` form (`M` for the meta directory, `Q` for the queue; see `queue_script.rs`).

use crate::queue_script;
use queue_script::*;
use std::time::Duration;
use zk_recipes::recipe::delay_queue::{frame, Clock};

/// 3,000 and 2,000 ms after the Unix epoch, as Curator names them.
const AT_3000: &str = "queue-|00000BB8|0000000001";
const AT_2000: &str = "queue-|000007D0|0000000002";

fn delay_consumer() -> Script<Consumer> {
    let mut c = ConsumerConfig::new(DIR, "c1");
    c.format = Format::Delay;
    c.spread = 0;
    let mut s = script(Consumer::new(c));
    // At the script's start the wall clock reads 1,000 ms.
    s.r.set_clock(T, 1_000);
    s
}

fn framed(payload: &str) -> MultiResult {
    MultiResult::GetData {
        data: frame(payload.as_bytes()),
        stat: Stat::default(),
    }
}

#[test]
fn delay_puts_are_named_by_their_time_and_framed_as_curator_frames_them() {
    let mut cfg = ProducerConfig::new(DIR, "p1");
    cfg.format = Format::Delay;
    let mut s = script(Producer::new(cfg));
    s.r.put_at(T, Bytes::from_static(b"a"), 3_000).unwrap();
    let sent = s.sent();
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0]
            .starts_with("multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/queue-|00000BB8| s "),
        "{sent:?}"
    );
    // A put without a time is takeable at once (time 0).
    s.r.put(T, Bytes::from_static(b"b")).unwrap();
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("queue-|00000BB8|0000000000"),
        ]),
    );
    let sent = s.sent();
    assert!(
        sent[0].starts_with("multi[set M/p-p1 '' @1, create Q/queue-|00000000| s "),
        "{sent:?}"
    );
    // A time is refused by a queue of another format, and past Java's `long`.
    assert_eq!(
        s.r.put_at(T, Bytes::new(), u64::MAX),
        Err(Error::Server(ErrorCode::BadArguments))
    );
    let mut fifo = script(Producer::new(ProducerConfig::new(DIR, "p2")));
    assert_eq!(
        fifo.r.put_at(T, Bytes::new(), 5),
        Err(Error::Server(ErrorCode::BadArguments))
    );
}

#[test]
fn a_delay_take_waits_for_the_earliest_time_not_before_then_takes_it() {
    let mut s = delay_consumer();
    let t = s.r.take(T, 1, None);
    assert_eq!(s.sent(), ["list Q"]);
    // Nothing is due at 1,000 ms: as an empty queue, list again with a watch.
    s.reply("list Q", children(&[AT_3000, AT_2000, "foreign"]));
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply("list! Q", children(&[AT_3000, AT_2000]));
    assert!(s.sent().is_empty());
    // One timer, at the earliest item's time (2,000 ms: 1 s from now).
    assert_eq!(s.r.poll_timeout(), Some(T + Duration::from_millis(1_000)));
    s.advance(Duration::from_millis(999));
    assert!(
        s.sent().is_empty() && s.events().is_empty(),
        "not before its time"
    );
    s.advance(Duration::from_millis(1));
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply("list! Q", children(&[AT_3000, AT_2000]));
    // The item due is read and taken as a FIFO item is; the later one stays.
    assert_eq!(s.sent(), [format!("multiRead[get Q/{AT_2000}]")]);
    s.reply("multiRead[", multi(vec![framed("two")]));
    assert_eq!(
        s.sent(),
        [format!(
            "multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/{AT_2000}]"
        )]
    );
    s.reply(
        "multi[",
        multi(vec![
            MultiResult::Create(format!("{META}/c-c1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            MultiResult::Delete,
        ]),
    );
    // Delivered with Curator's frame taken off.
    assert_eq!(
        s.events(),
        [ConsumerEvent::Taken {
            take: t,
            items: vec![Item {
                name: AT_2000.into(),
                data: Bytes::from_static(b"two")
            }]
        }]
    );
}

#[test]
fn a_new_item_wakes_a_waiting_delay_take_before_its_timer() {
    let mut s = delay_consumer();
    s.r.take(T, 1, None);
    s.reply("list Q", children(&[AT_3000]));
    s.reply("list! Q", children(&[AT_3000]));
    assert_eq!(s.r.poll_timeout(), Some(T + Duration::from_millis(2_000)));
    // A producer puts an item due already (Curator's re-queued `queue-<seq>`: time 0).
    s.fire(EventType::NodeChildrenChanged, DIR);
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply("list! Q", children(&[AT_3000, "queue-0000000004"]));
    assert_eq!(s.sent(), ["multiRead[get Q/queue-0000000004]"]);
}

#[test]
fn the_clock_maps_instants_to_unix_milliseconds_both_ways() {
    let c = Clock {
        at: T + Duration::from_millis(10),
        unix_ms: 5_000,
    };
    assert_eq!(c.unix_ms_at(T + Duration::from_millis(10)), 5_000);
    assert_eq!(c.unix_ms_at(T + Duration::from_micros(12_999)), 5_002);
    assert_eq!(c.unix_ms_at(T), 4_990);
    assert_eq!(c.instant_of(5_003), T + Duration::from_millis(13));
    assert_eq!(c.unix_ms_at(c.instant_of(7_777)), 7_777);
    assert_eq!(c.instant_of(1), c.at, "a past time is due at once");
}
