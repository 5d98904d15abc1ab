// The default ACL (`Options::default_acl`, Curator's `ACLProvider`) against a real
// ZooKeeper, in each form: every node the recipes create — their parents included —
// carries it (read back with getACL), a create that names its own ACL keeps it, the
// longest prefix wins, and another identity cannot delete what the recipes made.
// Every recipe of the README's table that creates nodes runs here, on one server.

use std::time::Duration;

use zk::zk_recipes::client::ops::digest_id;
use zk::{
    connect, perms, Acl, Client, ConfigMode, CreateMode, CreateOptions, DefaultAcl, ErrorCode,
    Id, Options, OwnedNodeConfig, ServiceInstance, Variant, Vote,
};
use zk_recipes_testing::TestServer;

fn digest(user: &str, password: &str) -> Vec<Acl> {
    vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "digest".into(),
            id: digest_id(user, password),
        },
    }]
}

#[form]
async fn as_user(server: &TestServer, options: Options, user: &str, password: &str) -> Client {
    let zk = connect(
        &server.connect_string(),
        options.connect_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    zk.add_auth("digest", format!("{user}:{password}").as_bytes())
        .await
        .unwrap();
    zk
}

/// Every node under `path` (itself included), depth first.
#[form]
async fn tree(zk: &Client, path: &str) -> Vec<String> {
    let mut out = vec![path.to_string()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        for child in zk.get_children(&p).await.unwrap() {
            out.push(format!("{}/{child}", p.trim_end_matches('/')));
        }
        i += 1;
    }
    out
}

#[test]
fn every_recipe_node_carries_the_default_acl_and_another_identity_cannot_delete_it() {
    run(default_acl())
}

#[form]
async fn default_acl() {
    let server = TestServer::start().unwrap();
    let owner_acl = digest("owner", "pw");
    let locks_acl = {
        let mut a = digest("owner", "pw");
        a.push(Acl {
            perms: perms::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        });
        a
    };
    let options = Options::default().default_acl(
        DefaultAcl::new(owner_acl.clone()).prefix("/acl/locks", locks_acl.clone()),
    );
    let zk = as_user(&server, options, "owner", "pw").await;
    let intruder = as_user(&server, Options::default(), "intruder", "x").await;

    // Recipes, each creating its nodes (and parents) with "the default".
    let held = zk.lock("/acl/locks/l").acquire().await.unwrap();
    let mut leader = zk.election("/acl/election", "me").join().await.unwrap();
    assert!(leader
        .elected_timeout(Duration::from_secs(20))
        .await
        .unwrap()
        .is_some());
    let mut q = zk.queue("/acl/queue");
    q.put("item").await.unwrap();
    let lease = zk.semaphore("/acl/sem", 2).acquire().await.unwrap();
    zk.barrier("/acl/barrier").set().await.unwrap();
    let mut c = zk
        .counter("/acl/counter", zk::CounterFormat::I64)
        .unwrap();
    c.add(1).await.unwrap();
    // The other recipes that create nodes (the README's table).
    let reentrant = zk.reentrant_lock("/acl/locks/re").acquire().await.unwrap();
    let read = zk.read_lock("/acl/rw").acquire().await.unwrap();
    let multi = zk
        .multi_lock(&["/acl/multi/a", "/acl/multi/b"])
        .acquire()
        .await
        .unwrap();
    let mut double = zk.double_barrier("/acl/double", 1);
    assert!(double.enter_timeout(W).await.unwrap(), "{NAME}");
    let mut pq = zk.priority_queue("/acl/pqueue");
    pq.put_priority("p", 5).await.unwrap();
    let mut dq = zk.delay_queue("/acl/delay");
    dq.put_delayed("d", Duration::from_secs(3600)).await.unwrap();
    let mut q2 = zk.queue("/acl/claimed");
    q2.put("c").await.unwrap();
    let claimed = q2.take_claimed().await.unwrap();
    let mut member = zk.group_member("/acl/group", "m", "10.0.0.1").unwrap();
    created(&mut member, W).await.unwrap();
    let mut owned = zk
        .owned_node(OwnedNodeConfig::new("/acl/owned/n", "x"))
        .unwrap();
    created(&mut owned, W).await.unwrap();
    let mut coordinator = zk.rendezvous_coordinator("/acl/rv/z_r").unwrap();
    created(&mut coordinator, W).await.unwrap();
    let mut publisher = zk.rendezvous_publisher("/acl/rv2/p", "host:1").unwrap();
    created(&mut publisher, W).await.unwrap();
    let mut name = zk
        .register_name("/acl/names", "db", "10.0.0.7", CreateMode::Ephemeral)
        .unwrap();
    created(&mut name, W).await.unwrap();
    zk.id_generator("/acl/ids").unwrap().next_id().await.unwrap();
    let cfg = |k: &str| vec![(format!("/acl/cfg/{k}/a"), zk::Bytes::from("1"))];
    zk.write_config("/acl/cfg/r/ready", cfg("r"), ConfigMode::ReadyNode)
        .await
        .unwrap();
    zk.write_config("/acl/cfg/m/ready", cfg("m"), ConfigMode::Multi)
        .await
        .unwrap();
    let mut service = zk
        .register_service(
            "/acl/services",
            &ServiceInstance::new("web", "a", "10.0.0.1", 8080),
        )
        .unwrap();
    created(&mut service, W).await.unwrap();
    zk.update("/acl/update/v", |_| Some(zk::Bytes::from("v")))
        .await
        .unwrap();
    zk.create_all("/acl/path/x/y", "", &CreateOptions::default())
        .await
        .unwrap();
    let mut tx = zk
        .transaction("/acl/tx/1", &["a"], Variant::Coordinator)
        .deadline(W)
        .start()
        .await
        .unwrap();
    let mut site = zk.site("/acl/tx/1", "a", Variant::Coordinator).await.unwrap();
    site.vote(Vote::Commit).await.unwrap();
    assert_eq!(
        tx.outcome_timeout(W).await.unwrap(),
        Some(zk::Outcome::Commit),
        "{NAME}"
    );

    // A raw create with its own ACL keeps it.
    let own_read = vec![Acl {
        perms: perms::ALL & !perms::ADMIN,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }];
    zk.create(
        "/acl/own",
        "",
        &CreateOptions::mode(CreateMode::Persistent).acl(own_read.clone()),
    )
    .await
    .unwrap();

    let nodes = tree(&zk, "/acl").await;
    assert!(nodes.len() >= 50, "{NAME}: {} nodes: {nodes:?}", nodes.len());
    for node in &nodes {
        let (acl, _) = zk.get_acl(node).await.unwrap();
        let want = if node == "/acl/own" {
            &own_read
        } else if node.starts_with("/acl/locks") {
            &locks_acl
        } else {
            &owner_acl
        };
        assert_eq!(&acl, want, "{NAME}: {node}");
    }
    // Another identity can delete none of them (a leaf is deleted through its parent's
    // DELETE permission, which only the owner has).
    for node in nodes.iter().rev().filter(|n| *n != "/acl") {
        let code = intruder.delete(node, None).await.unwrap_err().code();
        assert!(
            matches!(code, Some(ErrorCode::NoAuth) | Some(ErrorCode::NotEmpty)),
            "{NAME}: {node}: {code:?}"
        );
        assert!(zk.exists(node).await.unwrap().is_some(), "{NAME}: {node}");
    }
    held.release().await.unwrap();
    lease.release().await.unwrap();
    reentrant.release().await.unwrap();
    read.release().await.unwrap();
    multi.release().await.unwrap();
    claimed.complete().await.unwrap();
}

const W: Duration = Duration::from_secs(20);
