//! One worker's track, built as a stack of spans, and held within a window before it is
//! written (see the timeline's docs).

use super::span::{Span, SpanKind};
use super::write::{write_begin, write_span};
use crate::perfetto::trace::PacketWriter;
use std::collections::VecDeque;
use std::io::{self, Write};

/// Top-level slices a worker's track keeps unwritten (see the module docs).
pub(super) const WINDOW: usize = 256;

/// Slices held inside an open top-level slice before what can be is written.
pub(super) const SPILL: usize = 4096;

/// One worker's track.
pub(super) struct WorkerTrack {
    pub(super) uuid: u64,
    /// Top-level spans not yet written, oldest first; only the newest can be open.
    pub(super) recent: VecDeque<Span>,
    /// How many spans are open: the newest top-level span, its last child, that one's
    /// last child, and so on (a span opens as the last child of the innermost open one,
    /// and closes before its parent, so the open ones are always that chain).
    pub(super) open: usize,
    /// The newest poll to have ended here: its top-level span (by sequence number) and
    /// the child indices down to it.
    pub(super) last_poll: Option<(u64, Vec<usize>)>,
    /// The sequence number of `recent[0]`.
    first_seq: u64,
    /// The latest timestamp on this track.
    now: u64,
    /// Spans held inside the open top-level span.
    pub(super) nested: usize,
}

impl WorkerTrack {
    pub(super) fn new(uuid: u64) -> WorkerTrack {
        WorkerTrack { uuid, recent: VecDeque::new(), open: 0, last_poll: None, first_seq: 0, now: 0, nested: 0 }
    }

    /// `ts`, moved up to the track's latest timestamp if it is before it.
    pub(super) fn at(&mut self, ts: u64) -> u64 {
        self.now = self.now.max(ts);
        self.now
    }

    /// The open span at `depth` (0: the top-level one).
    pub(super) fn open_at(&mut self, depth: usize) -> &mut Span {
        debug_assert!(depth < self.open);
        let mut s = self.recent.back_mut().expect("an open span");
        for _ in 0..depth {
            s = s.children.last_mut().expect("the open chain");
        }
        s
    }

    /// The open spans, outermost first.
    fn open_spans(&self) -> impl Iterator<Item = &Span> {
        let top = self.recent.back().filter(|_| self.open > 0);
        std::iter::successors(top, |s| s.children.last()).take(self.open)
    }

    /// The depth of the innermost open span that `pick` picks.
    pub(super) fn innermost_open(&self, pick: impl Fn(&Span) -> bool) -> Option<usize> {
        self.open_spans().enumerate().filter(|(_, s)| pick(s)).map(|(d, _)| d).last()
    }

    /// The innermost open poll of `task`, by depth.
    pub(super) fn open_poll_depth(&self, task: u64) -> Option<usize> {
        self.innermost_open(|s| s.is_poll_of(task))
    }

    /// Whether the innermost open span is a park.
    pub(super) fn parked(&self) -> bool {
        self.open_spans().last().is_some_and(|s| s.kind == SpanKind::Park)
    }

    /// Add `span` inside the innermost open span (or at the top), open if `opens`.
    pub(super) fn push(&mut self, span: Span, opens: bool) {
        if self.open == 0 {
            self.recent.push_back(span);
        } else {
            let depth = self.open - 1;
            self.open_at(depth).children.push(span);
            self.nested += 1;
        }
        if opens {
            self.open += 1;
        }
    }

    /// Close the open spans from the innermost down to `depth` at `ts`.
    pub(super) fn close_to(&mut self, depth: usize, ts: u64, unfinished: &mut u64) {
        while self.open > depth {
            let d = self.open - 1;
            let span = self.open_at(d);
            span.end = Some(ts);
            if d > depth {
                // Opened inside and never closed: it ends with its parent.
                *unfinished += 1;
            }
            self.open -= 1;
        }
        if self.open == 0 {
            self.nested = 0;
        }
    }

    /// The span at `path` below top-level span `seq`, if it is still held.
    pub(super) fn span_at(&mut self, seq: u64, path: &[usize]) -> Option<&mut Span> {
        let i = seq.checked_sub(self.first_seq)? as usize;
        let mut s = self.recent.get_mut(i)?;
        for &c in path {
            s = s.children.get_mut(c)?;
        }
        Some(s)
    }

    /// The path to the open span at `depth` (the top-level span's sequence number, then
    /// child indices).
    pub(super) fn open_path(&self, depth: usize) -> (u64, Vec<usize>) {
        let seq = self.first_seq + self.recent.len() as u64 - 1;
        let mut path = Vec::with_capacity(depth);
        let mut s = self.recent.back().expect("an open span");
        for _ in 0..depth {
            path.push(s.children.len() - 1);
            s = s.children.last().expect("the open chain");
        }
        (seq, path)
    }

    /// Past [`SPILL`] spans held inside the open top-level one: write the open spans'
    /// begins and everything closed inside them, keeping only the open chain.
    pub(super) fn spill<W: Write>(&mut self, out: &mut PacketWriter<W>) -> io::Result<()> {
        if self.nested <= SPILL {
            return Ok(());
        }
        // Paths into the spans written are gone.
        if self.last_poll.as_ref().is_some_and(|(seq, _)| *seq + 1 == self.first_seq + self.recent.len() as u64) {
            self.last_poll = None;
        }
        let uuid = self.uuid;
        for depth in 0..self.open {
            let inner_open = depth + 1 < self.open;
            let span = self.open_at(depth);
            if span.begun.is_none() {
                write_begin(out, uuid, span)?;
                span.begun = Some((span.args.len(), span.flows_out.len()));
            }
            // The last child is the next open span, if there is one: it stays.
            let keep = usize::from(inner_open);
            let closed = span.children.len() - keep;
            for child in span.children.drain(..closed) {
                write_span(out, uuid, &child)?;
            }
        }
        self.nested = self.open.saturating_sub(1);
        Ok(())
    }

    /// The top-level spans past the window, oldest first, to be written.
    pub(super) fn overflow(&mut self) -> Vec<Span> {
        let mut out = Vec::new();
        while self.recent.len() > WINDOW {
            out.push(self.recent.pop_front().expect("longer than the window"));
            self.first_seq += 1;
        }
        out
    }
}
