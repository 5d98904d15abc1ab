//! The sans-IO client: a [`Session`](crate::session::Session) plus the recipes it hosts. It is the only type
//! adapters drive.
//!
//! It hosts *any* [`Recipe`](crate::recipe::Recipe) (the lock, the path helpers, or one written outside this
//! crate) through one path: [`add`](Client::add) returns a typed [`RecipeHandle`];
//! [`command`](Client::command) runs a method on it; its events come out of
//! [`poll_event`](Client::poll_event) as [`ClientEvent::Recipe`] (type-erased, see
//! [`AnyEvent`](crate::recipe::AnyEvent)) and, once it has finished, [`ClientEvent::RecipeDone`]. When a recipe
//! finishes, the client forgets every watch registration it made.
//!
//! # Driving it (the adapters do exactly this)
//!
//! ```text
//! loop {
//!     feed one input: handle_connected / handle_bytes / handle_disconnect / handle_timeout,
//!                     or a command: submit / add / command / abandon / close
//!     drain outputs, in order, until each is empty:
//!         poll_transport  -> dial a host / close the socket
//!         poll_transmit   -> write these bytes (keep reading while a write waits)
//!         poll_event      -> replies, watch events, session state changes, recipe events
//!     sleep until poll_timeout() or the next input
//! }
//! ```
//!
//! ```
//! use zk_recipes::client::{Client, Options};
//! use zk_recipes::session::Transport;
//! use zk_recipes::time::Instant;
//!
//! let mut client = Client::new(Options::new("127.0.0.1:2181").unwrap(), Instant::ZERO);
//! assert_eq!(client.poll_transport(), Some(Transport::Connect { host: 0 }));
//! assert_eq!(client.host(0), "127.0.0.1:2181");
//! let op = client.submit(Instant::ZERO, zk_recipes::client::ops::get_data("/config", true)).unwrap();
//! // ... drive the socket; the reply arrives as ClientEvent::Session(SessionEvent::Reply { .. })
//! # let _ = op;
//! ```

//!
//! # Modules
//!
//! | module | what |
//! |---|---|
//! | `options` | [`Options`]: the session settings a client starts with |
//! | `hosting` | [`Client`]: the session and the hosted recipes, the routing of replies, watch events and session changes to the recipe that asked |
//! | `status` | [`Status`]: what the session's state changes mean for applications |
//! | `routes` | [`Routes`]: the path between handles and the core for an adapter — the [`Command`]s a handle sends (a typed [`RecipeCommand`] among them) and the delivery of what comes back to their channels ([`Sink`]) |
//! | [`ops`] | request builders and reply readers of the raw API |

mod hosting;
pub mod ops;
mod options;
mod routes;
mod status;

pub use crate::error::Error;
pub use hosting::{Client, ClientEvent, RecipeHandle, RecipeId};
pub use options::Options;
pub use routes::{Command, RecipeCommand, Routes, Sink, WatchMode};
pub use status::Status;
