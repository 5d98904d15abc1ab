//! The default ACL (Curator's `ACLProvider`): the ACL a node gets when its create asks
//! for "the default" — an empty ACL, or exactly ZooKeeper's `OPEN_ACL_UNSAFE`
//! (`world:anyone`, all permissions), which is what every recipe and
//! `CreateOptions::default()` carry unless told otherwise. Applied in one place, as a
//! request is admitted ([`Session::submit`](super::Session::submit)): every `Create`,
//! `Create2`, `CreateContainer` and `CreateTtl`, alone or inside a `Multi`, so the
//! nodes recipes create — their parents included — carry it with no recipe knowing.
//! A create that names any other ACL keeps it.

use alloc::string::String;
use alloc::vec::Vec;

use crate::proto::{Acl, CreateRequest, CreateTtlRequest, MultiOp, Request};

/// The ACL for nodes created with "the default": per path prefix (the longest
/// matching prefix wins; a prefix matches the node itself and everything under it),
/// else `default`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultAcl {
    /// For a path under none of the prefixes.
    pub default: Vec<Acl>,
    /// `(prefix, acl)` pairs, e.g. `("/app", ...)` for `/app` and `/app/...`.
    pub prefixes: Vec<(String, Vec<Acl>)>,
}

impl DefaultAcl {
    /// `acl` for every node.
    pub fn new(acl: Vec<Acl>) -> DefaultAcl {
        DefaultAcl {
            default: acl,
            prefixes: Vec::new(),
        }
    }

    /// `acl` for `prefix` and the nodes under it.
    pub fn prefix(mut self, prefix: &str, acl: Vec<Acl>) -> DefaultAcl {
        let prefix = prefix.trim_end_matches('/');
        self.prefixes.push((prefix.into(), acl));
        self
    }

    /// The ACL for a node at `path` (as the client names it, without the chroot).
    pub fn acl_for(&self, path: &str) -> &[Acl] {
        self.prefixes
            .iter()
            .filter(|(prefix, _)| {
                path.strip_prefix(prefix.as_str()).is_some_and(|rest| {
                    rest.is_empty() || rest.starts_with('/') || prefix.is_empty()
                })
            })
            .max_by_key(|(prefix, _)| prefix.len())
            .map_or(&self.default, |(_, acl)| acl)
    }

    /// Gives every create in `request` that asks for the default its ACL.
    pub(super) fn apply(&self, request: &mut Request) {
        match request {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                self.apply_create(c)
            }
            Request::CreateTtl(c) => self.apply_ttl(c),
            Request::Multi(ops) => {
                for op in ops {
                    match op {
                        MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                            self.apply_create(c)
                        }
                        MultiOp::CreateTtl(c) => self.apply_ttl(c),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn apply_create(&self, c: &mut CreateRequest) {
        if asks_default(&c.acl) {
            c.acl = self.acl_for(&c.path).to_vec();
        }
    }

    fn apply_ttl(&self, c: &mut CreateTtlRequest) {
        if asks_default(&c.acl) {
            c.acl = self.acl_for(&c.path).to_vec();
        }
    }
}

/// Does a create with this ACL ask for the default?
fn asks_default(acl: &[Acl]) -> bool {
    acl.is_empty() || acl == Acl::open_unsafe().as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{perms, Id};
    use alloc::vec;

    fn digest(user: &str) -> Vec<Acl> {
        vec![Acl {
            perms: perms::ALL,
            id: Id {
                scheme: "digest".into(),
                id: user.into(),
            },
        }]
    }

    #[test]
    fn the_longest_prefix_wins_on_whole_components() {
        let d = DefaultAcl::new(digest("all"))
            .prefix("/app", digest("app"))
            .prefix("/app/locks/", digest("locks"));
        assert_eq!(d.acl_for("/"), digest("all"));
        assert_eq!(d.acl_for("/apple"), digest("all"));
        assert_eq!(d.acl_for("/app"), digest("app"));
        assert_eq!(d.acl_for("/app/x"), digest("app"));
        assert_eq!(d.acl_for("/app/locks"), digest("locks"));
        assert_eq!(d.acl_for("/app/locks/l-1"), digest("locks"));
        assert_eq!(d.acl_for("/app/lockset"), digest("app"));
    }

    #[test]
    fn only_creates_asking_for_the_default_change_in_multi_too() {
        let d = DefaultAcl::new(digest("all"));
        let create = |acl: Vec<Acl>| CreateRequest {
            path: "/a".into(),
            data: bytes::Bytes::new(),
            acl,
            flags: 0,
        };
        let mut r = Request::Multi(vec![
            MultiOp::Create(create(Acl::open_unsafe())),
            MultiOp::CreateContainer(create(Vec::new())),
            MultiOp::Create2(create(digest("mine"))),
        ]);
        d.apply(&mut r);
        let Request::Multi(ops) = r else { panic!() };
        let acls: Vec<_> = ops
            .iter()
            .map(|op| match op {
                MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                    c.acl.clone()
                }
                _ => panic!(),
            })
            .collect();
        assert_eq!(acls, vec![digest("all"), digest("all"), digest("mine")]);
    }
}
