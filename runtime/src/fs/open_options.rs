//! `OpenOptions`: how a file is opened, as `std::fs::OpenOptions`, opened on the pool.

use super::{label, File};
use crate::io::wait_label::Labelled;
use std::io;
use std::path::Path;

/// Options for opening a file (read, write, append, truncate, create, create_new, and on
/// Unix the mode and extra `open(2)` flags), as `std::fs::OpenOptions`; `open` runs on
/// the blocking pool.
#[derive(Clone, Debug)]
pub struct OpenOptions(std::fs::OpenOptions);

/// [`OpenOptions::new`]: every option off.
impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Every option off: set at least one of `read`, `write` or `append` before opening.
    pub fn new() -> OpenOptions {
        OpenOptions(std::fs::OpenOptions::new())
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.0.read(read);
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.0.write(write);
        self
    }

    /// Open for appending: every write goes to the end of the file.
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.0.append(append);
        self
    }

    /// Truncate the file to length 0 when it is opened (needs `write`).
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.0.truncate(truncate);
        self
    }

    /// Create the file if it does not exist (needs `write` or `append`).
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.0.create(create);
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists (atomically).
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.0.create_new(create_new);
        self
    }

    /// The permission bits of a file this call creates (before the umask).
    #[cfg(unix)]
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        std::os::unix::fs::OpenOptionsExt::mode(&mut self.0, mode);
        self
    }

    /// Extra flags for `open(2)` (`libc::O_*`).
    #[cfg(unix)]
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut self.0, flags);
        self
    }

    /// Open the file at `path` with these options.
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref();
        let (opts, owned) = (self.0.clone(), path.to_owned());
        let std = Labelled::spawn(label("open", path), move || opts.open(owned)).await?;
        Ok(File::from_std_labelled(std, path))
    }

    /// The `std::fs::OpenOptions` inside.
    pub fn as_std(&self) -> &std::fs::OpenOptions {
        &self.0
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    fn from(o: std::fs::OpenOptions) -> OpenOptions {
        OpenOptions(o)
    }
}
