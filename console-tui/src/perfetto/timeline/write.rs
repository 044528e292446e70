//! Spans as trace packets: the tracks' descriptors, and each span's begin, the stall
//! marked on it, its children and its end.

use super::span::{Span, SpanKind, StallMark};
use crate::perfetto::trace::{
    AnnotationValue, DebugAnnotation, EventType, PacketData, PacketWriter, ProcessDescriptor, ThreadDescriptor,
    TrackDescriptor, TrackEvent,
};
use std::io::{self, Write};

/// The process track's uuid.
const PROCESS_UUID: u64 = 1;
/// The uuid of the track of the events recorded off the workers.
pub(super) const OUTSIDE_UUID: u64 = 2;
/// Worker `w`'s track's uuid is `WORKER_UUID + w`.
pub(super) const WORKER_UUID: u64 = 16;

/// The tracks of a trace: the runtime's process (Perfetto groups threads under it by
/// pid; a recording without one gets 1), a thread per worker, and the track for events
/// off the workers under the process.
pub(super) fn tracks(pid: u32, workers: usize) -> Vec<TrackDescriptor> {
    let shown = pid;
    let pid = if pid == 0 { 1 } else { pid.min(i32::MAX as u32 / 2) as i32 };
    let mut out = vec![TrackDescriptor {
        uuid: Some(PROCESS_UUID),
        process: Some(ProcessDescriptor { pid: Some(pid), process_name: Some(format!("volt runtime (pid {shown})")) }),
        ..Default::default()
    }];
    for w in 0..workers {
        let name = format!("worker {w}");
        out.push(TrackDescriptor {
            uuid: Some(WORKER_UUID + w as u64),
            name: Some(name.clone()),
            // A thread id of its own, never the pid (that is the main thread's).
            thread: Some(ThreadDescriptor { pid: Some(pid), tid: Some(pid + 1 + w as i32), thread_name: Some(name) }),
            ..Default::default()
        });
    }
    out.push(TrackDescriptor {
        uuid: Some(OUTSIDE_UUID),
        name: Some("outside the workers".into()),
        parent_uuid: Some(PROCESS_UUID),
        ..Default::default()
    });
    out
}

/// A string argument.
pub(super) fn str_arg(s: &str) -> AnnotationValue {
    AnnotationValue::String(s.to_string())
}

/// Write `span` and everything nested in it: its begin (or the instant), the stall
/// marked on it, its children, its end.
pub(super) fn write_span<W: Write>(out: &mut PacketWriter<W>, track: u64, span: &Span) -> io::Result<()> {
    if span.begun.is_none() {
        write_begin(out, track, span)?;
    }
    if span.kind == SpanKind::Instant {
        return Ok(());
    }
    let end = span.end.expect("written spans are closed");
    let stall = span.stall.map(|s| stall_bounds(span, s, end));
    if let Some((begin, stall_end, mark)) = stall {
        let mut args = Vec::new();
        if let SpanKind::Poll { task } = span.kind {
            args.push(DebugAnnotation::new("task_id", AnnotationValue::Uint(task)));
            args.push(DebugAnnotation::new("task", str_arg(&span.name)));
        }
        args.push(DebugAnnotation::new("duration_ms", AnnotationValue::Double(mark.duration_ns as f64 / 1e6)));
        out.push(Some(begin), slice_begin(track, "stall", args))?;
        for child in &span.children {
            write_span(out, track, child)?;
        }
        out.push(Some(stall_end), slice_end(track, Vec::new(), Vec::new()))?;
    } else {
        for child in &span.children {
            write_span(out, track, child)?;
        }
    }
    // What came after its begin was written goes on its end.
    let (args, flows) = span.begun.unwrap_or((span.args.len(), span.flows_out.len()));
    out.push(Some(end), slice_end(track, span.args[args..].to_vec(), span.flows_out[flows..].to_vec()))
}

/// Write `span`'s begin (or the instant), with its arguments and flows so far.
pub(super) fn write_begin<W: Write>(out: &mut PacketWriter<W>, track: u64, span: &Span) -> io::Result<()> {
    let kind = if span.kind == SpanKind::Instant { EventType::Instant } else { EventType::SliceBegin };
    out.push(
        Some(span.begin),
        PacketData::TrackEvent(TrackEvent {
            r#type: Some(kind as i32),
            track_uuid: Some(track),
            name: Some(span.name.clone()),
            debug_annotations: span.args.clone(),
            flow_ids: span.flows_out.clone(),
            terminating_flow_ids: span.flows_in.clone(),
        }),
    )
}

/// A stall's slice inside `span` (which ends at `end`): the report's span clamped to the
/// poll's, widened to hold the poll's children so it nests between them and the poll.
fn stall_bounds(span: &Span, mark: StallMark, end: u64) -> (u64, u64, StallMark) {
    let mut begin = mark.begin.clamp(span.begin, end);
    let mut stall_end = mark.end.clamp(span.begin, end);
    if let (Some(first), Some(last)) = (span.children.first(), span.children.iter().filter_map(|c| c.end).max()) {
        begin = begin.min(first.begin);
        stall_end = stall_end.max(last);
    }
    (begin, stall_end.max(begin), mark)
}

fn slice_begin(track: u64, name: &str, args: Vec<DebugAnnotation>) -> PacketData {
    PacketData::TrackEvent(TrackEvent {
        r#type: Some(EventType::SliceBegin as i32),
        track_uuid: Some(track),
        name: Some(name.to_string()),
        debug_annotations: args,
        ..Default::default()
    })
}

fn slice_end(track: u64, args: Vec<DebugAnnotation>, flow_ids: Vec<u64>) -> PacketData {
    PacketData::TrackEvent(TrackEvent {
        r#type: Some(EventType::SliceEnd as i32),
        track_uuid: Some(track),
        debug_annotations: args,
        flow_ids,
        ..Default::default()
    })
}
