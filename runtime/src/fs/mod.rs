//! Tokio's `fs`: files and directories, on Volt's blocking pool.
//!
//! ```
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let dir = std::env::temp_dir().join(format!("volt-fs-example-{}", std::process::id()));
//!     volt::fs::create_dir_all(&dir).await?;
//!     let path = dir.join("hello.txt");
//!     volt::fs::write(&path, "hello, file").await?;
//!     assert_eq!(volt::fs::read_to_string(&path).await?, "hello, file");
//!     volt::fs::remove_dir_all(&dir).await
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Operating systems offer no readiness-based file I/O, so, as Tokio's does, every call
//! here runs the matching `std::fs` call on the runtime's blocking pool
//! ([`spawn_blocking`](crate::task::spawn_blocking)) and awaits it. While a task waits,
//! the console names the operation and its path (`fs read /etc/hosts`).
//!
//! Each function must be called inside a Volt runtime (a task or `Runtime::block_on`),
//! and panics outside one, as Tokio's do.

mod file;
mod open_options;
mod read_dir;

pub use file::{File, FileTimes};
pub use open_options::OpenOptions;
pub use read_dir::{read_dir, DirEntry, ReadDir};

use crate::io::wait_label::{path_bytes, Labelled, StackLabel};
use std::fs::{Metadata, Permissions};
use std::io;
use std::path::{Path, PathBuf};

/// The label `fs <op> <path>`.
fn label(op: &str, path: &Path) -> StackLabel {
    StackLabel::new(&[b"fs ", op.as_bytes(), b" ", path_bytes(path)])
}

/// Run `f` with an owned copy of `path` on the blocking pool, the wait named `fs <op>
/// <path>`.
async fn on_pool<T, F>(op: &str, path: &Path, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce(PathBuf) -> io::Result<T> + Send + 'static,
{
    let owned = path.to_owned();
    Labelled::spawn(label(op, path), move || f(owned)).await
}

/// Run `f` with owned copies of two paths, the wait named after the first.
async fn on_pool2<T, F>(op: &str, from: &Path, to: &Path, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce(PathBuf, PathBuf) -> io::Result<T> + Send + 'static,
{
    let (a, b) = (from.to_owned(), to.to_owned());
    Labelled::spawn(label(op, from), move || f(a, b)).await
}

/// Read the whole file at `path` (`std::fs::read`).
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    on_pool("read", path.as_ref(), std::fs::read).await
}

/// Read the whole file at `path` as UTF-8 (`std::fs::read_to_string`); invalid UTF-8 is
/// an `InvalidData` error.
pub async fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    on_pool("read", path.as_ref(), std::fs::read_to_string).await
}

/// Write `contents` as the whole file at `path`, creating it or truncating it
/// (`std::fs::write`).
pub async fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    let contents = contents.as_ref().to_owned();
    on_pool("write", path.as_ref(), move |p| std::fs::write(p, contents)).await
}

/// Create a directory (`std::fs::create_dir`); its parent must exist.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    on_pool("create_dir", path.as_ref(), std::fs::create_dir).await
}

/// Create a directory and every missing parent (`std::fs::create_dir_all`).
pub async fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    on_pool("create_dir_all", path.as_ref(), std::fs::create_dir_all).await
}

/// Remove a file (`std::fs::remove_file`).
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    on_pool("remove_file", path.as_ref(), std::fs::remove_file).await
}

/// Remove an empty directory (`std::fs::remove_dir`).
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    on_pool("remove_dir", path.as_ref(), std::fs::remove_dir).await
}

/// Remove a directory and everything in it (`std::fs::remove_dir_all`).
pub async fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    on_pool("remove_dir_all", path.as_ref(), std::fs::remove_dir_all).await
}

/// Rename a file or directory, replacing `to` if it exists (`std::fs::rename`).
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    on_pool2("rename", from.as_ref(), to.as_ref(), std::fs::rename).await
}

/// The metadata of `path`, following symbolic links (`std::fs::metadata`).
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    on_pool("metadata", path.as_ref(), std::fs::metadata).await
}

/// The metadata of `path` itself, not following a symbolic link
/// (`std::fs::symlink_metadata`).
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    on_pool("symlink_metadata", path.as_ref(), std::fs::symlink_metadata).await
}

/// Copy the contents and permissions of the file `from` to `to`, returning the number of
/// bytes copied (`std::fs::copy`).
pub async fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    on_pool2("copy", from.as_ref(), to.as_ref(), std::fs::copy).await
}

/// Make `dst` a new hard link to the file `src` (`std::fs::hard_link`).
pub async fn hard_link(src: impl AsRef<Path>, dst: impl AsRef<Path>) -> io::Result<()> {
    on_pool2("hard_link", src.as_ref(), dst.as_ref(), std::fs::hard_link).await
}

/// Make `dst` a symbolic link to `src` (`std::os::unix::fs::symlink`).
#[cfg(unix)]
pub async fn symlink(src: impl AsRef<Path>, dst: impl AsRef<Path>) -> io::Result<()> {
    on_pool2("symlink", src.as_ref(), dst.as_ref(), std::os::unix::fs::symlink).await
}

/// The absolute form of `path`, with every symbolic link resolved
/// (`std::fs::canonicalize`).
pub async fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    on_pool("canonicalize", path.as_ref(), std::fs::canonicalize).await
}

/// Whether `path` exists: `Ok(false)` for a missing path or a broken symbolic link, an
/// error when that cannot be known (a directory without permission to search, say)
/// (`std::fs::exists`).
pub async fn try_exists(path: impl AsRef<Path>) -> io::Result<bool> {
    on_pool("try_exists", path.as_ref(), |p| p.try_exists()).await
}

/// Change the permissions of `path` (`std::fs::set_permissions`).
pub async fn set_permissions(path: impl AsRef<Path>, perm: Permissions) -> io::Result<()> {
    on_pool("set_permissions", path.as_ref(), move |p| std::fs::set_permissions(p, perm)).await
}

/// What the symbolic link `path` points to (`std::fs::read_link`).
pub async fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    on_pool("read_link", path.as_ref(), std::fs::read_link).await
}

/// A builder for creating directories with options (recursive, mode), as
/// `std::fs::DirBuilder`; `create` runs on the blocking pool.
#[derive(Debug, Default)]
pub struct DirBuilder {
    recursive: bool,
    #[cfg(unix)]
    mode: Option<u32>,
}

impl DirBuilder {
    /// Options off: the parent must exist, the mode is the default (`0o777` before the
    /// umask).
    pub fn new() -> DirBuilder {
        DirBuilder::default()
    }

    /// Create missing parents too (and succeed if the directory exists).
    pub fn recursive(&mut self, recursive: bool) -> &mut DirBuilder {
        self.recursive = recursive;
        self
    }

    /// The permission bits of the directories made (before the umask).
    #[cfg(unix)]
    pub fn mode(&mut self, mode: u32) -> &mut DirBuilder {
        self.mode = Some(mode);
        self
    }

    /// Create the directory at `path`.
    pub async fn create(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(self.recursive);
        #[cfg(unix)]
        if let Some(mode) = self.mode {
            std::os::unix::fs::DirBuilderExt::mode(&mut b, mode);
        }
        on_pool("create_dir", path.as_ref(), move |p| b.create(p)).await
    }
}
