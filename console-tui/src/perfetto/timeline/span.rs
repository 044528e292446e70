//! A slice (or an instant) on a track while the timeline holds it: what it stands for,
//! its arguments and flows, the stall marked on it, and what is nested in it.

use crate::perfetto::trace::{AnnotationValue, DebugAnnotation};

/// What a slice stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SpanKind {
    Poll { task: u64 },
    Park,
    Instant,
}

/// A stall marked on a poll: its span and the longest duration reported.
#[derive(Clone, Copy, Debug)]
pub(super) struct StallMark {
    pub(super) begin: u64,
    pub(super) end: u64,
    pub(super) duration_ns: u64,
}

impl StallMark {
    /// This mark and `(begin, end, duration_ns)` as one.
    pub(super) fn merge(this: Option<StallMark>, begin: u64, end: u64, duration_ns: u64) -> StallMark {
        match this {
            Some(m) => StallMark {
                begin: m.begin.min(begin),
                end: m.end.max(end),
                duration_ns: m.duration_ns.max(duration_ns),
            },
            None => StallMark { begin, end, duration_ns },
        }
    }
}

/// A slice (or an instant) on a track, with what is nested in it.
#[derive(Debug)]
pub(super) struct Span {
    pub(super) kind: SpanKind,
    pub(super) name: String,
    pub(super) begin: u64,
    /// `None` while open; an instant's is its begin.
    pub(super) end: Option<u64>,
    pub(super) args: Vec<DebugAnnotation>,
    pub(super) flows_out: Vec<u64>,
    pub(super) flows_in: Vec<u64>,
    pub(super) stall: Option<StallMark>,
    pub(super) children: Vec<Span>,
    /// Its begin is written (with this many of its arguments and flows out): the rest
    /// go on its end.
    pub(super) begun: Option<(usize, usize)>,
}

impl Span {
    pub(super) fn new(kind: SpanKind, name: String, begin: u64) -> Span {
        let end = (kind == SpanKind::Instant).then_some(begin);
        Span {
            kind,
            name,
            begin,
            end,
            args: Vec::new(),
            flows_out: Vec::new(),
            flows_in: Vec::new(),
            stall: None,
            children: Vec::new(),
            begun: None,
        }
    }

    pub(super) fn arg(mut self, name: &str, value: AnnotationValue) -> Span {
        self.args.push(DebugAnnotation::new(name, value));
        self
    }

    pub(super) fn is_poll_of(&self, task: u64) -> bool {
        self.kind == SpanKind::Poll { task }
    }
}
