//! [`InstanceError`]: why instance data could not be read (a leaf the JSON reader and
//! the instance both use).

use core::fmt;

/// Why instance data could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InstanceError {
    /// Not the JSON expected: what was expected at which byte.
    Syntax {
        /// Byte offset.
        at: usize,
        /// What was expected there.
        what: &'static str,
    },
    /// A field holds a value of the wrong kind (`serviceType` not a known name, ...).
    Field(&'static str),
    /// A required field (`name`, `id`) is missing.
    Missing(&'static str),
}

impl fmt::Display for InstanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceError::Syntax { at, what } => write!(f, "expected {what} at byte {at}"),
            InstanceError::Field(n) => write!(f, "field `{n}` holds a value of the wrong kind"),
            InstanceError::Missing(n) => write!(f, "required field `{n}` is missing"),
        }
    }
}
