// Dynamic reconfiguration against a real 3.8 ensemble started with
// `reconfigEnabled=true` (a dynamic config file; the superuser may reconfig), in each
// form: the raw `get_config` / `reconfig` calls and their refusals, then the issue's
// test — a fourth server added and one removed while 8 lock contenders tracking the
// ensemble (`Options::track_ensemble`) run: no two holders at once, fencing tokens
// increasing, no session lost, the contenders spread over the new members and none
// left on the removed server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk::{Client, ErrorCode, Reconfig};
use zk_recipes_testing::{EnsembleOptions, TestEnsemble, SUPERUSER};

const CONTENDERS: usize = 8;

/// Which server (index) each of `sessions` is connected to, by the servers' `cons`.
fn placement(ensemble: &TestEnsemble, sessions: &[i64]) -> BTreeMap<i64, usize> {
    let mut at = BTreeMap::new();
    for i in 0..ensemble.len() {
        let cons = ensemble.four_letter(i, "cons").unwrap_or_default();
        for s in sessions {
            if cons.contains(&format!("sid=0x{s:x},")) || cons.contains(&format!("sid=0x{s:x})"))
            {
                at.insert(*s, i);
            }
        }
    }
    at
}

/// Clients per server index.
fn spread(at: &BTreeMap<i64, usize>, servers: usize) -> Vec<usize> {
    let mut n = vec![0; servers];
    for i in at.values() {
        n[*i] += 1;
    }
    n
}

/// Waits (10 s at most) until every session is placed and `ok` holds of the placement.
fn wait_placement(
    ensemble: &TestEnsemble,
    sessions: &[i64],
    ok: impl Fn(&BTreeMap<i64, usize>) -> bool,
) -> (BTreeMap<i64, usize>, Duration) {
    let t0 = Instant::now();
    loop {
        let at = placement(ensemble, sessions);
        if at.len() == sessions.len() && ok(&at) {
            return (at, t0.elapsed());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{NAME}: placement {at:?} of {sessions:x?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (10 s at most) until every client's host list is `want` (sorted); how long.
#[form]
async fn hosts_become(clients: &[Client], want: &[String]) -> Duration {
    let t0 = Instant::now();
    loop {
        let lists: Vec<Vec<String>> = clients
            .iter()
            .map(|c| {
                let mut h = c.hosts();
                h.sort();
                h
            })
            .collect();
        if lists.iter().all(|h| h == want) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{NAME}: host lists {lists:?}, want {want:?}"
        );
        sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn reconfig_calls_and_lock_contenders_across_adding_and_removing_a_server() {
    run(across_reconfig())
}

#[form]
async fn across_reconfig() {
    let started = Instant::now();
    let mut ensemble = TestEnsemble::start_with(EnsembleOptions {
        reconfig: true,
        ..EnsembleOptions::default()
    })
    .expect("a real 3-server ensemble with reconfigEnabled");
    let cs = ensemble.connect_string();
    let admin = connect(&cs).await;

    // get_config: the three members, their client addresses, a version.
    let ((config, _), watch) = admin.get_config_watch().await.unwrap();
    let mut hosts = config.client_hosts();
    hosts.sort();
    let mut want: Vec<String> = (0..3).map(|i| ensemble.addr(i).to_string()).collect();
    want.sort();
    assert_eq!(hosts, want, "{NAME}: {config:?}");
    assert!(config.version > 0);
    // Refusals, each a clear error: not allowed without the superuser.
    let joiner_spec = |e: &TestEnsemble, i| e.server_spec(i);
    let e = admin
        .reconfig(&Reconfig::remove_server(3))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoAuth), "{NAME}: {e}");
    let (user, password) = SUPERUSER;
    admin
        .add_auth("digest", format!("{user}:{password}").as_bytes())
        .await
        .unwrap();
    // A stale `from_config`.
    let e = admin
        .reconfig(&Reconfig::remove_server(3).from_config(config.version - 1))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadVersion), "{NAME}: {e}");
    let unchanged = admin.get_config().await.unwrap().0;
    assert_eq!(unchanged.version, config.version);

    // The contenders: 8 sessions tracking the ensemble, each taking the lock in turn.
    let mut clients: Vec<Client> = Vec::new();
    for i in 0..CONTENDERS {
        let options = options()
            .track_ensemble(true)
            .seed(0x5eed_0000 + i as u64)
            .call_timeout(Duration::from_secs(10));
        clients.push(zk::connect(&cs, options).await.unwrap());
    }
    let sessions: Vec<i64> = clients.iter().map(|c| c.session_id()).collect();
    let mut statuses: Vec<_> = clients.iter().map(|c| c.status_stream()).collect();
    let holders = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let last_token = Arc::new(AtomicI64::new(i64::MIN));
    let stale_tokens = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for zk in clients.clone() {
        let (holders, overlaps, last_token, stale_tokens, acquired, stop) = (
            holders.clone(),
            overlaps.clone(),
            last_token.clone(),
            stale_tokens.clone(),
            acquired.clone(),
            stop.clone(),
        );
        tasks.push(spawn(move || async move {
            let mut errors = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match zk.lock("/reconf/lock").acquire().await {
                    Ok(guard) => {
                        if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        let token = guard.fencing_token();
                        if last_token.fetch_max(token, Ordering::SeqCst) >= token {
                            stale_tokens.fetch_add(1, Ordering::SeqCst);
                        }
                        acquired.fetch_add(1, Ordering::SeqCst);
                        sleep(Duration::from_millis(10)).await;
                        holders.fetch_sub(1, Ordering::SeqCst);
                        if let Err(e) = guard.release().await {
                            errors.push(e);
                        }
                    }
                    Err(e) => errors.push(e),
                }
            }
            errors
        }));
    }
    let (before, _) = wait_placement(&ensemble, &sessions, |_| true);
    sleep(Duration::from_millis(500)).await;
    let before_add = acquired.load(Ordering::SeqCst);

    // A fourth server joins and is added.
    let four = ensemble.start_joiner().expect("a fourth server");
    let added_at = Instant::now();
    let (config4, _) = admin
        .reconfig(&Reconfig::add(&joiner_spec(&ensemble, four)))
        .await
        .unwrap();
    assert_eq!(config4.servers.len(), 4, "{NAME}: {config4:?}");
    assert!(watch.wait_timeout(Duration::from_secs(5)).await.is_ok());
    // Every contender follows: its host list is the four members.
    let mut members: Vec<String> = (0..4).map(|i| ensemble.addr(i).to_string()).collect();
    members.sort();
    let learned_add = hosts_become(&clients, &members).await;
    // The contenders learn it; some move to the newcomer (each with probability 1/4).
    sleep(Duration::from_secs(2)).await;
    let (after_add, _) = wait_placement(&ensemble, &sessions, |_| true);
    let add_took = added_at.elapsed();
    let during_add = acquired.load(Ordering::SeqCst) - before_add;

    // Server 1 (index 0) is removed, non-incrementally (the add above was incremental):
    // the new membership is servers 2-4. Its contenders leave it at once.
    let removed_at = Instant::now();
    let rest: Vec<String> = (1..4).map(|i| ensemble.server_spec(i)).collect();
    let (config3, _) = admin.reconfig(&Reconfig::members(&rest)).await.unwrap();
    assert_eq!(config3.servers.len(), 3, "{NAME}: {config3:?}");
    let removed = ensemble.addr(0).to_string();
    members.retain(|h| *h != removed);
    let learned_remove = hosts_become(&clients, &members).await;
    let (after_remove, moved_in) =
        wait_placement(&ensemble, &sessions, |at| at.values().all(|&i| i != 0));
    let remove_took = removed_at.elapsed();
    sleep(Duration::from_millis(500)).await;
    let before_stop = acquired.load(Ordering::SeqCst);
    sleep(Duration::from_millis(500)).await;
    let after_moves = acquired.load(Ordering::SeqCst) - before_stop;

    stop.store(true, Ordering::SeqCst);
    let mut errors = Vec::new();
    for t in tasks {
        errors.extend(t.join().await);
    }
    // No session lost: every contender still has its first session, never expired.
    for (i, zk) in clients.iter().enumerate() {
        assert_eq!(zk.session_id(), sessions[i], "{NAME}: contender {i}");
        assert!(zk.status().is_connected(), "{NAME}: contender {i}");
        while let Ok(s) = statuses[i].next_timeout(Duration::ZERO).await {
            assert!(
                !matches!(s, zk::Status::Expired { .. }),
                "{NAME}: contender {i} expired"
            );
        }
    }
    let total = acquired.load(Ordering::SeqCst);
    let spread_before = spread(&before, 4);
    let spread_add = spread(&after_add, 4);
    let spread_remove = spread(&after_remove, 4);
    println!(
        "{NAME}: {total} acquisitions ({during_add} while adding, {after_moves} in the 0.5 s \
         after the removal), overlaps {}, stale fencing tokens {}, errors {errors:?}; \
         host lists updated {learned_add:?} after the add, {learned_remove:?} after the \
         removal; contenders per server (1..4): before {spread_before:?}, after adding server 4 \
         {spread_add:?} (reconfig + 2 s = {add_took:?}), after removing server 1 \
         {spread_remove:?} (off it in {moved_in:?}, reconfig included {remove_took:?}); \
         scenario {:?}",
        overlaps.load(Ordering::SeqCst),
        stale_tokens.load(Ordering::SeqCst),
        started.elapsed()
    );
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "{NAME}: two holders at once");
    assert_eq!(stale_tokens.load(Ordering::SeqCst), 0, "{NAME}: fencing tokens");
    assert!(errors.is_empty(), "{NAME}: {errors:?}");
    assert!(during_add > 0 && after_moves > 0, "{NAME}: the lock kept moving");
    // None left on the removed server, by the servers and by the clients; spread over
    // the new members.
    assert_eq!(spread_remove[0], 0);
    for zk in &clients {
        assert!(zk.server() != removed && members.contains(&zk.server()), "{NAME}");
    }
    assert!(
        spread_remove.iter().filter(|&&n| n > 0).count() >= 2,
        "{NAME}: {spread_remove:?}"
    );
    for zk in &clients {
        zk.close().await;
    }
    admin.close().await;
}
