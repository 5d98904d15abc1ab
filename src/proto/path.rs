//! Path rules (reference §11.2) and chroot handling (§11.1).
//!
//! ZooKeeper leaves most validation to the client: a bad path is rejected here, before
//! a byte is sent.

use alloc::string::String;
use core::fmt;

/// Why a path is not a valid ZooKeeper path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty.
    Empty,
    /// The path does not start with `/`.
    NotAbsolute,
    /// The path ends with `/` (only the root and sequential prefixes may).
    TrailingSlash,
    /// The path has an empty segment (`//`).
    EmptySegment,
    /// The path has a `.` or `..` segment.
    RelativeSegment,
    /// The path contains a character ZooKeeper forbids, at this byte offset.
    InvalidChar {
        /// Byte offset of the character.
        offset: usize,
        /// The character.
        ch: char,
    },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Empty => f.write_str("path is empty"),
            PathError::NotAbsolute => f.write_str("path must start with '/'"),
            PathError::TrailingSlash => f.write_str("path must not end with '/'"),
            PathError::EmptySegment => f.write_str("path has an empty segment ('//')"),
            PathError::RelativeSegment => f.write_str("path has a '.' or '..' segment"),
            PathError::InvalidChar { offset, ch } => {
                write!(
                    f,
                    "path has the invalid character {:?} (U+{:04X}) at byte {offset}",
                    ch, *ch as u32
                )
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for PathError {}

fn forbidden(c: char) -> bool {
    matches!(c as u32, 0x0000..=0x001f | 0x007f..=0x009f | 0xd800..=0xf8ff | 0xfff0..=0xffff)
        // Java checks UTF-16 units: a non-BMP character is a surrogate pair, so forbidden.
        || (c as u32) > 0xffff
}

/// Checks a node path by Java's `PathUtils.validatePath` rules.
///
/// ```
/// use zk_recipes::proto::{validate_path, PathError};
/// assert!(validate_path("/app/lock").is_ok());
/// assert!(validate_path("/").is_ok());
/// assert_eq!(validate_path("/a/"), Err(PathError::TrailingSlash));
/// assert_eq!(validate_path("/a/../b"), Err(PathError::RelativeSegment));
/// ```
pub fn validate_path(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(PathError::TrailingSlash);
    }
    for (offset, ch) in path.char_indices() {
        if forbidden(ch) {
            return Err(PathError::InvalidChar { offset, ch });
        }
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return Err(PathError::EmptySegment),
            "." | ".." => return Err(PathError::RelativeSegment),
            _ => {}
        }
    }
    Ok(())
}

/// Checks the requested path of a sequential create, which may end in `/` (the server
/// appends the suffix): Java validates `path + "1"`.
pub fn validate_sequential_prefix(path: &str) -> Result<(), PathError> {
    let mut probe = String::with_capacity(path.len() + 1);
    probe.push_str(path);
    probe.push('1');
    validate_path(&probe)
}

/// The parent of a path (`/a/b` → `/a`, `/a` → `/`); `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    match path.rfind('/') {
        _ if path == "/" => None,
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// A chroot: a path prefix applied to every outgoing path and stripped from every
/// returned path. The server knows nothing of it.
///
/// ```
/// use zk_recipes::proto::Chroot;
/// let c = Chroot::new("/app").unwrap();
/// assert_eq!(c.prefix("/lock"), "/app/lock");
/// assert_eq!(c.prefix("/"), "/app");
/// assert_eq!(c.strip("/app/lock"), "/lock");
/// assert_eq!(c.strip("/app"), "/");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Chroot(Option<String>);

impl Chroot {
    /// No chroot.
    pub const NONE: Chroot = Chroot(None);

    /// A chroot at `root` (validated; `/` means none).
    pub fn new(root: &str) -> Result<Chroot, PathError> {
        validate_path(root)?;
        Ok(if root == "/" {
            Chroot(None)
        } else {
            Chroot(Some(root.into()))
        })
    }

    /// The chroot path, if any.
    pub fn root(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// Client path → server path.
    pub fn prefix(&self, path: &str) -> String {
        match &self.0 {
            None => path.into(),
            Some(root) if path == "/" => root.clone(),
            Some(root) => {
                let mut s = String::with_capacity(root.len() + path.len());
                s.push_str(root);
                s.push_str(path);
                s
            }
        }
    }

    /// Server path → client path. Paths outside the chroot are returned unchanged.
    pub fn strip(&self, path: &str) -> String {
        match &self.0 {
            None => path.into(),
            Some(root) => match path.strip_prefix(root.as_str()) {
                Some("") => "/".into(),
                Some(rest) if rest.starts_with('/') => rest.into(),
                _ => path.into(),
            },
        }
    }
}
