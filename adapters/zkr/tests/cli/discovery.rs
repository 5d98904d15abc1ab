//! `zkr register` and `zkr discover` (Curator ServiceDiscovery compatible): an instance
//! registered while CMD runs and unregistered when it exits, listed in text and JSON,
//! followed with `--watch`; a bad HOST:PORT is refused before connecting.

use super::*;
use zk_recipes_blocking::ServiceInstance;

/// Called from `nodes::node_verbs` (one server for both: each costs a JVM start).
pub fn register_while_cmd_runs_and_discover(server: &TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let stop = dir.path().join("stop");
    let script = format!(
        "echo \"$ZK_FENCING_TOKEN\" > {s}; while [ ! -e {g} ]; do sleep 0.05; done",
        s = started.display(),
        g = stop.display()
    );
    let mut reg = Proc(
        zkr(server)
            .args(["register", "web", "127.0.0.1:8080", "--id", "a"])
            .args(["--payload", r#"{"k":[1,"x"]}"#, "--", "sh", "-c", &script])
            .spawn()
            .unwrap(),
    );
    wait_for(&started, "\n", Duration::from_secs(20));

    let listed = run(server, &["discover", "web"]);
    assert_eq!(stdout(&listed), "a 127.0.0.1:8080\n", "{listed:?}");
    // Curator's node: /services/web/a, ephemeral, the instance's JSON.
    let zk = client(server);
    let (data, stat) = zk.get_data("/services/web/a").unwrap();
    assert_ne!(stat.ephemeral_owner, 0);
    let i = ServiceInstance::from_json(&data).unwrap();
    assert_eq!(i.payload.as_deref(), Some(r#"{"k":[1,"x"]}"#));
    assert!(i.registration_time_utc > 0);
    assert_eq!(
        fs::read_to_string(&started).unwrap().trim(),
        stat.czxid.to_string(),
        "ZK_FENCING_TOKEN is the node's creation zxid"
    );
    let json = run(server, &["discover", "--json", "web"]);
    assert_eq!(stdout(&json), format!("{}\n", i.to_json().unwrap()));

    let mut watch = Proc(
        zkr(server)
            .args(["discover", "--watch", "web"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(watch.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "a 127.0.0.1:8080");
    // CMD exits: zkr unregisters and exits with CMD's status.
    fs::write(&stop, "").unwrap();
    assert!(wait_exit(&mut reg.0, Duration::from_secs(20)).success());
    assert_eq!(lines.next().unwrap().unwrap(), "removed a");
    assert!(zk.exists("/services/web/a").unwrap().is_none());
    drop(watch);

    let bad = run(server, &["register", "web", "nohost", "--", "true"]);
    assert_eq!(bad.status.code(), Some(125), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not HOST:PORT"));
    zk.close();
}
