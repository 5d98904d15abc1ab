// The default ACL (`Options::default_acl`, Curator's `ACLProvider`) against a real
// ZooKeeper, in each form: every node the recipes create — their parents included —
// carries it (read back with getACL), a create that names its own ACL keeps it, the
// longest prefix wins, and another identity cannot delete what the recipes made.

use std::time::Duration;

use zk::zk_recipes::client::ops::digest_id;
use zk::{
    connect, perms, Acl, Client, CreateMode, CreateOptions, DefaultAcl, ErrorCode, Id, Options,
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
    let server = server();
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
    assert!(nodes.len() >= 10, "{NAME}: {nodes:?}");
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
}
