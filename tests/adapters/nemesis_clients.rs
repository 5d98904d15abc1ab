// The client processes of the nemesis runs (issue 41), in each form: this binary runs
// itself as a client (`client_process`, with its parameters in the environment: see
// `zk_recipes_testing::nemesis`'s `run` docs) and reports on its standard output. A
// client follows the library's rule: it acts as holder only right after `is_held()` /
// `is_leader()` said so, and reports every change it hears (`Suspended`, `Reconnected`,
// `Lost`) before its next check. An act is: check, work a little, write to the fenced
// store (the runner, over stdin/stdout) with the fencing token, done. A hold lasts up
// to 150 acts (none while suspended), so that faults meet holders.

use std::time::Duration;

use zk::{CounterFormat, LockChange};
use zk_recipes::recipe::election::ElectionEvent;
use zk_recipes_testing::nemesis::{now_micros, Event, Rng};

use crate::nemesis::{report, unexpected, Control, Env};

/// Not a test: the entry point of a client process of the nemesis runs
/// (`tests/adapters/nemesis.rs` starts this binary with `--ignored --exact` on it and
/// the client's parameters in the environment). Without them it does nothing.
#[test]
#[ignore = "the client process of the nemesis runs (tests/adapters/nemesis.rs starts it)"]
fn client_process() {
    let Some(env) = Env::from_env() else {
        return;
    };
    run(client(env));
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How many acts a hold does before it is given up (each 10–110 ms; none while
/// suspended): half the holds are short (handoffs under faults), half last 6–15 s,
/// so that a fault finds a holder with seconds to go (a server cut from the leader
/// serves its clients for 2 s more, a session expires after 5 s).
fn acts(rng: &mut Rng) -> u64 {
    if rng.percent(50) {
        rng.between(3, 20)
    } else {
        rng.between(100, 250)
    }
}

#[form]
async fn client(env: Env) {
    let ctl = Control::start();
    let options = zk::Options::default()
        .session_timeout(env.session)
        .renew_on_expiry(true)
        .connect_timeout(Duration::from_secs(60));
    let zk = match zk::connect(&env.connect, options).await {
        Ok(zk) => zk,
        Err(e) => {
            report(Event::Error(format!("connect: {e}")));
            return;
        }
    };
    report(Event::Ready);
    let mut rng = Rng::new(env.seed);
    match env.role.as_str() {
        "lock" => lock(&zk, &env, &ctl, &mut rng).await,
        "election" => election(&zk, &env, &ctl, &mut rng).await,
        "semaphore" => semaphore(&zk, &env, &ctl, &mut rng).await,
        "counter" => counter(&zk, &env, &ctl, &mut rng).await,
        "producer" => producer(&zk, &env, &ctl, &mut rng).await,
        "consumer" | "claimer" => consumer(&zk, &env, &ctl, &mut rng).await,
        other => report(Event::Error(format!("unknown role {other}"))),
    }
    zk.close().await;
    report(Event::Done { at: now_micros() });
}

/// One act as holder, checked at `checked`: work a little, then the fenced write.
#[form]
async fn act(ctl: &Control, rng: &mut Rng, tenure: &str, token: i64, checked: i64) {
    sleep(ms(rng.between(10, 50))).await;
    ctl.act(tenure, token, checked);
    sleep(ms(rng.between(0, 60))).await;
}

fn heard(tenure: &str, what: &str) {
    report(Event::Heard {
        tenure: tenure.into(),
        what: what.into(),
        at: now_micros(),
    });
}

fn ended(tenure: &str, how: &str) {
    report(Event::Ended {
        tenure: tenure.into(),
        how: how.into(),
        at: now_micros(),
    });
}

#[form]
async fn lock(zk: &zk::Client, env: &Env, ctl: &Control, rng: &mut Rng) {
    let mut n = 0;
    while !ctl.stopped() {
        let wait = ms(rng.between(300, 2500));
        let mut guard = match zk.lock(&env.path).acquire_timeout(wait).await {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(e) => {
                unexpected("acquire", &e);
                sleep(ms(100)).await;
                continue;
            }
        };
        n += 1;
        let tenure = format!("c{}.{n}", env.client);
        let token = guard.fencing_token();
        report(Event::Held {
            tenure: tenure.clone(),
            token,
            at: now_micros(),
        });
        let (mut left, mut lost) = (acts(rng), false);
        while left > 0 && !ctl.stopped() && !lost {
            while let Some(c) = guard.changed_timeout(Duration::ZERO).await {
                match c {
                    LockChange::Suspended => heard(&tenure, "suspended"),
                    LockChange::Reconnected => heard(&tenure, "reconnected"),
                    LockChange::Lost(_) => {
                        heard(&tenure, "lost");
                        lost = true;
                    }
                    LockChange::RevocationRequested => {}
                }
            }
            let checked = now_micros();
            if guard.is_held() {
                act(ctl, rng, &tenure, token, checked).await;
                left -= 1;
            } else if !lost {
                sleep(ms(50)).await;
            }
        }
        if lost {
            ended(&tenure, "lost");
            continue;
        }
        match guard.release().await {
            Ok(()) => ended(&tenure, "released"),
            Err(e) => {
                unexpected("release", &e);
                ended(&tenure, "failed");
            }
        }
    }
}

#[form]
async fn election(zk: &zk::Client, env: &Env, ctl: &Control, rng: &mut Rng) {
    let id = format!("c{}", env.client);
    let mut candidate = None;
    // The leadership we act for: its tenure and token.
    let mut leading: Option<(String, i64)> = None;
    while !ctl.stopped() {
        let Some(c) = candidate.as_mut() else {
            match zk.election(&env.path, &id).join().await {
                Ok(c) => candidate = Some(c),
                Err(e) => {
                    unexpected("join", &e);
                    sleep(ms(100)).await;
                }
            }
            continue;
        };
        match c.elected_timeout(ms(rng.between(300, 1500))).await {
            Ok(None) => continue,
            Ok(Some(token)) => {
                if leading.as_ref().is_some_and(|(_, t)| *t != token) {
                    let (old, _) = leading.take().expect("checked");
                    ended(&old, "lost");
                }
                if leading.is_none() {
                    let tenure = format!("{id}.{token}");
                    report(Event::Held {
                        tenure: tenure.clone(),
                        token,
                        at: now_micros(),
                    });
                    leading = Some((tenure, token));
                }
            }
            Err(e) => {
                // The candidacy ended for good: stand again.
                unexpected("elected", &e);
                if let Some((old, _)) = leading.take() {
                    ended(&old, "lost");
                }
                candidate = None;
                continue;
            }
        }
        let Some((tenure, token)) = leading.clone() else {
            continue;
        };
        let mut left = acts(rng);
        while left > 0 && !ctl.stopped() && leading.is_some() {
            while let Some(e) = c.changed_timeout(Duration::ZERO).await {
                match e {
                    ElectionEvent::Suspended => heard(&tenure, "suspended"),
                    ElectionEvent::Reconnected => heard(&tenure, "reconnected"),
                    ElectionEvent::Lost { .. } => {
                        heard(&tenure, "lost");
                        ended(&tenure, "lost");
                        leading = None;
                    }
                    _ => {}
                }
            }
            let checked = now_micros();
            if leading.is_some() && c.is_leader() && c.fencing_token() == Some(token) {
                act(ctl, rng, &tenure, token, checked).await;
                left -= 1;
            } else if leading.is_some() {
                sleep(ms(50)).await;
            }
        }
        if leading.take().is_some() {
            // Enough: stand down and join again at the back of the line.
            match c.resign().await {
                Ok(()) => ended(&tenure, "released"),
                Err(e) => {
                    unexpected("resign", &e);
                    ended(&tenure, "failed");
                }
            }
            if let Err(e) = c.join().await {
                unexpected("rejoin", &e);
                candidate = None;
            }
        }
    }
    if let Some(c) = candidate {
        if let Err(e) = c.close().await {
            unexpected("close", &e);
        }
    }
    if let Some((tenure, _)) = leading {
        ended(&tenure, "released");
    }
}

#[form]
async fn semaphore(zk: &zk::Client, env: &Env, ctl: &Control, rng: &mut Rng) {
    let slots = zk.semaphore(&env.path, env.max);
    let mut n = 0;
    while !ctl.stopped() {
        let wait = ms(rng.between(300, 2500));
        let mut lease = match slots.acquire_timeout(wait).await {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                unexpected("acquire", &e);
                sleep(ms(100)).await;
                continue;
            }
        };
        n += 1;
        let tenure = format!("c{}.{n}", env.client);
        report(Event::Held {
            tenure: tenure.clone(),
            token: 0,
            at: now_micros(),
        });
        let (mut left, mut last, mut lost) = (acts(rng), zk::LeaseState::Held, false);
        while left > 0 && !ctl.stopped() && !lost {
            let state = lease.state();
            if state != last {
                match state {
                    zk::LeaseState::Suspended => heard(&tenure, "suspended"),
                    zk::LeaseState::Held => heard(&tenure, "reconnected"),
                    zk::LeaseState::Lost(_) => {
                        heard(&tenure, "lost");
                        lost = true;
                    }
                }
                last = state;
            }
            let checked = now_micros();
            if lease.is_held() {
                act(ctl, rng, &tenure, 0, checked).await;
                left -= 1;
            } else if !lost {
                sleep(ms(50)).await;
            }
        }
        if lost {
            ended(&tenure, "lost");
            continue;
        }
        match lease.release().await {
            Ok(()) => ended(&tenure, "released"),
            Err(e) => {
                unexpected("release", &e);
                ended(&tenure, "failed");
            }
        }
    }
}

#[form]
async fn counter(zk: &zk::Client, env: &Env, ctl: &Control, rng: &mut Rng) {
    let mut counter = match zk.counter(&env.path, CounterFormat::I64) {
        Ok(c) => c,
        Err(e) => {
            report(Event::Error(format!("counter: {e}")));
            return;
        }
    };
    while !ctl.stopped() {
        let from = now_micros();
        let result = counter.add(1).await;
        let to = now_micros();
        let outcome = match result {
            Ok(v) => Some(Some(v)),
            Err(e) if e.may_have_applied() => None,
            Err(e) => {
                unexpected("add", &e);
                Some(None)
            }
        };
        report(Event::Add { from, to, outcome });
        sleep(ms(rng.between(0, 40))).await;
    }
}

#[form]
async fn producer(zk: &zk::Client, env: &Env, ctl: &Control, rng: &mut Rng) {
    let mut q = zk.queue(&env.path);
    let mut n = 0;
    while !ctl.stopped() {
        n += 1;
        let item = format!("p{}-{n}", env.client);
        let from = now_micros();
        let result = q.put(item.clone().into_bytes()).await;
        let to = now_micros();
        let outcome = match &result {
            Ok(_) => Some(true),
            Err(e) if e.may_have_applied() => None,
            Err(e) => {
                unexpected("put", e);
                Some(false)
            }
        };
        report(Event::Put {
            item,
            from,
            to,
            outcome,
        });
        sleep(ms(rng.between(10, 80))).await;
    }
}

#[form]
async fn consumer(zk: &zk::Client, env: &Env, ctl: &Control, rng: &mut Rng) {
    let claims = env.role == "claimer";
    let mut q = zk.queue(&env.path);
    // Until told to stop, then until the queue stays empty for a while (the producers
    // are done by then): the drain.
    let mut quiet_since: Option<std::time::Instant> = None;
    loop {
        if ctl.stopped() {
            let since = *quiet_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > Duration::from_secs(3) {
                break;
            }
        }
        let item = if claims {
            match q.take_claimed_timeout(ms(500)).await {
                Ok(Some(c)) => {
                    let name = String::from_utf8_lossy(c.data()).to_string();
                    report(Event::Claim {
                        item: name.clone(),
                        at: now_micros(),
                    });
                    sleep(ms(rng.between(5, 40))).await;
                    let done = c.complete().await;
                    if let Err(e) = &done {
                        unexpected("complete", e);
                    }
                    report(Event::Complete {
                        item: name,
                        at: now_micros(),
                        ok: done.is_ok(),
                    });
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    unexpected("take_claimed", &e);
                    sleep(ms(100)).await;
                    false
                }
            }
        } else {
            match q.take_timeout(ms(500)).await {
                Ok(Some(item)) => {
                    report(Event::Take {
                        item: String::from_utf8_lossy(&item.data).to_string(),
                        at: now_micros(),
                    });
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    if e.may_have_applied() {
                        report(Event::TakeDoubt { at: now_micros() });
                    } else {
                        unexpected("take", &e);
                    }
                    sleep(ms(100)).await;
                    false
                }
            }
        };
        if item {
            quiet_since = None;
        }
    }
}
