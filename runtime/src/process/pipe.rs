//! The parent's ends of a child's stdio pipes, on the reactor (see `io::pipe_end`).

use crate::io::pipe_end::Pipe;
use std::io;
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::process::Stdio;

macro_rules! pipe_type {
    ($name:ident, $std:ty, $interest:expr, $what:literal) => {
        #[doc = concat!("The parent's end of a child's ", $what, ", from `Child::", stringify!($what), "`")]
        /// when the `Command` asked for `Stdio::piped()`: non-blocking, on Volt's reactor.
        pub struct $name(Pipe);

        impl $name {
            /// Take over a std pipe end (made non-blocking and registered with the
            /// current runtime's reactor).
            pub fn from_std(std: $std) -> io::Result<$name> {
                Ok($name(Pipe::new(OwnedFd::from(std), $interest)?))
            }

            /// The descriptor, out of the reactor and blocking again.
            pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
                self.0.into_owned_fd()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.0.raw()).finish()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.0.raw()
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.0.fd()
            }
        }

        /// Hand the pipe to another child (`Command::stdin(stdout_of_first)`): it is
        /// taken out of the reactor and made blocking again.
        impl TryFrom<$name> for Stdio {
            type Error = io::Error;

            fn try_from(p: $name) -> io::Result<Stdio> {
                Ok(Stdio::from(p.0.into_owned_fd()?))
            }
        }
    };
}

pipe_type!(ChildStdin, std::process::ChildStdin, mio::Interest::WRITABLE, "stdin");
pipe_type!(ChildStdout, std::process::ChildStdout, mio::Interest::READABLE, "stdout");
pipe_type!(ChildStderr, std::process::ChildStderr, mio::Interest::READABLE, "stderr");

impl ChildStdout {
    pub(super) fn pipe(&self) -> &Pipe {
        &self.0
    }
}

impl ChildStderr {
    pub(super) fn pipe(&self) -> &Pipe {
        &self.0
    }
}

crate::io::pipe_end::pipe_async_write!(ChildStdin);
crate::io::pipe_end::pipe_async_read!(ChildStdout);
crate::io::pipe_end::pipe_async_read!(ChildStderr);
