//! The second pass: events in, trace packets out.
//!
//! # One track per worker, as a stack
//! A worker records its events in order, so its track is built like a call stack: a
//! poll's start opens a slice, its end closes the innermost open slice of that task
//! (closing at the same instant anything opened inside it and never closed), a park
//! opens a slice and the unpark closes it; an instant goes inside whatever is open. A poll
//! nested in another (`JoinHandle::join` helping on a worker) is a child slice. An end
//! with nothing open to close is dropped; what is still open when the data ends is
//! closed at the data's last timestamp. A timestamp never goes back on a track: an event
//! stamped before the one before it (a poll start put back from a poll's length, a tick
//! off) is moved up to it, so slices on a track always nest.
//!
//! # Written late, within a window
//! A slice is not written when it opens: wakes and spawns inside it add flows to it, even
//! just after it ended (a task woken during its own poll is queued as the poll ends). So
//! each track keeps its newest top-level slices (with everything nested in them) and
//! writes the oldest once it holds more than [`track::WINDOW`]; a flow from a slice further back
//! than that is not drawn. A slice that stays open long with much nested in it (a `join`
//! helping for seconds) would hold all of that: past [`track::SPILL`] nested slices, its begin
//! and everything closed inside it are written, and what is added to it later (its
//! outcome, flows from it) goes on its end, which Perfetto reads as well.
//!
//! # Flows: who woke whom
//! A `Schedule` whose wake source is a task starts a flow at that task's poll on the
//! recording worker (the open one, or the one that just ended: a task woken during its
//! own poll is queued as the poll ends); a `Spawn` recorded inside a poll starts one at
//! that poll. The flow ends at the woken (or spawned) task's next poll, on whichever
//! track it runs. Spawns and wakes from threads outside the workers are instants on the
//! outside track, and their flows start there.
//!
//! # Stalls
//! A `Stall` says which worker was stuck in which task, for how long, and is stamped when
//! the poll ended (or, recorded by another thread, when it was seen): the stall is
//! `[timestamp - duration, timestamp]`, whoever recorded it. The first pass collects the
//! reports (they are few), so a report need not come near its poll in the stream. As a
//! poll ends, the reports of its task on its worker that overlap it are drawn inside it,
//! clamped to the poll and widened to hold the poll's own children so that it nests;
//! several make one slice, the longest duration. A report stamped after its poll ended
//! (seen late) overlaps none: the first poll of its task before it that lasted that long
//! takes it, stuck from its start. A report no poll takes (its poll is not in the data)
//! is an instant at its timestamp.
//!
//! # Where each part is
//! `span` is a slice while it is held, `track` a worker's stack of them and its window,
//! `flows` the arrows, `write` the packets; this file reads the events and moves them
//! between those. What a packed argument says (a stall report, a wake source) is the
//! `decode` module's, beside the index, which reads it too.

mod flows;
mod span;
mod track;
mod write;

use super::decode::{StallReport, WakeSource};
use super::index::{Index, MAX_WORKERS};
use crate::perfetto::trace::{AnnotationValue, DebugAnnotation, PacketData, PacketWriter};
use flows::Flows;
use span::{Span, SpanKind, StallMark};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use track::WorkerTrack;
use volt_console_proto as proto;
use write::{str_arg, tracks, write_span, OUTSIDE_UUID, WORKER_UUID};

/// What the export wrote, for the summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Poll slices.
    pub polls: u64,
    /// Park slices.
    pub parks: u64,
    /// Steal instants.
    pub steals: u64,
    /// Stalls drawn as slices inside their poll.
    pub stalls: u64,
    /// Stall reports no poll in the data took, drawn as instants.
    pub stall_instants: u64,
    /// Flows started (a flow whose end never came is not drawn).
    pub flows: u64,
    /// Flows that reached their end.
    pub flows_ended: u64,
    /// Ends with nothing open to close (left out).
    pub unmatched_ends: u64,
    /// Slices still open when the data (or their parent) ended, closed there.
    pub unfinished: u64,
    /// Events left out: of an unknown kind, or naming a worker past the declared ones.
    pub ignored: u64,
}

/// Builds the trace from events, writing packets as they are complete.
pub struct Timeline<'a, W: Write> {
    out: PacketWriter<W>,
    index: &'a Index,
    workers: Vec<WorkerTrack>,
    flows: Flows,
    /// Stall reports no poll has taken yet, by worker and task, oldest first.
    stalls: HashMap<(usize, u64), VecDeque<StallReport>>,
    /// The latest timestamp of the data.
    last_ts: u64,
    counts: Counts,
}

impl<'a, W: Write> Timeline<'a, W> {
    /// Start a trace into `out`, declaring its tracks.
    pub fn new(out: W, index: &'a Index) -> io::Result<Timeline<'a, W>> {
        let workers = index.workers.min(MAX_WORKERS);
        let mut out = PacketWriter::new(out);
        for track in tracks(index.pid, workers) {
            out.push(None, PacketData::TrackDescriptor(track))?;
        }
        Ok(Timeline {
            out,
            index,
            workers: (0..workers).map(|w| WorkerTrack::new(WORKER_UUID + w as u64)).collect(),
            flows: Flows::default(),
            stalls: index.stalls.iter().map(|(k, v)| (*k, v.iter().copied().collect())).collect(),
            last_ts: 0,
            counts: Counts::default(),
        })
    }

    /// Take in the next event.
    pub fn event(&mut self, e: &proto::Event) -> io::Result<()> {
        use proto::EventKind as K;
        self.last_ts = self.last_ts.max(e.timestamp_ns);
        let Ok(kind) = K::try_from(e.kind) else {
            self.counts.ignored += 1;
            return Ok(());
        };
        let Some(w) = e.worker.map(|w| w as usize) else { return self.outside(kind, e) };
        if w >= self.workers.len() {
            self.counts.ignored += 1;
            return Ok(());
        }
        match kind {
            K::PollStart => self.poll_start(w, e),
            K::PollEnd => self.poll_end(w, e),
            K::Park => self.park(w, e),
            K::Unpark => {
                self.unpark(w, e);
                Ok(())
            }
            K::Spawn => {
                self.spawn_in_poll(w, e.task_id);
                Ok(())
            }
            K::Schedule => {
                if let WakeSource::Task(waker) = WakeSource::from_schedule_arg(e.arg) {
                    self.wake_from_poll(w, waker, e.task_id);
                }
                Ok(())
            }
            K::Complete => {
                self.flows.forget(e.task_id);
                Ok(())
            }
            K::Steal | K::Overflow | K::Cancel | K::Panic => {
                let span = match kind {
                    K::Steal => {
                        self.counts.steals += 1;
                        Span::new(SpanKind::Instant, "steal".into(), e.timestamp_ns)
                            .arg("victim", AnnotationValue::Uint(e.arg >> 32))
                            .arg("count", AnnotationValue::Uint(e.arg & 0xffff_ffff))
                            .arg("runs_task", AnnotationValue::Uint(e.task_id))
                    }
                    K::Overflow => Span::new(SpanKind::Instant, "overflow to the global queue".into(), e.timestamp_ns)
                        .arg("count", AnnotationValue::Uint(e.arg)),
                    _ => {
                        self.flows.forget(e.task_id);
                        self.task_instant(if kind == K::Cancel { "cancel" } else { "panic" }, e)
                    }
                };
                self.instant(w, span)
            }
            // Stalls come from the first pass (see the module docs).
            K::Transition | K::Stall | K::Unspecified => Ok(()),
        }
    }

    /// A poll begins: a slice named by its task, where the flows waiting for it end.
    fn poll_start(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        let mut span = Span::new(SpanKind::Poll { task: e.task_id }, self.index.task_name(e.task_id), ts)
            .arg("task_id", AnnotationValue::Uint(e.task_id));
        self.flows.end_at(&mut span, e.task_id);
        track.push(span, true);
        self.counts.polls += 1;
        self.write_held(w)
    }

    /// A poll ends: the innermost open poll of its task closes (and whatever is open
    /// inside it), with its outcome and the stalls reported of it. With no such poll
    /// open, the end is dropped.
    fn poll_end(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        let Some(depth) = track.open_poll_depth(e.task_id) else {
            self.counts.unmatched_ends += 1;
            return Ok(());
        };
        let outcome = if e.arg & 0xff == 1 { "ready" } else { "pending" };
        track.open_at(depth).args.push(DebugAnnotation::new("outcome", str_arg(outcome)));
        let (seq, path) = track.open_path(depth);
        track.close_to(depth, ts, &mut self.counts.unfinished);
        self.mark_stalls(w, e.task_id, seq, &path)?;
        self.workers[w].last_poll = Some((seq, path));
        Ok(())
    }

    /// Mark on the poll of `task` that just closed on worker `w` (at `path` below
    /// top-level span `seq`) the stall reports that are its (see the module docs).
    /// Reports stamped before it began are no later poll's either: instants.
    fn mark_stalls(&mut self, w: usize, task: u64, seq: u64, path: &[usize]) -> io::Result<()> {
        let Some(reports) = self.stalls.get_mut(&(w, task)) else { return Ok(()) };
        let poll = self.workers[w].span_at(seq, path).expect("the poll just closed");
        let (begin, end) = (poll.begin, poll.end.expect("closed"));
        let mut stale = Vec::new();
        let mut mark = None;
        reports.retain(|r| {
            let (from, to) = r.span();
            if to < begin {
                stale.push(*r);
            } else if from < end {
                mark = Some(StallMark::merge(mark, from, to, r.duration_ns));
            } else {
                return true;
            }
            false
        });
        if mark.is_none() {
            let late = reports.iter().position(|r| r.ts > end && end - begin >= r.duration_ns);
            if let Some(r) = late.and_then(|i| reports.remove(i)) {
                mark = Some(StallMark { begin, end: begin + r.duration_ns, duration_ns: r.duration_ns });
            }
        }
        if reports.is_empty() {
            self.stalls.remove(&(w, task));
        }
        if let Some(m) = mark {
            let poll = self.workers[w].span_at(seq, path).expect("the poll just closed");
            if poll.begun.is_some() {
                // What it holds is written already: the stall cannot go around it.
                let r = StallReport { ts: m.end, duration_ns: m.duration_ns };
                self.stall_instant(w, task, r)?;
            } else {
                self.counts.stalls += 1;
                poll.stall = mark;
            }
        }
        for r in stale {
            self.stall_instant(w, task, r)?;
        }
        Ok(())
    }

    /// A stall report no poll took: an instant where it was stamped, written now (an
    /// instant nests wherever it falls).
    fn stall_instant(&mut self, w: usize, task: u64, r: StallReport) -> io::Result<()> {
        self.counts.stall_instants += 1;
        let span = Span::new(SpanKind::Instant, "stall".into(), r.ts)
            .arg("task_id", AnnotationValue::Uint(task))
            .arg("task", str_arg(&self.index.task_name(task)))
            .arg("duration_ms", AnnotationValue::Double(r.duration_ns as f64 / 1e6));
        write_span(&mut self.out, self.workers[w].uuid, &span)
    }

    /// The worker parks: a slice until it unparks. A park while one is open means the
    /// unpark between them is missing: the open one ends here.
    fn park(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        if track.parked() {
            track.close_to(track.open - 1, ts, &mut self.counts.unfinished);
            self.counts.unfinished += 1;
        }
        let name = if e.arg == 1 { "parked in reactor" } else { "parked" };
        track.push(Span::new(SpanKind::Park, name.into(), ts), true);
        self.counts.parks += 1;
        self.write_held(w)
    }

    /// The worker unparks: the open park closes, saying what woke it. With none open,
    /// the unpark is dropped.
    fn unpark(&mut self, w: usize, e: &proto::Event) {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        if !track.parked() {
            self.counts.unmatched_ends += 1;
            return;
        }
        let woke = if e.arg == 1 { "notified" } else { "timeout or I/O" };
        let depth = track.open - 1;
        track.open_at(depth).args.push(DebugAnnotation::new("woke", str_arg(woke)));
        track.close_to(depth, ts, &mut self.counts.unfinished);
    }

    /// A spawn on worker `w`: inside a poll, a flow from that poll to the new task's
    /// first.
    fn spawn_in_poll(&mut self, w: usize, child: u64) {
        let track = &mut self.workers[w];
        if let Some(depth) = track.innermost_open(|s| matches!(s.kind, SpanKind::Poll { .. })) {
            self.flows.start(track.open_at(depth), child);
        }
    }

    /// A wake by task `waker` recorded on worker `w`: a flow from the waker's poll there
    /// (open, or just ended) to `woken`'s next poll.
    fn wake_from_poll(&mut self, w: usize, waker: u64, woken: u64) {
        let track = &mut self.workers[w];
        if let Some(depth) = track.open_poll_depth(waker) {
            self.flows.start(track.open_at(depth), woken);
            return;
        }
        let Some((seq, path)) = track.last_poll.clone() else { return };
        if let Some(poll) = track.span_at(seq, &path).filter(|s| s.is_poll_of(waker)) {
            self.flows.start(poll, woken);
        }
    }

    fn task_instant(&self, what: &str, e: &proto::Event) -> Span {
        Span::new(SpanKind::Instant, format!("{what} {}", self.index.task_name(e.task_id)), e.timestamp_ns)
            .arg("task_id", AnnotationValue::Uint(e.task_id))
    }

    /// An instant on worker `w`'s track, inside whatever is open there.
    fn instant(&mut self, w: usize, mut span: Span) -> io::Result<()> {
        let track = &mut self.workers[w];
        span.begin = track.at(span.begin);
        span.end = Some(span.begin);
        track.push(span, false);
        self.write_held(w)
    }

    /// An event recorded off the workers: an instant on the outside track; a spawn or a
    /// wake also starts a flow to the task's next poll.
    fn outside(&mut self, kind: proto::EventKind, e: &proto::Event) -> io::Result<()> {
        use proto::EventKind as K;
        let mut span = match kind {
            K::Spawn => self.task_instant("spawn", e),
            K::Schedule => match WakeSource::from_schedule_arg(e.arg) {
                // Its spawn's instant says it already.
                WakeSource::Spawn => return Ok(()),
                by => self.task_instant("wake", e).arg("woken_by", str_arg(&by.describe())),
            },
            K::Cancel => self.task_instant("cancel", e),
            K::Panic => self.task_instant("panic", e),
            _ => return Ok(()),
        };
        if matches!(kind, K::Spawn | K::Schedule) {
            self.flows.start(&mut span, e.task_id);
        } else {
            self.flows.forget(e.task_id);
        }
        write_span(&mut self.out, OUTSIDE_UUID, &span)
    }

    /// Write what worker `w`'s track need not hold any more: the spans that fell out of
    /// its window, and past [`track::SPILL`] what is closed inside its open span.
    fn write_held(&mut self, w: usize) -> io::Result<()> {
        let track = &mut self.workers[w];
        let uuid = track.uuid;
        for span in track.overflow() {
            write_span(&mut self.out, uuid, &span)?;
        }
        track.spill(&mut self.out)
    }

    /// Close what is still open at the data's last timestamp, write everything held, and
    /// give the output back with what was drawn.
    pub fn finish(mut self) -> io::Result<(W, Counts)> {
        let last = self.last_ts;
        for w in 0..self.workers.len() {
            let track = &mut self.workers[w];
            if track.open == 0 {
                continue;
            }
            let ts = track.at(last);
            // The top-level one counts too: nothing closed it.
            self.counts.unfinished += 1;
            let mut polls = Vec::new();
            for d in 0..track.open {
                if let SpanKind::Poll { task } = track.open_at(d).kind {
                    track.open_at(d).args.push(DebugAnnotation::new("outcome", str_arg("unfinished")));
                    polls.push((task, track.open_path(d)));
                }
            }
            track.close_to(0, ts, &mut self.counts.unfinished);
            // Innermost first, as they would have ended.
            for (task, (seq, path)) in polls.into_iter().rev() {
                self.mark_stalls(w, task, seq, &path)?;
            }
        }
        for track in &mut self.workers {
            for span in track.recent.drain(..) {
                write_span(&mut self.out, track.uuid, &span)?;
            }
        }
        let mut left: Vec<_> = std::mem::take(&mut self.stalls).into_iter().collect();
        left.sort_by_key(|(key, _)| *key);
        for ((w, task), reports) in left {
            for r in reports {
                self.stall_instant(w, task, r)?;
            }
        }
        self.counts.flows = self.flows.started;
        self.counts.flows_ended = self.flows.ended;
        Ok((self.out.finish()?, self.counts))
    }
}

#[cfg(test)]
mod tests;
