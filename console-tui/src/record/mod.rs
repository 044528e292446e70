//! Recordings: `--record FILE` writes every update it receives; `--replay FILE` plays
//! them back.
//!
//! # Format
//! The 8 bytes `VOLTREC2`, then one frame per `volt.console.v1.Update`: the 4 bytes
//! `VUPD`, the protobuf's length (u32, little-endian), the CRC-32 (IEEE) of the protobuf
//! (u32, little-endian), then the protobuf itself. Updates carry their own uptime, which
//! paces the replay.
//!
//! # Reading
//! [`RecordReader`] checks the header before anything else (so `--replay /dev/zero` fails
//! at once) and then reads one frame at a time: memory holds one update, whatever the
//! file's size. A frame whose checksum or length is wrong is skipped and counted, and
//! reading goes on from the next `VUPD` marker after its start, so one bad byte costs one
//! update, not the rest of the file. A file cut short (the recorder was killed
//! mid-write) replays up to its last whole update.
//!
//! Recordings of the first format (`VOLTREC1`: varint-length-delimited updates, no
//! checksum) still play, streamed the same way; having no frame markers, they stop at
//! the first update that does not decode.

mod player;

pub use player::Player;

use prost::Message;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use volt_console_proto as proto;

/// The first bytes of a recording.
pub const MAGIC: &[u8; 8] = b"VOLTREC2";
/// The first bytes of a recording in the first format (read, never written).
pub const MAGIC_V1: &[u8; 8] = b"VOLTREC1";
/// The start of every frame.
pub const FRAME_MARKER: &[u8; 4] = b"VUPD";
/// The largest update a frame may hold; a longer length is corruption.
pub const MAX_FRAME: u32 = 256 << 20;

/// CRC-32 (IEEE 802.3, reflected, as zlib and PNG use), table-driven.
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    !data.iter().fold(!0u32, |c, &b| TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8))
}

/// One update as a frame: marker, length, checksum, protobuf.
pub fn frame(u: &proto::Update) -> Vec<u8> {
    let body = u.encode_to_vec();
    let mut out = Vec::with_capacity(12 + body.len());
    out.extend_from_slice(FRAME_MARKER);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Appends updates to a recording file.
pub struct RecordWriter {
    out: BufWriter<File>,
    written: u64,
}

impl RecordWriter {
    /// Create (or truncate) `path` and write the header.
    pub fn create(path: &Path) -> io::Result<RecordWriter> {
        let f = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create the recording {}: {e}", path.display())))?;
        let mut out = BufWriter::new(f);
        out.write_all(MAGIC)?;
        out.flush()?;
        Ok(RecordWriter { out, written: 0 })
    }

    /// Append one update and flush it, so a killed recorder loses at most the update it
    /// was writing.
    pub fn write(&mut self, u: &proto::Update) -> io::Result<()> {
        self.out.write_all(&frame(u))?;
        self.out.flush()?;
        self.written += 1;
        Ok(())
    }

    /// Updates written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// Reads a recording one update at a time.
pub struct RecordReader {
    input: BufReader<File>,
    version: Version,
    /// Bytes read so far (the input's position).
    pos: u64,
    /// Updates returned so far.
    pub replayed: u64,
    /// Updates skipped because their frame was damaged.
    pub skipped: u64,
    /// Bytes at the end that did not form a whole update (0 for a complete file).
    pub truncated_bytes: u64,
    done: bool,
    /// Count frames without reading their updates (see [`count_updates`]).
    skim: bool,
    file_len: u64,
}

/// What reading one frame found.
enum Frame {
    Update(Box<proto::Update>),
    /// A damaged frame starting at this position; `short`: its length runs past the end
    /// of the file (a cut-off last frame, unless a later frame turns up).
    Bad {
        start: u64,
        short: bool,
    },
    /// The end of the file, with this many bytes of a cut-off frame.
    End(u64),
}

impl RecordReader {
    /// Open `path` and check its header: a file that is not a recording is an error here,
    /// after reading 8 bytes.
    pub fn open(path: &Path) -> io::Result<RecordReader> {
        let what =
            |e: io::Error| io::Error::new(e.kind(), format!("cannot read the recording {}: {e}", path.display()));
        let mut input = BufReader::new(File::open(path).map_err(what)?);
        let mut head = [0u8; 8];
        let mut got = 0;
        while got < head.len() {
            match input.read(&mut head[got..]).map_err(what)? {
                0 => break,
                n => got += n,
            }
        }
        let version = match &head {
            h if got == 8 && h == MAGIC => Version::V2,
            h if got == 8 && h == MAGIC_V1 => Version::V1,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a volt-console recording (no VOLTREC2 or VOLTREC1 header)", path.display()),
                ))
            }
        };
        let file_len = input.get_ref().metadata().map_or(u64::MAX, |m| m.len());
        Ok(RecordReader {
            input,
            version,
            pos: 8,
            replayed: 0,
            skipped: 0,
            truncated_bytes: 0,
            done: false,
            skim: false,
            file_len,
        })
    }

    /// Read up to `buf.len()` bytes; fewer only at the end of the file.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pos += got as u64;
        Ok(got)
    }

    fn seek_to(&mut self, pos: u64) -> io::Result<()> {
        self.input.seek(SeekFrom::Start(pos))?;
        self.pos = pos;
        Ok(())
    }

    /// Move to the next frame marker (the input then stands just after it). `Ok(false)`:
    /// the file ended first.
    fn find_marker(&mut self) -> io::Result<bool> {
        let mut window = [0u8; 4];
        let mut have = 0;
        let mut b = [0u8; 1];
        loop {
            if self.fill(&mut b)? == 0 {
                return Ok(false);
            }
            if have < 4 {
                window[have] = b[0];
                have += 1;
            } else {
                window.rotate_left(1);
                window[3] = b[0];
            }
            if have == 4 && &window == FRAME_MARKER {
                return Ok(true);
            }
        }
    }

    fn frame_v2(&mut self) -> io::Result<Frame> {
        let start = self.pos;
        let mut head = [0u8; 12];
        let got = self.fill(&mut head)?;
        if got < head.len() {
            return Ok(Frame::End(got as u64));
        }
        if &head[..4] != FRAME_MARKER {
            return Ok(Frame::Bad { start, short: false });
        }
        let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
        let sum = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if len > MAX_FRAME {
            return Ok(Frame::Bad { start, short: false });
        }
        if self.skim {
            // Trust the length (no checksum): a count for the status line, not a replay.
            let next = self.pos + u64::from(len);
            if next > self.file_len {
                return Ok(Frame::Bad { start, short: true });
            }
            self.seek_to(next)?;
            return Ok(Frame::Update(Box::default()));
        }
        let mut body = vec![0u8; len as usize];
        let got = self.fill(&mut body)?;
        if got < body.len() {
            // A length damaged into one longer than the rest of the file reads like a
            // cut-off end: look for a later frame before calling it one.
            return Ok(Frame::Bad { start, short: true });
        }
        if crc32(&body) != sum {
            return Ok(Frame::Bad { start, short: false });
        }
        match proto::Update::decode(&body[..]) {
            Ok(u) => Ok(Frame::Update(Box::new(u))),
            Err(_) => Ok(Frame::Bad { start, short: false }),
        }
    }

    fn frame_v1(&mut self) -> io::Result<Frame> {
        let start = self.pos;
        let mut len: u64 = 0;
        let mut b = [0u8; 1];
        for i in 0..10 {
            if self.fill(&mut b)? == 0 {
                return Ok(Frame::End(self.pos - start));
            }
            len |= u64::from(b[0] & 0x7f) << (7 * i);
            if b[0] & 0x80 == 0 {
                break;
            }
        }
        if len > u64::from(MAX_FRAME) {
            return Ok(Frame::End(self.pos - start));
        }
        let mut body = vec![0u8; len as usize];
        let got = self.fill(&mut body)?;
        if got < body.len() {
            return Ok(Frame::End(self.pos - start));
        }
        match proto::Update::decode(&body[..]) {
            Ok(u) => Ok(Frame::Update(Box::new(u))),
            // No markers to find the next update by: the rest is lost.
            Err(_) => Ok(Frame::End(self.pos - start)),
        }
    }

    /// The next update, skipping damaged ones; `Ok(None)` at the end.
    pub fn next_update(&mut self) -> io::Result<Option<proto::Update>> {
        while !self.done {
            let frame = match self.version {
                Version::V2 => self.frame_v2()?,
                Version::V1 => self.frame_v1()?,
            };
            match frame {
                Frame::Update(u) => {
                    self.replayed += 1;
                    return Ok(Some(*u));
                }
                Frame::End(rest) => {
                    self.truncated_bytes = rest;
                    self.done = true;
                }
                Frame::Bad { start, short } => {
                    // Start over just past the bad frame's first byte, and go on from the
                    // next marker: a damaged length may have swallowed later frames.
                    self.seek_to(start + 1)?;
                    if self.find_marker()? {
                        self.skipped += 1;
                        let at = self.pos - FRAME_MARKER.len() as u64;
                        self.seek_to(at)?;
                    } else if short {
                        // No later frame: the last one was cut off.
                        self.truncated_bytes = self.pos - start;
                        self.done = true;
                    } else {
                        // No later frame: the damage ran to the end of the file.
                        self.skipped += 1;
                        self.done = true;
                    }
                }
            }
        }
        Ok(None)
    }
}

/// A recording read back whole (for tests and small files; replay streams with
/// [`RecordReader`]).
#[derive(Debug)]
pub struct Recording {
    pub updates: Vec<proto::Update>,
    /// Updates skipped because their frame was damaged.
    pub skipped: u64,
    /// Bytes at the end that did not form a whole update (0 for a complete file).
    pub truncated_bytes: u64,
}

/// Read a whole recording.
pub fn read(path: &Path) -> io::Result<Recording> {
    let mut r = RecordReader::open(path)?;
    let mut updates = Vec::new();
    while let Some(u) = r.next_update()? {
        updates.push(u);
    }
    Ok(Recording { updates, skipped: r.skipped, truncated_bytes: r.truncated_bytes })
}

/// About how many updates `path` holds, reading only the frames' headers (for the replay's
/// "position/total"; damaged frames can make it a little off).
pub fn count_updates(path: &Path) -> io::Result<u64> {
    let mut r = RecordReader::open(path)?;
    r.skim = true;
    while r.next_update()?.is_some() {}
    Ok(r.replayed)
}
