//! Every adapter test against a real (or a fake) ZooKeeper, in one binary. A scenario is
//! written once, as async code under `#[form]`, and compiled twice by [`forms!`]: in the
//! tokio form as written, in the blocking form without `async` and `.await` — the trick
//! `zk-recipes-surface` uses for the adapters themselves (issue 27). Its tests are
//! `<module>::tokio_form::<name>` and `<module>::blocking_form::<name>`.
// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

/// Compiles the scenario file `$file` (relative to this directory) once per form, as
/// the modules `tokio_form` and `blocking_form` of a module `$name`. In each, `zk` is
/// that form's adapter crate, `form` its attribute, and the form's runtime helpers
/// ([`tokio_rt`] / [`blocking_rt`]: `run`, `spawn`, `sleep`, `NAME`) are in scope.
macro_rules! forms {
    ($name:ident, $file:literal) => {
        mod $name {
            pub(crate) mod tokio_form {
                #[allow(unused_imports)]
                use crate::common::*;
                #[allow(unused_imports)]
                use crate::only::tokio_form as only;
                #[allow(unused_imports)]
                use crate::shared::tokio_form::*;
                #[allow(unused_imports)]
                use crate::tokio_rt::*;
                #[allow(unused_imports)]
                use zk_recipes_macros::asynchronous as form;
                #[allow(unused_imports)]
                use zk_recipes_tokio as zk;
                include!($file);
            }
            // `run(scenario())` passes the scenario's result, `()` for most: the call
            // has already run (`unit_arg` is the point here).
            #[allow(clippy::unit_arg)]
            pub(crate) mod blocking_form {
                #[allow(unused_imports)]
                use crate::blocking_rt::*;
                #[allow(unused_imports)]
                use crate::common::*;
                #[allow(unused_imports)]
                use crate::only::blocking_form as only;
                #[allow(unused_imports)]
                use crate::shared::blocking_form::*;
                #[allow(unused_imports)]
                use zk_recipes_blocking as zk;
                #[allow(unused_imports)]
                use zk_recipes_macros::blocking as form;
                include!($file);
            }
        }
    };
}

/// The tokio form's runtime: a scenario runs on a fresh multi-threaded runtime; its
/// concurrent parts are tasks.
#[allow(dead_code)]
mod tokio_rt {
    use std::future::Future;
    use std::time::Duration;

    /// The form's name, for messages.
    pub const NAME: &str = "tokio";

    /// Runs a scenario to its end on a runtime of its own.
    pub fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(3)
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(f)
    }

    /// A concurrent part of a scenario.
    pub struct Task<T>(tokio::task::JoinHandle<T>);

    impl<T> Task<T> {
        /// Waits for it; its panic is the scenario's.
        pub async fn join(self) -> T {
            match self.0.await {
                Ok(t) => t,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }

        /// Whether it has ended.
        pub fn is_finished(&self) -> bool {
            self.0.is_finished()
        }
    }

    /// Starts `f()` as a task (`spawn(move || async move { .. })`).
    pub fn spawn<F, Fut>(f: F) -> Task<Fut::Output>
    where
        F: FnOnce() -> Fut,
        Fut: Future + Send + 'static,
        Fut::Output: Send + 'static,
    {
        Task(tokio::spawn(f()))
    }

    /// Sleeps without holding up the runtime.
    pub async fn sleep(d: Duration) {
        tokio::time::sleep(d).await
    }

    /// `f`, if it ends within `d` (`within(d, call).await`).
    pub async fn within<F: Future>(d: Duration, f: F) -> Option<F::Output> {
        tokio::time::timeout(d, f).await.ok()
    }
}

/// The blocking form's runtime: a scenario runs on the test's thread; its concurrent
/// parts are threads.
#[allow(dead_code)]
mod blocking_rt {
    use std::time::Duration;

    /// The form's name, for messages.
    pub const NAME: &str = "blocking";

    /// The scenario has already run: `#[form]` made it a blocking call.
    pub fn run<T>(t: T) -> T {
        t
    }

    /// A concurrent part of a scenario.
    pub struct Task<T>(std::thread::JoinHandle<T>);

    impl<T> Task<T> {
        /// Waits for it; its panic is the scenario's.
        pub fn join(self) -> T {
            match self.0.join() {
                Ok(t) => t,
                Err(e) => std::panic::resume_unwind(e),
            }
        }

        /// Whether it has ended.
        pub fn is_finished(&self) -> bool {
            self.0.is_finished()
        }
    }

    /// Starts `f` on a thread (`spawn(move || async move { .. })` without `async`).
    pub fn spawn<F, T>(f: F) -> Task<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        Task(std::thread::spawn(f))
    }

    /// Sleeps.
    pub fn sleep(d: Duration) {
        std::thread::sleep(d)
    }

    /// The call's result: a blocking call has already returned (its own deadline is
    /// what bounds it; `within(d, call).await` without `.await`).
    pub fn within<T>(_: Duration, t: T) -> Option<T> {
        Some(t)
    }
}

/// Helpers of every scenario that do not wait on a session.
#[allow(dead_code)]
mod common {
    use std::time::Duration;
    use zk_recipes_testing::TestServer;

    /// The binary's shared real ZooKeeper 3.8, under a chroot of the test's own
    /// (`/t/<module>-<form>-<test>`, in the connect string): for a scenario that only
    /// connects. One that stops, kills, restarts or pauses the server, reads its
    /// server-wide counters or needs options of its own takes [`own_server`]
    /// (docs/testing.md, "Real servers: shared, or the test's own").
    pub fn server() -> TestServer {
        TestServer::shared().expect("the shared real ZooKeeper")
    }

    /// A real ZooKeeper 3.8 of the test's own, with the shared one's options (no
    /// `fsync` per transaction: [`zk_recipes_testing::shared_options`]).
    pub fn own_server() -> TestServer {
        TestServer::start_with(zk_recipes_testing::shared_options()).expect("a real ZooKeeper")
    }

    /// The scenarios' client options (one type in both forms: the surface's): 6 s
    /// sessions renewed on expiry, 10 s to connect, and a short call timeout — raw
    /// calls answer fast; recipe waits must not use it.
    pub fn options() -> zk_recipes_tokio::Options {
        zk_recipes_tokio::Options::default()
            .session_timeout(Duration::from_secs(6))
            .renew_on_expiry(true)
            .connect_timeout(Duration::from_secs(10))
            .call_timeout(Duration::from_secs(1))
    }
}

/// Helpers of every scenario that wait on a session, in both forms.
#[allow(dead_code)]
mod shared {
    pub mod tokio_form {
        #[allow(unused_imports)]
        use crate::tokio_rt::*;
        use zk_recipes_macros::asynchronous as form;
        use zk_recipes_tokio as zk;
        include!("shared.rs");
    }
    pub mod blocking_form {
        #[allow(unused_imports)]
        use crate::blocking_rt::*;
        use zk_recipes_blocking as zk;
        use zk_recipes_macros::blocking as form;
        include!("shared.rs");
    }
}

/// What the forms do differently because the surface does by design (its
/// `#[only_async]` / `#[only_blocking]` items): the work `Candidate::lead` runs is a
/// future dropped when leadership goes (tokio) or a closure on the caller's thread
/// that must look at `is_leader()` (blocking). `only::` in a scenario is its form's.
#[allow(dead_code)]
mod only {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// What a `lead()` work run reports.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Run {
        /// The work started with this token.
        Started(&'static str, i64),
        /// The work returned by itself (asked to finish).
        Finished(&'static str, i64),
        /// The work was stopped because leadership went: dropped (tokio) or saw
        /// `is_leader() == false` (blocking).
        Stopped(&'static str, i64),
    }

    /// The leader's work in the `lead()` scenarios: runs until asked to finish
    /// (`finish` is consumed) or until leadership goes; logs what happened.
    #[derive(Clone)]
    pub struct Work {
        pub name: &'static str,
        pub log: Arc<Mutex<Vec<Run>>>,
        pub finish: Arc<AtomicBool>,
    }

    impl Work {
        fn push(&self, r: Run) {
            self.log.lock().unwrap().push(r);
        }
    }

    pub mod tokio_form {
        use super::*;
        use zk_recipes_tokio as zk;

        /// Logs `Stopped` when the work future is dropped before it finished.
        struct StopGuard(Option<(Work, i64)>);

        impl Drop for StopGuard {
            fn drop(&mut self) {
                if let Some((w, token)) = self.0.take() {
                    w.push(Run::Stopped(w.name, token));
                }
            }
        }

        /// `c.lead(requeue, ..)` with `work` as the work.
        pub async fn lead_work(
            c: &mut zk::Candidate,
            requeue: bool,
            work: Work,
        ) -> Result<(), zk::Error> {
            c.lead(requeue, |token| {
                let w = work.clone();
                async move {
                    w.push(Run::Started(w.name, token));
                    let mut guard = StopGuard(Some((w.clone(), token)));
                    loop {
                        if w.finish.swap(false, Ordering::SeqCst) {
                            guard.0 = None;
                            w.push(Run::Finished(w.name, token));
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
            .await
        }
    }

    pub mod blocking_form {
        use super::*;
        use zk_recipes_blocking as zk;

        /// `c.lead(requeue, ..)` with `work` as the work.
        pub fn lead_work(
            c: &mut zk::Candidate,
            requeue: bool,
            work: Work,
        ) -> Result<(), zk::Error> {
            c.lead(requeue, |c, token| {
                work.push(Run::Started(work.name, token));
                loop {
                    if !c.is_leader() {
                        work.push(Run::Stopped(work.name, token));
                        return;
                    }
                    if work.finish.swap(false, Ordering::SeqCst) {
                        work.push(Run::Finished(work.name, token));
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        }
    }
}

forms!(barrier_adapters, "barrier_adapters.rs");
forms!(both_adapters, "both_adapters.rs");
forms!(burst, "burst.rs");
forms!(cache_adapters, "cache_adapters.rs");
forms!(config_adapters, "config_adapters.rs");
forms!(default_acl_both, "default_acl_both.rs");
forms!(delay_queue_adapters, "delay_queue_adapters.rs");
forms!(discovery_adapters, "discovery_adapters.rs");
forms!(election_both, "election_both.rs");
forms!(embedded_faults, "embedded_faults.rs");
forms!(group_rendezvous, "group_rendezvous.rs");
forms!(inspect_adapters, "inspect_adapters.rs");
forms!(lease_adapters, "lease_adapters.rs");
mod lock_many_waiters;
forms!(multi_lock_adapters, "multi_lock_adapters.rs");
forms!(misbehaving, "misbehaving.rs");
forms!(naming_adapters, "naming_adapters.rs");
mod nemesis;
forms!(nemesis_clients, "nemesis_clients.rs");
forms!(partitioner_adapters, "partitioner_adapters.rs");
forms!(queue_both_adapters, "queue_both_adapters.rs");
forms!(reconfig_both, "reconfig_both.rs");
forms!(semaphore_adapters, "semaphore_adapters.rs");
mod tokio_only;
// TLS: the adapters' feature `tls` (the root's dev-dependencies turn it on).
forms!(read_only_both, "read_only_both.rs");
forms!(sasl_both, "sasl_both.rs");
forms!(tls_both, "tls_both.rs");
forms!(ttl_node_adapters, "ttl_node_adapters.rs");
forms!(two_phase_adapters, "two_phase_adapters.rs");
forms!(value_adapters, "value_adapters.rs");
forms!(watch_node, "watch_node.rs");

/// Read-only mode in both forms on one ensemble (a start costs ~8 s): the tokio form,
/// then the blocking one; each prints its figures for the note.
#[test]
fn read_only_mode_on_a_partitioned_ensemble() {
    let mut ensemble =
        zk_recipes_testing::TestEnsemble::start_with(zk_recipes_testing::EnsembleOptions {
            read_only: true,
            ..Default::default()
        })
        .expect("a three-server ensemble in read-only mode");
    read_only_both::tokio_form::partition(&mut ensemble, "/ro-tokio");
    read_only_both::blocking_form::partition(&mut ensemble, "/ro-blocking");
}
