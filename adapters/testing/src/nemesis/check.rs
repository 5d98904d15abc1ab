//! The checkers: plain Rust over a workload's [`History`].
//!
//! Locks, elections and semaphores (`check_exclusive`, `check_leases`) are judged on
//! wall-clock intervals recorded by the clients on one machine. An *act* runs from the
//! moment its client checked that it holds (`is_held()`, `is_leader()`, Curator's
//! connection state) to the moment it is over; the library's rule is to act only
//! while that check says so, and its timing argument (the client gives the connection
//! up after 2/3 of the session timeout, the server expires the session only after all
//! of it) covers acts shorter than a third of the session timeout. An act that spans a
//! pause of its process, or takes longer than that, is *excused*: its check may be
//! stale, which is what fencing tokens are for (the fenced store then refuses it if a
//! newer holder wrote first). The rest of a hold's acts, split at its excused acts and
//! at its process's pauses, make *segments*; the checks:
//!
//! 1. at no instant do more segments of different holds overlap than the capacity
//!    (1 for a lock or an election, N for a semaphore);
//! 2. (fenced) each hold has its own token; a segment that ends before another begins
//!    has the lower token; the store refuses no act that was not excused;
//! 3. a hold whose process was paused past the session timeout does not act again
//!    after the pause before it has heard `Suspended` or `Lost` (reported before the
//!    act, and heard before the act's check).
//!
//! The counter (`check_counter`): the values of acknowledged increments are unique,
//! ordered as the increments were in real time, and the final value is the
//! acknowledged count plus at most the increments in doubt. The queue
//! (`check_queue`): nothing taken that was not put, each item taken at most once (at
//! most one successful completion with claims), every acknowledged put taken (or
//! completed), and per producer in put order where one consumer takes at most once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use super::history::{Event, History, Micros};

/// What a checker found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Operations checked (acts, increments, puts and takes).
    pub ops: usize,
    /// What went wrong; empty when the history passes.
    pub violations: Vec<String>,
    /// Counts worth reporting (holds, excused acts, stale writes refused, ...).
    pub counts: BTreeMap<String, usize>,
}

impl CheckReport {
    fn count(&mut self, what: &str, n: usize) {
        *self.counts.entry(what.to_string()).or_default() += n;
    }

    fn violation(&mut self, v: String) {
        // A broken run can break the same rule hundreds of times: the first few say it.
        if self.violations.len() < 20 {
            self.violations.push(v);
        } else {
            self.count("violations not listed", 1);
        }
    }

    /// Whether nothing went wrong.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && !self.counts.contains_key("violations not listed")
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ops", self.ops)?;
        for (k, v) in &self.counts {
            write!(f, ", {k} {v}")?;
        }
        for v in &self.violations {
            write!(f, "\n  VIOLATION: {v}")?;
        }
        Ok(())
    }
}

type HoldKey = (usize, String);

#[derive(Default)]
struct Hold {
    token: i64,
    held_at: Micros,
    ended_at: Option<Micros>,
    /// Indexes into `acts`.
    acts: Vec<usize>,
    /// (line index, what, at).
    heard: Vec<(usize, String, Micros)>,
}

struct Act {
    key: HoldKey,
    token: i64,
    line: usize,
    start: Micros,
    end: Option<Micros>,
    accepted: Option<bool>,
    excused: bool,
}

#[derive(Clone)]
struct Segment {
    key: HoldKey,
    token: i64,
    start: Micros,
    end: Micros,
}

/// Slack for the clocks read by different processes around one instant.
const SLACK: Micros = 2_000;

/// A lock or an election: one holder at a time, fenced by tokens (module docs).
pub fn check_exclusive(h: &History, session_timeout: Duration) -> CheckReport {
    check_holds(h, 1, true, session_timeout)
}

/// A semaphore: at most `max` lease holders at a time (module docs; leases have no
/// tokens).
pub fn check_leases(h: &History, max: usize, session_timeout: Duration) -> CheckReport {
    check_holds(h, max, false, session_timeout)
}

fn check_holds(
    h: &History,
    capacity: usize,
    fenced: bool,
    session_timeout: Duration,
) -> CheckReport {
    let mut report = CheckReport::default();
    let t = session_timeout.as_micros() as Micros;
    let mut holds: HashMap<HoldKey, Hold> = HashMap::new();
    let mut acts: Vec<Act> = Vec::new();
    let mut open: HashMap<HoldKey, usize> = HashMap::new();
    for (i, line) in h.lines.iter().enumerate() {
        let key = |tenure: &String| (line.client, tenure.clone());
        match &line.event {
            Event::Held { tenure, token, at } => {
                let hold = holds.entry(key(tenure)).or_default();
                hold.token = *token;
                hold.held_at = *at;
            }
            Event::Heard { tenure, what, at } => {
                holds
                    .entry(key(tenure))
                    .or_default()
                    .heard
                    .push((i, what.clone(), *at));
            }
            Event::Ended { tenure, at, .. } => {
                holds.entry(key(tenure)).or_default().ended_at = Some(*at);
            }
            Event::Act { tenure, token, at } => {
                let k = key(tenure);
                match holds.get(&k) {
                    None => report.violation(format!(
                        "client {} acted for {tenure}, which it never reported held",
                        line.client
                    )),
                    Some(hold) if hold.token != *token => report.violation(format!(
                        "client {} acted for {tenure} with token {token}, held with {}",
                        line.client, hold.token
                    )),
                    _ => {}
                }
                open.insert(k.clone(), acts.len());
                holds.entry(k.clone()).or_default().acts.push(acts.len());
                acts.push(Act {
                    key: k,
                    token: *token,
                    line: i,
                    start: *at,
                    end: None,
                    accepted: None,
                    excused: false,
                });
            }
            Event::Acted { tenure, at } => {
                if let Some(a) = open.remove(&key(tenure)) {
                    acts[a].end = Some(*at);
                }
            }
            _ => {}
        }
    }
    // The store's verdicts, matched to the acts of each hold in order.
    let mut verdicts: HashMap<HoldKey, std::collections::VecDeque<bool>> = HashMap::new();
    for w in &h.store {
        verdicts
            .entry((w.client, w.tenure.clone()))
            .or_default()
            .push_back(w.accepted);
    }
    for a in acts.iter_mut() {
        a.accepted = verdicts.get_mut(&a.key).and_then(|v| v.pop_front());
    }
    let pauses_of = |c: usize| h.pauses.iter().filter(move |p| p.client == c);
    let mut excused_paused = 0;
    let mut excused_slow = 0;
    let mut refused_stale = 0;
    for a in acts.iter_mut() {
        let Some(end) = a.end else {
            report.violation(format!(
                "client {} never finished its act for {} begun at {}",
                a.key.0, a.key.1, a.start
            ));
            continue;
        };
        if pauses_of(a.key.0).any(|p| p.from - SLACK <= end && p.to + SLACK >= a.start) {
            a.excused = true;
            excused_paused += 1;
        } else if end - a.start > t / 3 {
            a.excused = true;
            excused_slow += 1;
        }
        if a.accepted == Some(false) {
            if a.excused {
                refused_stale += 1;
            } else if fenced {
                report.violation(format!(
                    "client {} acted for {} (token {}) at {}: the store refused it, a higher token came first, yet the act was not stale",
                    a.key.0, a.key.1, a.token, a.start
                ));
            }
        }
    }
    report.ops = acts.len();
    report.count("holds", holds.len());
    report.count("acts excused: paused", excused_paused);
    report.count(
        "acts excused: slower than a third of the session",
        excused_slow,
    );
    if fenced {
        report.count("stale writes refused by the fenced store", refused_stale);
    }
    // Segments.
    let mut segments: Vec<Segment> = Vec::new();
    let mut keys: Vec<&HoldKey> = holds.keys().collect();
    keys.sort();
    for key in keys {
        let hold = &holds[key];
        let mut cur: Option<Segment> = None;
        for &ai in &hold.acts {
            let a = &acts[ai];
            let Some(end) = a.end else { continue };
            let paused_between = cur
                .as_ref()
                .is_some_and(|s| pauses_of(key.0).any(|p| p.to >= s.end && p.from <= a.start));
            if a.excused || paused_between {
                segments.extend(cur.take());
            }
            if a.excused {
                continue;
            }
            match &mut cur {
                Some(s) => s.end = end,
                None => {
                    cur = Some(Segment {
                        key: key.clone(),
                        token: a.token,
                        start: a.start,
                        end,
                    })
                }
            }
        }
        segments.extend(cur);
    }
    // 1. Overlaps beyond the capacity.
    let mut bounds: Vec<(Micros, bool, usize)> = Vec::new();
    for (i, s) in segments.iter().enumerate() {
        bounds.push((s.start, true, i));
        bounds.push((s.end, false, i));
    }
    // Ends before starts at the same instant: touching is not overlapping.
    bounds.sort_by_key(|&(at, start, i)| (at, start, i));
    let mut active: Vec<usize> = Vec::new();
    for (_, start, i) in bounds {
        if !start {
            active.retain(|&j| j != i);
            continue;
        }
        active.push(i);
        if active.len() > capacity {
            let who: Vec<String> = active
                .iter()
                .map(|&j| {
                    let s = &segments[j];
                    format!(
                        "client {} hold {} (token {}) acting {}..{}",
                        s.key.0, s.key.1, s.token, s.start, s.end
                    )
                })
                .collect();
            report.violation(format!(
                "{} holders acted at once (at most {capacity}): {}",
                active.len(),
                who.join("; ")
            ));
        }
    }
    // 2. Tokens.
    if fenced {
        let mut by_token: HashMap<i64, &HoldKey> = HashMap::new();
        for (k, hold) in &holds {
            if hold.acts.is_empty() {
                continue;
            }
            if let Some(other) = by_token.insert(hold.token, k) {
                if other != k {
                    report.violation(format!(
                        "holds {other:?} and {k:?} have the same token {}",
                        hold.token
                    ));
                }
            }
        }
        for a in &segments {
            for b in &segments {
                if a.key != b.key && a.end < b.start && a.token >= b.token {
                    report.violation(format!(
                        "token order: client {} hold {} (token {}) acted until {}, then client {} hold {} acted from {} with token {}",
                        a.key.0, a.key.1, a.token, a.end, b.key.0, b.key.1, b.start, b.token
                    ));
                }
            }
        }
    }
    // 3. Holds paused past the session timeout.
    let mut long_paused = 0;
    for p in &h.pauses {
        if p.to - p.from <= t {
            continue;
        }
        for (key, hold) in &holds {
            if key.0 != p.client
                || hold.held_at > p.from
                || hold.ended_at.is_some_and(|e| e < p.from)
            {
                continue;
            }
            long_paused += 1;
            let Some(next) = hold
                .acts
                .iter()
                .map(|&ai| &acts[ai])
                .find(|a| a.start >= p.to)
            else {
                continue;
            };
            let heard = hold.heard.iter().any(|(line, what, at)| {
                *at >= p.from
                    && *at <= next.start
                    && *line < next.line
                    && (what == "suspended" || what == "lost")
            });
            if !heard {
                report.violation(format!(
                    "client {} hold {} (token {}) was paused {:.1} s (past its session timeout) and acted at {} after the pause without hearing Suspended or Lost first",
                    key.0,
                    key.1,
                    hold.token,
                    (p.to - p.from) as f64 / 1e6,
                    next.start
                ));
            }
        }
    }
    report.count("holders paused past the session timeout", long_paused);
    report
}

/// A counter of increments by one, ending at `final_value` (module docs).
pub fn check_counter(h: &History, final_value: i64) -> CheckReport {
    let mut report = CheckReport::default();
    let mut acked: Vec<(Micros, Micros, i64, usize)> = Vec::new();
    let (mut doubt, mut failed) = (0usize, 0usize);
    for line in &h.lines {
        if let Event::Add { from, to, outcome } = &line.event {
            report.ops += 1;
            match outcome {
                Some(Some(v)) => acked.push((*from, *to, *v, line.client)),
                Some(None) => failed += 1,
                None => doubt += 1,
            }
        }
    }
    report.count("increments acknowledged", acked.len());
    report.count("increments in doubt", doubt);
    report.count("increments not applied", failed);
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for &(_, _, v, c) in &acked {
        if let Some(other) = seen.insert(v, c) {
            report.violation(format!(
                "value {v} returned to two increments (clients {other} and {c})"
            ));
        }
        if v < 1 || v > final_value {
            report.violation(format!(
                "client {c} was told {v}, outside 1..={final_value} (the final value)"
            ));
        }
    }
    // Real-time order: an increment that returned before another was called is
    // linearized before it.
    let mut by_end = acked.clone();
    by_end.sort_by_key(|a| a.1);
    let mut by_start = acked.clone();
    by_start.sort_by_key(|a| a.0);
    let mut j = 0;
    let mut max_done: Option<(i64, usize, Micros)> = None;
    for &(from, _, v, c) in &by_start {
        while j < by_end.len() && by_end[j].1 < from {
            if max_done.is_none_or(|(m, _, _)| by_end[j].2 > m) {
                max_done = Some((by_end[j].2, by_end[j].3, by_end[j].1));
            }
            j += 1;
        }
        if let Some((m, mc, at)) = max_done {
            if m >= v {
                report.violation(format!(
                    "client {c} was told {v} for an increment called at {from}, after client {mc}'s increment had returned {m} at {at}"
                ));
            }
        }
    }
    let n = acked.len() as i64;
    if final_value < n || final_value > n + doubt as i64 {
        report.violation(format!(
            "final value {final_value}: {n} increments acknowledged, {doubt} in doubt"
        ));
    }
    report
}

/// A queue's history: producers' `put`s, consumers' `take`s (at most once) or, with
/// `claims`, `claim`s and `complete`s (at least once). `fifo`: one consumer takes at
/// most once, so each producer's acknowledged items come in the order they were put.
/// A take that failed in doubt may have taken one item away unseen (the clients take
/// one at a time): that many acknowledged items may be missing, and are counted.
pub fn check_queue(h: &History, claims: bool, fifo: bool) -> CheckReport {
    let mut report = CheckReport::default();
    // item -> (producer, outcome, index among the producer's acknowledged puts)
    let mut puts: HashMap<&str, (usize, Option<bool>, usize)> = HashMap::new();
    let mut acked_of: HashMap<usize, usize> = HashMap::new();
    let mut taken: HashMap<&str, usize> = HashMap::new();
    let mut completed_ok: HashMap<&str, usize> = HashMap::new();
    let mut completed: HashSet<&str> = HashSet::new();
    let mut order: Vec<&str> = Vec::new();
    let mut take_doubts = 0;
    for line in &h.lines {
        match &line.event {
            Event::Put { item, outcome, .. } => {
                report.ops += 1;
                let n = acked_of.entry(line.client).or_default();
                puts.insert(item, (line.client, *outcome, *n));
                if *outcome == Some(true) {
                    *n += 1;
                }
            }
            Event::Take { item, .. } => {
                report.ops += 1;
                *taken.entry(item).or_default() += 1;
                order.push(item);
            }
            Event::TakeDoubt { .. } => {
                report.ops += 1;
                take_doubts += 1;
            }
            Event::Claim { item, .. } => {
                report.ops += 1;
                *taken.entry(item).or_default() += 1;
            }
            Event::Complete { item, ok, .. } => {
                completed.insert(item);
                if *ok {
                    *completed_ok.entry(item).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    for (item, n) in &taken {
        match puts.get(item) {
            None => report.violation(format!("{item} taken but never put")),
            Some((_, Some(false), _)) => report.violation(format!(
                "{item} taken, yet its put failed with an error that said it did not apply"
            )),
            _ => {}
        }
        if !claims && *n > 1 {
            report.violation(format!("{item} taken {n} times (at most once)"));
        }
    }
    for (item, n) in &completed_ok {
        if *n > 1 {
            report.violation(format!("{item} completed {n} times"));
        }
    }
    if claims {
        let redelivered = taken.values().filter(|&&n| n > 1).count();
        report.count(
            "items claimed again after their claim was lost",
            redelivered,
        );
    } else {
        report.count("takes failed in doubt", take_doubts);
    }
    let mut lost = Vec::new();
    for (item, (_, outcome, _)) in &puts {
        let done = if claims {
            completed.contains(item)
        } else {
            taken.contains_key(item)
        };
        if *outcome == Some(true) && !done {
            lost.push(*item);
        }
    }
    lost.sort();
    if lost.len() > take_doubts {
        report.violation(format!(
            "{} acknowledged items never taken ({take_doubts} takes failed in doubt): {}",
            lost.len(),
            lost.join(" ")
        ));
    } else if !claims {
        report.count("items gone with a take in doubt", lost.len());
    }
    let count = |o: Option<bool>| puts.values().filter(|p| p.1 == o).count();
    report.count("items put and acknowledged", count(Some(true)));
    report.count("items put in doubt", count(None));
    report.count("items put and refused", count(Some(false)));
    if fifo {
        let mut last: HashMap<usize, (usize, &str)> = HashMap::new();
        for item in order {
            let Some(&(producer, Some(true), n)) = puts.get(item) else {
                continue;
            };
            if let Some((m, before)) = last.get(&producer) {
                if *m > n {
                    report.violation(format!(
                        "{item} taken after {before}, put after it by the same producer"
                    ));
                }
            }
            last.insert(producer, (n, item));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::super::history::{Line, Pause, StoreWrite};
    use super::*;

    const T: Duration = Duration::from_secs(5);

    fn line(client: usize, line: &str) -> Line {
        Line {
            client,
            event: Event::parse(&format!("nemesis: {line}")).unwrap().unwrap(),
        }
    }

    fn history(lines: &[(usize, &str)]) -> History {
        History {
            lines: lines.iter().map(|(c, l)| line(*c, l)).collect(),
            ..Default::default()
        }
    }

    /// Accepts every act in the order given (the store's verdicts).
    fn with_store(mut h: History, verdicts: &[(usize, &str, i64, bool)]) -> History {
        h.store = verdicts
            .iter()
            .map(|&(client, tenure, token, accepted)| StoreWrite {
                client,
                tenure: tenure.into(),
                token,
                at: 0,
                accepted,
            })
            .collect();
        h
    }

    fn two_holders(second_starts: i64, second_token: i64) -> History {
        let h = history(&[
            (0, "held a 10 1000"),
            (0, "act a 10 1100"),
            (0, "acted a 1200"),
            (0, "act a 10 1300"),
            (0, "acted a 1400"),
            (0, "ended a released 1500"),
            (1, &format!("held b {second_token} {second_starts}")),
            (1, &format!("act b {second_token} {second_starts}")),
            (1, &format!("acted b {}", second_starts + 100)),
            (1, &format!("ended b released {}", second_starts + 200)),
        ]);
        with_store(
            h,
            &[
                (0, "a", 10, true),
                (0, "a", 10, true),
                (1, "b", second_token, true),
            ],
        )
    }

    #[test]
    fn one_holder_after_another_passes() {
        let r = check_exclusive(&two_holders(1600, 20), T);
        assert!(r.passed(), "{r}");
        assert_eq!(r.ops, 3);
    }

    #[test]
    fn two_holders_acting_at_once_fail() {
        // b acts between a's two acts: a's segment spans both.
        let r = check_exclusive(&two_holders(1250, 20), T);
        assert!(!r.passed());
        assert!(r.violations[0].contains("2 holders acted at once"), "{r}");
        // The same history is fine for a semaphore of two.
        assert!(check_leases(&two_holders(1250, 20), 2, T).passed());
    }

    #[test]
    fn a_later_holder_with_a_lower_or_equal_token_fails() {
        let r = check_exclusive(&two_holders(1600, 9), T);
        assert!(
            r.violations.iter().any(|v| v.contains("token order")),
            "{r}"
        );
        let r = check_exclusive(&two_holders(1600, 10), T);
        assert!(r.violations.iter().any(|v| v.contains("same token")), "{r}");
    }

    #[test]
    fn a_paused_act_is_excused_but_a_fresh_act_after_a_long_pause_needs_suspended_first() {
        // a is paused 6 s in the middle of an act; b holds meanwhile; a's stale write
        // is refused. Then a acts again without hearing anything: a violation.
        let base = [
            (0, "held a 10 1000"),
            (0, "act a 10 1100"),
            (1, "held b 20 6000000"),
            (1, "act b 20 6000100"),
            (1, "acted b 6000200"),
            (0, "acted a 7000100"),
        ];
        let pause = Pause {
            client: 0,
            from: 1200,
            to: 7000000,
        };
        let verdicts = [(0, "a", 10, true), (1, "b", 20, true), (0, "a", 10, false)];
        // Order of the store: a's first write came after the pause.
        let store = [(1, "b", 20, true), (0, "a", 10, false)];
        let mut ok = with_store(history(&base), &store);
        ok.pauses = vec![pause];
        ok.lines.push(line(0, "heard a suspended 7000200"));
        ok.lines.push(line(0, "heard a lost 7000300"));
        ok.lines.push(line(0, "ended a lost 7000300"));
        let r = check_exclusive(&ok, T);
        assert!(r.passed(), "{r}");
        assert_eq!(r.counts["stale writes refused by the fenced store"], 1);
        assert_eq!(r.counts["holders paused past the session timeout"], 1);

        let mut bad = with_store(history(&base), &verdicts[1..]);
        bad.store.push(StoreWrite {
            client: 0,
            tenure: "a".into(),
            token: 10,
            at: 0,
            accepted: false,
        });
        bad.pauses = vec![pause];
        bad.lines.push(line(0, "act a 10 7100000"));
        bad.lines.push(line(0, "acted a 7100100"));
        let r = check_exclusive(&bad, T);
        assert!(
            r.violations
                .iter()
                .any(|v| v.contains("without hearing Suspended or Lost")),
            "{r}"
        );
        // It also acted while b's token was newer: refused, not stale.
        assert!(
            r.violations
                .iter()
                .any(|v| v.contains("yet the act was not stale")),
            "{r}"
        );
    }

    #[test]
    fn a_slow_act_is_excused() {
        // a's act takes 3 s (a starved thread): b acts meanwhile, a is refused.
        let h = with_store(
            history(&[
                (0, "held a 10 0"),
                (0, "act a 10 100"),
                (1, "held b 20 2000000"),
                (1, "act b 20 2000000"),
                (1, "acted b 2000100"),
                (0, "acted a 3000000"),
            ]),
            &[(1, "b", 20, true), (0, "a", 10, false)],
        );
        let r = check_exclusive(&h, T);
        assert!(r.passed(), "{r}");
        assert_eq!(
            r.counts["acts excused: slower than a third of the session"],
            1
        );
    }

    #[test]
    fn the_counter_checks_uniqueness_order_and_the_final_value() {
        let ok = history(&[
            (0, "add 0 10 ok 1"),
            (1, "add 5 20 ok 2"),
            (0, "add 30 40 doubt"),
            (1, "add 35 36 failed"),
        ]);
        assert!(check_counter(&ok, 3).passed()); // the one in doubt applied
        assert!(check_counter(&ok, 2).passed()); // or not
        let r = check_counter(&ok, 4);
        assert!(r.violations[0].contains("final value 4"), "{r}");
        // A value above the final one: the doubtful increment counted twice.
        let over = history(&[
            (0, "add 0 10 ok 1"),
            (0, "add 30 40 doubt"),
            (1, "add 50 60 ok 3"),
        ]);
        assert!(!check_counter(&over, 2).passed());
        let dup = history(&[(0, "add 0 10 ok 1"), (1, "add 5 20 ok 1")]);
        assert!(!check_counter(&dup, 2).passed());
        // Returned 2 before the other was called, which then got 1.
        let order = history(&[(0, "add 0 10 ok 2"), (1, "add 20 30 ok 1")]);
        let r = check_counter(&order, 2);
        assert!(
            r.violations[0].contains("after client 0's increment had returned 2"),
            "{r}"
        );
    }

    #[test]
    fn the_queue_checks_loss_duplicates_and_order() {
        let ok = history(&[
            (0, "put p0-1 0 1 ok"),
            (0, "put p0-2 2 3 ok"),
            (0, "put p0-3 4 5 doubt"),
            (1, "take p0-1 6"),
            (1, "take p0-2 7"),
        ]);
        assert!(check_queue(&ok, false, true).passed());
        let lost = history(&[
            (0, "put p0-1 0 1 ok"),
            (0, "put p0-2 2 3 ok"),
            (1, "take p0-2 7"),
        ]);
        assert!(check_queue(&lost, false, false).violations[0].contains("never taken"));
        let twice = history(&[
            (0, "put p0-1 0 1 ok"),
            (1, "take p0-1 6"),
            (2, "take p0-1 7"),
        ]);
        assert!(check_queue(&twice, false, false).violations[0].contains("2 times"));
        let swapped = history(&[
            (0, "put p0-1 0 1 ok"),
            (0, "put p0-2 2 3 ok"),
            (1, "take p0-2 6"),
            (1, "take p0-1 7"),
        ]);
        assert!(check_queue(&swapped, false, true).violations[0].contains("taken after"));
        assert!(check_queue(&swapped, false, false).passed());
        // A take in doubt may account for one missing item, not two.
        let doubt = history(&[
            (0, "put p0-1 0 1 ok"),
            (0, "put p0-2 2 3 ok"),
            (1, "take-doubt 4"),
            (1, "take p0-2 7"),
        ]);
        let r = check_queue(&doubt, false, true);
        assert!(r.passed(), "{r}");
        assert_eq!(r.counts["items gone with a take in doubt"], 1);
        let mut two = doubt.clone();
        two.lines.remove(3);
        assert!(!check_queue(&two, false, false).passed());
        // A put that said it did not apply, taken all the same.
        let refused = history(&[(0, "put p0-1 0 1 failed"), (1, "take p0-1 6")]);
        assert!(check_queue(&refused, false, false).violations[0].contains("did not apply"));
        let ghost = history(&[(1, "take p9-1 6")]);
        assert!(check_queue(&ghost, false, false).violations[0].contains("never put"));
        // Claims: redelivery is allowed, two successful completions are not.
        let claims = history(&[
            (0, "put p0-1 0 1 ok"),
            (1, "claim p0-1 2"),
            (2, "claim p0-1 3"),
            (2, "complete p0-1 4 ok"),
        ]);
        let r = check_queue(&claims, true, false);
        assert!(r.passed(), "{r}");
        assert_eq!(
            r.counts["items claimed again after their claim was lost"],
            1
        );
        let mut twice = claims.clone();
        twice.lines.push(line(1, "complete p0-1 5 ok"));
        assert!(check_queue(&twice, true, false).violations[0].contains("completed 2 times"));
        let unfinished = history(&[(0, "put p0-1 0 1 ok"), (1, "claim p0-1 2")]);
        assert!(!check_queue(&unfinished, true, false).passed());
    }
}
