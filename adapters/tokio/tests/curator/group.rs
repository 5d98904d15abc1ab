//! Interoperability with Apache Curator 5.4's `GroupMember` (`CuratorGroup.java`):
//! a Java member and ours in one group. Each sees the other join and leave (a
//! graceful leave, and a process killed with SIGKILL whose session then expires), and
//! each writes the member node the other expects.
//!
//! What Curator does (its 5.4 `GroupMember`): a `PersistentNode(client, EPHEMERAL,
//! false, ZKPaths.makePath(membershipPath, thisId), payload)` — the node
//! `<dir>/<id>`, ephemeral, not protected, the payload as data — and a cache of
//! `<dir>` whose children are the members (`getCurrentMembers`: id → data, itself
//! included). Ours ([`zk_recipes_tokio::Client::group_member`]) writes the same node;
//! our view ([`zk_recipes_tokio::Client::group_view`]) reads Curator's.
//!
//! Our killable member is this test binary run again with `GROUP_CHILD=<connect
//! string>` and the filter of [`rust_member_child`].

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use zk_recipes_testing::{Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, GroupView, Options, ViewEvent};

use crate::support::{self as curator_support, Proc};

const DIR: &str = "/interop/group";
const W: Duration = Duration::from_secs(20);

/// Our member "rust-1" (data "r1") as a process of its own: prints JOINED once its
/// node is on the server, then lives until killed.
#[tokio::test]
#[ignore = "the member process of curator_and_ours_share_a_group"]
async fn rust_member_child() {
    let Ok(cs) = std::env::var("GROUP_CHILD") else {
        return;
    };
    let options = Options::default().session_timeout(Duration::from_secs(1));
    let zk = connect(&cs, options).await.unwrap();
    let mut m = zk.group_member(DIR, "rust-1", "r1").unwrap();
    m.created().await.unwrap();
    println!("JOINED");
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// The view's next `Joined` or `Left` event: `("+" | "-", name, data)`.
async fn edge(view: &mut GroupView) -> (&'static str, String, String) {
    loop {
        let e = tokio::time::timeout(W, view.next())
            .await
            .expect("a view event in time")
            .expect("the view ended");
        let (sign, m) = match e {
            ViewEvent::Joined(m) => ("+", m),
            ViewEvent::Left(m) => ("-", m),
            _ => continue,
        };
        return (sign, m.name, String::from_utf8_lossy(&m.data).into_owned());
    }
}

fn e(sign: &'static str, name: &str, data: &str) -> (&'static str, String, String) {
    (sign, name.to_string(), data.to_string())
}

#[test]
fn curator_and_ours_share_a_group() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(share_a_group());
}

async fn share_a_group() {
    // Sessions expire on the server's ticks: short ticks, a short wait after a kill.
    let server = TestServer::start_with(ServerOptions {
        tick_time_ms: 250,
        ..ServerOptions::default()
    })
    .unwrap();
    let cs = server.connect_string();
    let (_java, cp) = curator_support::compiled("CuratorGroup");
    let zk = connect(&cs, Options::default()).await.unwrap();
    let mut view = zk.group_view(DIR).unwrap();
    assert!(view.synced().await.unwrap().is_empty());

    // Curator joins: our view sees it, with its data; its node is `<dir>/<id>`,
    // ephemeral, the payload as data.
    let mut java = Proc::java(&cp, "CuratorGroup", &[&cs, DIR, "java-1", "j"]);
    java.line("JOINED");
    assert_eq!(edge(&mut view).await, e("+", "java-1", "j"));
    let (data, stat) = zk.get_data(&format!("{DIR}/java-1")).await.unwrap();
    assert_eq!((&data[..], stat.ephemeral_owner != 0), (&b"j"[..], true));

    // Ours joins and leaves (in this process): Curator sees both.
    let mut ours = zk.group_member(DIR, "rust-0", "r0").unwrap();
    let stat = ours.created().await.unwrap();
    assert_eq!(stat.ephemeral_owner, zk.session_id());
    java.until("MEMBERS java-1=j,rust-0=r0");
    assert_eq!(edge(&mut view).await, e("+", "rust-0", "r0"));
    ours.leave().await.unwrap();
    java.until("MEMBERS java-1=j");
    assert_eq!(edge(&mut view).await, e("-", "rust-0", "r0"));

    // Our member process killed with SIGKILL: Curator sees it go once its session
    // expires (1 s).
    let mut rust = Proc::this_test("group::rust_member_child", &[("GROUP_CHILD", &cs)]);
    rust.line("JOINED");
    java.until("MEMBERS java-1=j,rust-1=r1");
    assert_eq!(edge(&mut view).await, e("+", "rust-1", "r1"));
    rust.kill9();
    java.until("MEMBERS java-1=j");
    assert_eq!(edge(&mut view).await, e("-", "rust-1", "r1"));

    // Curator leaves and joins again: ours sees both.
    java.send("leave");
    java.line("LEFT");
    assert_eq!(edge(&mut view).await, e("-", "java-1", "j"));
    java.send("join");
    assert_eq!(edge(&mut view).await, e("+", "java-1", "j"));

    // Curator's process killed with SIGKILL: ours sees it go once its session expires.
    java.kill9();
    assert_eq!(edge(&mut view).await, e("-", "java-1", "j"));
    assert!(view.members().await.unwrap().is_empty());
    assert!(zk.get_children(DIR).await.unwrap().is_empty());
    zk.close().await;
}
