//! The stalls a worker has ended: a ring of fixed records that only the worker writes
//! (at the end of a stalled poll) and any thread reads.
//!
//! Each record is a sequence lock of its own: the writer makes the record's sequence odd,
//! writes the fields, then sets it to `2 * (n + 1)` for the worker's `n`th stall, and
//! publishes the count. A reader of stall `n` copies the record and keeps the copy only if
//! it saw that same even sequence before and after (otherwise a newer stall has taken the
//! slot: the ring keeps the newest [`ENDED_PER_WORKER`]). Every field is an atomic, so a
//! torn copy is discarded, never undefined. Writing a record allocates nothing and takes
//! no lock: the addresses and the name's first bytes are copied into the record itself.
//!
//! The atomics are `crate::loom`'s, and the model `loom_a_record_is_read_whole_or_not_at_all`
//! checks the protocol (under loom `lib.rs` builds this file alone, with smaller records).

use crate::loom::{fence, AtomicU64, AtomicUsize};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

#[cfg(not(loom))]
use super::MAX_FRAMES;
#[cfg(loom)]
const MAX_FRAMES: usize = 2;

/// Ended stalls each worker keeps (the newest). `Telemetry::stalls` shows the newest
/// `STALL_HISTORY` of all workers together.
pub(crate) const ENDED_PER_WORKER: usize = if cfg!(loom) { 2 } else { 32 };
/// Bytes of a task's name a record keeps.
pub(crate) const NAME_BYTES: usize = if cfg!(loom) { 8 } else { 48 };

/// One ended stall's poll, as its worker saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EndedPoll {
    pub(crate) task: u64,
    /// The worker's poll count at that poll.
    pub(crate) poll: u64,
    /// Clock readings at the poll's start and end, and when its stack was taken (0: not).
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) stack_at: u64,
    /// Why there is no stack (`super::MissingStack` as a code; 0: there is one).
    pub(crate) missing: u8,
}

/// One ended stall as read back (see [`Record`] for the stored form).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) poll: EndedPoll,
    /// The stack's addresses, innermost first (empty: none).
    pub(crate) ips: Vec<usize>,
    /// The task's name (at most [`NAME_BYTES`], cut at a character boundary), if it has
    /// one and the worker could read it.
    pub(crate) name: Option<String>,
}

/// The stored form of [`Ended`].
struct Record {
    seq: AtomicU64,
    task: AtomicU64,
    poll: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
    stack_at: AtomicU64,
    /// The missing-stack code (low byte), the frame count (bits 8..16) and the name's
    /// length plus one (bits 16..24; 0: no name).
    lens: AtomicU64,
    ips: [AtomicUsize; MAX_FRAMES],
    name: [AtomicU64; NAME_BYTES / 8],
}

impl Record {
    fn new() -> Record {
        Record {
            seq: AtomicU64::new(0),
            task: AtomicU64::new(0),
            poll: AtomicU64::new(0),
            start: AtomicU64::new(0),
            end: AtomicU64::new(0),
            stack_at: AtomicU64::new(0),
            lens: AtomicU64::new(0),
            ips: std::array::from_fn(|_| AtomicUsize::new(0)),
            name: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// One worker's ended stalls.
pub(crate) struct EndedRing {
    /// Stalls written so far.
    written: AtomicU64,
    records: Box<[Record]>,
}

impl EndedRing {
    pub(crate) fn new() -> EndedRing {
        EndedRing { written: AtomicU64::new(0), records: (0..ENDED_PER_WORKER).map(|_| Record::new()).collect() }
    }

    /// Stalls written so far (the next one's number).
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Acquire)
    }

    /// The worker (the only writer): add a stall. `ips` is copied up to [`MAX_FRAMES`],
    /// `name` up to [`NAME_BYTES`].
    pub(crate) fn push(&self, e: &EndedPoll, ips: &[usize], name: Option<&str>) {
        let n = self.written.load(Relaxed);
        let r = &self.records[(n % ENDED_PER_WORKER as u64) as usize];
        r.seq.store(2 * n + 1, Relaxed);
        fence(Release);
        r.task.store(e.task, Relaxed);
        r.poll.store(e.poll, Relaxed);
        r.start.store(e.start, Relaxed);
        r.end.store(e.end, Relaxed);
        r.stack_at.store(e.stack_at, Relaxed);
        let ips = &ips[..ips.len().min(MAX_FRAMES)];
        for (slot, &ip) in r.ips.iter().zip(ips) {
            slot.store(ip, Relaxed);
        }
        let name = name.map(|s| truncate(s, NAME_BYTES));
        if let Some(s) = name {
            let mut words = [0u64; NAME_BYTES / 8];
            for (i, b) in s.bytes().enumerate() {
                words[i / 8] |= (b as u64) << (8 * (i % 8));
            }
            for (slot, w) in r.name.iter().zip(words) {
                slot.store(w, Relaxed);
            }
        }
        let name_len = name.map_or(0, |s| s.len() as u64 + 1);
        r.lens.store(e.missing as u64 | (ips.len() as u64) << 8 | name_len << 16, Relaxed);
        r.seq.store(2 * n + 2, Release);
        self.written.store(n + 1, Release);
    }

    /// Stall number `n` of this worker, if the ring still holds it whole.
    pub(crate) fn read(&self, n: u64) -> Option<Ended> {
        let r = &self.records[(n % ENDED_PER_WORKER as u64) as usize];
        let want = 2 * n + 2;
        if r.seq.load(Acquire) != want {
            return None;
        }
        let lens = r.lens.load(Relaxed);
        let frames = ((lens >> 8) & 0xff) as usize;
        let name_len = ((lens >> 16) & 0xff) as usize;
        let mut e = Ended {
            poll: EndedPoll {
                task: r.task.load(Relaxed),
                poll: r.poll.load(Relaxed),
                start: r.start.load(Relaxed),
                end: r.end.load(Relaxed),
                stack_at: r.stack_at.load(Relaxed),
                missing: lens as u8,
            },
            ips: r.ips[..frames.min(MAX_FRAMES)].iter().map(|ip| ip.load(Relaxed)).collect(),
            name: None,
        };
        let words: Vec<u64> = r.name.iter().map(|w| w.load(Relaxed)).collect();
        fence(Acquire);
        if r.seq.load(Relaxed) != want {
            return None;
        }
        if name_len > 0 {
            let bytes: Vec<u8> =
                (0..(name_len - 1).min(NAME_BYTES)).map(|i| (words[i / 8] >> (8 * (i % 8))) as u8).collect();
            // The writer cut the name at a character boundary, and the copy is whole.
            e.name = Some(String::from_utf8_lossy(&bytes).into_owned());
        }
        Some(e)
    }

    /// The stalls numbered `from..written` that the ring still holds, oldest first.
    pub(crate) fn read_from(&self, from: u64) -> (Vec<Ended>, u64) {
        let written = self.written();
        let first = from.max(written.saturating_sub(ENDED_PER_WORKER as u64));
        ((first..written).filter_map(|n| self.read(n)).collect(), written)
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_the_ring_keeps_the_newest() {
        let ring = EndedRing::new();
        assert_eq!(ring.read_from(0), (Vec::new(), 0));
        for n in 0..(ENDED_PER_WORKER as u64 + 5) {
            let e = EndedPoll { task: n + 1, poll: 10 * n, start: n, end: n + 100, stack_at: 0, missing: 2 };
            let ips: Vec<usize> = (0..n as usize % 5).collect();
            ring.push(&e, &ips, Some("a task"));
        }
        let (got, written) = ring.read_from(0);
        assert_eq!(written, ENDED_PER_WORKER as u64 + 5);
        assert_eq!(got.len(), ENDED_PER_WORKER, "the oldest five were overwritten");
        assert_eq!(got[0].poll.task, 6);
        let last = got.last().unwrap();
        let p = last.poll;
        assert_eq!((p.task, p.end - p.start, p.missing), (ENDED_PER_WORKER as u64 + 5, 100, 2));
        assert_eq!(last.ips, (0..(ENDED_PER_WORKER + 4) % 5).collect::<Vec<_>>());
        assert_eq!(last.name.as_deref(), Some("a task"));
        assert!(ring.read(0).is_none(), "stall 0 is gone");
        assert_eq!(ring.read_from(written - 2).0.len(), 2);
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary_and_frames_at_the_most() {
        let ring = EndedRing::new();
        let name = "é".repeat(40); // 80 bytes
        let ips: Vec<usize> = (0..MAX_FRAMES + 10).collect();
        ring.push(&EndedPoll::default(), &ips, Some(&name));
        let e = ring.read(0).unwrap();
        assert_eq!(e.name.as_deref(), Some("é".repeat(NAME_BYTES / 2).as_str()));
        assert_eq!(e.ips.len(), MAX_FRAMES);
        ring.push(&EndedPoll::default(), &[], None);
        assert_eq!(ring.read(1).unwrap().name, None);
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc};
    use crate::loom_tests::model_bounded;

    /// Stall `n` as the model's worker writes it: every field says `n`.
    fn stall(n: u64) -> (EndedPoll, [usize; 2]) {
        (EndedPoll { task: n + 1, poll: n, start: 10 * n, end: 10 * n + 5, stack_at: 0, missing: 0 }, [n as usize; 2])
    }

    /// A reader racing the worker (which laps the two-record ring) gets each stall whole,
    /// with its own fields, or not at all; never a mix of two. Bounded to three
    /// preemptions per execution (the whole space takes minutes); with the writer's fence
    /// after the odd sequence taken out, it fails at two.
    #[test]
    fn loom_a_record_is_read_whole_or_not_at_all() {
        model_bounded(3, || {
            let ring = Arc::new(EndedRing::new());
            let reader = {
                let ring = Arc::clone(&ring);
                thread::spawn(move || ring.read_from(0).0)
            };
            for n in 0..3 {
                let (e, ips) = stall(n);
                ring.push(&e, &ips, Some("ab"));
            }
            for e in reader.join().unwrap() {
                let (want, ips) = stall(e.poll.poll);
                assert_eq!(e.poll, want, "a torn record");
                assert_eq!(e.ips, ips.to_vec(), "a torn record");
                assert_eq!(e.name.as_deref(), Some("ab"));
            }
            let (all, written) = ring.read_from(0);
            assert_eq!(written, 3);
            assert_eq!(all.iter().map(|e| e.poll.poll).collect::<Vec<_>>(), vec![1, 2]);
        });
    }
}
