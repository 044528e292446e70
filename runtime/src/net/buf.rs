//! Reads into the spare room of a `bytes::BufMut` (Tokio's `try_read_buf`, `recv_buf`
//! and the like): the kernel writes straight into the buffer's uninitialized capacity,
//! which is then counted as filled.

use bytes::BufMut;
use std::io;
use std::os::fd::RawFd;

/// Run `read` on the buffer's next chunk of spare room (its address and length; the
/// memory may be uninitialized, so only the kernel writes it), then add the bytes it
/// wrote to the buffer.
fn read_into<B: BufMut + ?Sized, A>(
    buf: &mut B,
    read: impl FnOnce(*mut u8, usize) -> io::Result<(usize, A)>,
) -> io::Result<(usize, A)> {
    let chunk = buf.chunk_mut();
    let (ptr, len) = (chunk.as_mut_ptr(), chunk.len());
    let (n, a) = read(ptr, len)?;
    assert!(n <= len, "the kernel wrote past the chunk it was given");
    // SAFETY: the kernel initialized `n` bytes from the chunk's start (checked to be
    // within it).
    unsafe { buf.advance_mut(n) };
    Ok((n, a))
}

fn check(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `recv(2)` on `fd` into `buf`'s spare room (for a stream, the same as `read(2)`).
pub(crate) fn recv<B: BufMut + ?Sized>(fd: RawFd, buf: &mut B) -> io::Result<usize> {
    read_into(buf, |ptr, len| {
        // SAFETY: `ptr` is valid for writes of `len` bytes (the chunk `read_into` gave).
        check(unsafe { libc::recv(fd, ptr.cast(), len, 0) }).map(|n| (n, ()))
    })
    .map(|(n, ())| n)
}

/// `read(2)` on `fd` (a pipe, say: `recv` is for sockets only) into `buf`'s spare room.
pub(crate) fn read<B: BufMut + ?Sized>(fd: RawFd, buf: &mut B) -> io::Result<usize> {
    read_into(buf, |ptr, len| {
        // SAFETY: `ptr` is valid for writes of `len` bytes (the chunk `read_into` gave).
        check(unsafe { libc::read(fd, ptr.cast(), len) }).map(|n| (n, ()))
    })
    .map(|(n, ())| n)
}

/// `recvfrom(2)` on an IP socket into `buf`'s spare room, with the sender's address.
pub(crate) fn recv_from_ip<B: BufMut + ?Sized>(fd: RawFd, buf: &mut B) -> io::Result<(usize, std::net::SocketAddr)> {
    read_into(buf, |ptr, len| {
        // SAFETY: all zeroes is a valid `sockaddr_storage` (plain integers and arrays).
        let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut from_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `ptr` is valid for writes of `len` bytes; `from` and `from_len` are
        // live locals of the sizes given.
        let n = check(unsafe { libc::recvfrom(fd, ptr.cast(), len, 0, (&raw mut from).cast(), &raw mut from_len) })?;
        Ok((n, super::socket::from_sockaddr(&from)?))
    })
}

/// `recv_from` on a Unix datagram socket into `buf`'s spare room, with the sender's
/// address. The room is zeroed first (std reads into initialized memory only, and it
/// is std that turns the sender's raw address into a `SocketAddr`).
pub(crate) fn recv_from_unix<B: BufMut + ?Sized>(
    socket: &mio::net::UnixDatagram,
    buf: &mut B,
) -> io::Result<(usize, std::os::unix::net::SocketAddr)> {
    read_into(buf, |ptr, len| {
        // SAFETY: `ptr` is valid for writes of `len` bytes; once zeroed, they are
        // initialized, and nothing else refers to them while the slice lives.
        let room = unsafe {
            ptr.write_bytes(0, len);
            std::slice::from_raw_parts_mut(ptr, len)
        };
        socket.recv_from(room)
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A stand-in for the kernel: writes `data` (as much as fits) at the chunk's start.
    fn fake_read(data: &[u8]) -> impl FnOnce(*mut u8, usize) -> io::Result<(usize, ())> + '_ {
        move |ptr, len| {
            let n = data.len().min(len);
            // SAFETY: `read_into` gives a pointer valid for writes of `len` bytes.
            unsafe { ptr.copy_from_nonoverlapping(data.as_ptr(), n) };
            Ok((n, ()))
        }
    }

    /// The bytes written into the spare room become the buffer's, after what it held,
    /// for a `Vec`, a `BytesMut` and a buffer limited by `BufMut::limit`; an error adds
    /// nothing. (Run under Miri: the writes land in uninitialized capacity.)
    #[test]
    fn bytes_written_into_the_spare_room_are_added() {
        let mut v = b"ab".to_vec();
        v.reserve(8);
        assert_eq!(read_into(&mut v, fake_read(b"cdef")).unwrap().0, 4);
        assert_eq!(v, b"abcdef");

        let mut b = bytes::BytesMut::with_capacity(4);
        assert_eq!(read_into(&mut b, fake_read(b"0123456789")).unwrap().0, 4, "cut to the chunk");
        assert_eq!(&b[..], b"0123");

        let mut full = Vec::new();
        let mut limited = (&mut full).limit(3);
        assert_eq!(read_into(&mut limited, fake_read(b"xyz!")).unwrap().0, 3);
        assert_eq!(full, b"xyz");

        let mut v = Vec::with_capacity(8);
        let e = read_into(&mut v, |_, _| Err::<(usize, ()), _>(io::Error::from(io::ErrorKind::WouldBlock)));
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert!(v.is_empty());
    }

    /// A read that claims more than the chunk it was given is refused (it would mark
    /// bytes nobody wrote as the buffer's).
    #[test]
    #[should_panic(expected = "past the chunk")]
    fn a_read_past_the_chunk_panics() {
        let mut v = Vec::with_capacity(4);
        let _ = read_into(&mut v, |_, len| Ok((len + 1, ())));
    }
}
