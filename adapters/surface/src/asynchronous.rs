//! The async form: every waiting call is an `async fn` (re-exported by `zk-recipes-tokio`).

pub(crate) use zk_recipes_macros::asynchronous as form;
pub(crate) use zk_recipes_macros::drop as only_blocking;
pub(crate) use zk_recipes_macros::keep as only_async;

#[doc(hidden)]
#[path = "rt_tokio.rs"]
pub mod rt;

include!("form.rs");
