//! One event of the console stream as a log line: when (seconds since the runtime
//! started), where (`w<N>` for a worker, `ext` off the workers) and what, with the
//! event's argument spelled out (a spawn's origin, a schedule's queue, a poll's outcome,
//! a transition's states, a steal's count and victim, a park's kind).
//!
//! The argument's layout per kind is the wire format of `volt-console-proto`'s
//! `Event.arg`, which the server fills from the runtime's typed events.

use std::fmt;
use volt_console_proto as proto;

/// Formats `event` as one log line (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct EventLine<'a>(pub &'a proto::Event);

/// One event as a log line.
pub fn event_line(e: &proto::Event) -> String {
    EventLine(e).to_string()
}

impl fmt::Display for EventLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use proto::EventKind as K;
        let e = self.0;
        let who = match e.worker {
            Some(w) => format!("w{w:<2}"),
            None => "ext".into(),
        };
        let kind = K::try_from(e.kind).unwrap_or(K::Unspecified);
        let what = match kind {
            K::Spawn => format!("spawn     task {} ({})", e.task_id, if e.arg == 1 { "remote" } else { "local" }),
            K::Schedule => format!(
                "schedule  task {} -> {} ({})",
                e.task_id,
                match e.arg & 0xff {
                    0 => "LIFO",
                    1 => "local",
                    _ => "global",
                },
                wake_source(e.arg >> 8)
            ),
            K::PollStart => format!("poll      task {}", e.task_id),
            K::PollEnd => {
                format!("poll end  task {} {}", e.task_id, if e.arg & 0xff == 1 { "ready" } else { "pending" })
            }
            K::Transition => {
                let name =
                    |s: u64| ["idle", "scheduled", "running", "complete"].get(s as usize).copied().unwrap_or("?");
                format!("state     task {} {} -> {}", e.task_id, name(e.arg >> 8 & 0xff), name(e.arg & 0xff))
            }
            K::Steal => format!("steal     {} tasks from worker {}", e.arg & 0xffff_ffff, e.arg >> 32),
            K::Overflow => format!("overflow  {} tasks to the global queue", e.arg),
            K::Park => format!("park      ({})", if e.arg == 1 { "in the reactor" } else { "futex" }),
            K::Unpark => format!("unpark    ({})", if e.arg == 1 { "notified" } else { "timeout/io" }),
            K::Complete => format!("complete  task {}", e.task_id),
            K::Cancel => format!("cancel    task {}", e.task_id),
            K::Panic => format!("PANIC     task {}", e.task_id),
            K::Stall => format!(
                "STALL     task {} held worker {} for {:.1} ms",
                e.task_id,
                e.arg >> 48,
                (e.arg & ((1 << 48) - 1)) as f64 / 1e3
            ),
            K::Unspecified => format!("? kind {} task {}", e.kind, e.task_id),
        };
        write!(f, "{:>12}  {who} {what}", format!("{:.6}s", e.timestamp_ns as f64 / 1e9))
    }
}

/// A `Schedule`'s wake source as the wire packs it (above the target's byte): the kind
/// in the low 3 bits (0 outside, 1 timer, 2 I/O, 3 a task, 4 the blocking pool, 5 its
/// spawn) and, for
/// a task, its id above them.
fn wake_source(packed: u64) -> String {
    match packed & 7 {
        1 => "by the timer".into(),
        2 => "by I/O".into(),
        3 => format!("by task {}", packed >> 3),
        4 => "by the blocking pool".into(),
        5 => "spawned".into(),
        _ => "from outside".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: proto::EventKind, worker: Option<u32>, task_id: u64, arg: u64) -> proto::Event {
        proto::Event { kind: kind as i32, worker, task_id, arg, timestamp_ns: 1_500_000_000 }
    }

    #[test]
    fn lines_spell_out_the_argument() {
        use proto::EventKind as K;
        assert_eq!(event_line(&ev(K::Spawn, Some(3), 7, 1)), "   1.500000s  w3  spawn     task 7 (remote)");
        assert_eq!(
            event_line(&ev(K::Steal, Some(0), 0, (2 << 32) | 5)),
            "   1.500000s  w0  steal     5 tasks from worker 2"
        );
        assert_eq!(
            event_line(&ev(K::Transition, None, 9, (1 << 8) | 2)),
            "   1.500000s  ext state     task 9 scheduled -> running"
        );
        assert_eq!(event_line(&ev(K::Park, Some(1), 0, 1)), "   1.500000s  w1  park      (in the reactor)");
    }
}
