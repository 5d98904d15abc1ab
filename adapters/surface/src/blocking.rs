//! The blocking form: every waiting call blocks the calling thread (re-exported by `zk-recipes-blocking`); no tokio.

// A blocking `next()` is the call form here; the event handles are iterators too.
#![allow(clippy::should_implement_trait)]

pub(crate) use zk_recipes_macros::blocking as form;
pub(crate) use zk_recipes_macros::drop as only_async;
pub(crate) use zk_recipes_macros::keep as only_blocking;

#[doc(hidden)]
#[path = "rt_blocking.rs"]
pub mod rt;

include!("form.rs");
