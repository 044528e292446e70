//! What the console keeps of tasks: a row for each task of the list's window, and the
//! task the detail view follows, with what the server answered about it.

use volt_console_proto as proto;

/// Rows of the task list the console asks the server for: a window around the selected
/// row, larger than any screen, so scrolling asks again only every `TASK_WINDOW / 4`
/// rows. The console never holds more task rows than this (plus the detail view's).
pub const TASK_WINDOW: u32 = 200;

/// What we know about one task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub task: proto::Task,
    /// Uptime when this row was last refreshed (to age `since_last_poll_ns`).
    pub seen_at_ns: u64,
}

/// What the server said about the task in the detail view.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskHistory {
    /// Asked, no answer yet.
    Pending,
    /// Its events from the server's history, oldest first.
    Events(Vec<proto::Event>),
    /// Why there is none (the task ended, no connection, a replay).
    Unavailable(String),
}

/// The task the detail view follows.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskDetail {
    pub id: u64,
    /// Its row as last seen: the window's updates and the server's answer both refresh it.
    pub row: Option<TaskRow>,
    /// The server's history of it, once asked for.
    pub history: Option<TaskHistory>,
    /// Its poll-time and schedule-latency histograms, from the same answer.
    pub histograms: Option<(proto::Histogram, proto::Histogram)>,
    /// What it holds, from the same answer.
    pub holds: Vec<proto::Resource>,
}

impl TaskDetail {
    /// Follow task `id`, whose row (if the window holds it) is `row`.
    pub fn new(id: u64, row: Option<TaskRow>) -> TaskDetail {
        TaskDetail { id, row, history: None, histograms: None, holds: Vec::new() }
    }

    /// Note that the server was asked about it, or, with `Err`, why it cannot be.
    pub fn requested(&mut self, can_ask: Result<(), String>) {
        self.history = Some(match can_ask {
            Ok(()) => TaskHistory::Pending,
            Err(why) => TaskHistory::Unavailable(why),
        });
    }

    /// Take in the server's answer about it; `uptime_ns` is the runtime's uptime now.
    pub fn answer(&mut self, details: Result<proto::TaskDetails, String>, uptime_ns: u64) {
        self.history = Some(match details {
            Ok(d) => {
                self.histograms =
                    Some((d.poll_histogram.unwrap_or_default(), d.schedule_histogram.unwrap_or_default()));
                self.holds = d.holds;
                if let Some(task) = d.task {
                    self.row = Some(TaskRow { task, seen_at_ns: uptime_ns });
                }
                TaskHistory::Events(d.recent_events)
            }
            Err(why) => TaskHistory::Unavailable(why),
        });
    }
}

/// One task's events from the server's history (`server`, oldest first) and from this
/// console's log (`log`, oldest first), each event once: the log's events before the
/// history starts, the history, then the log's events after it. Both lists are cuts of
/// one ordered stream, so at the history's last timestamp the log's first events there
/// are the ones the history already holds (events of one worker often share a timestamp).
pub(crate) fn merge_history<'a>(
    server: &'a [proto::Event],
    log: impl Iterator<Item = &'a proto::Event>,
) -> Vec<&'a proto::Event> {
    let (first, last) = (server[0].timestamp_ns, server[server.len() - 1].timestamp_ns);
    let mut at_last = server.iter().rev().take_while(|e| e.timestamp_ns == last).count();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for e in log {
        if e.timestamp_ns < first {
            before.push(e);
        } else if e.timestamp_ns > last {
            after.push(e);
        } else if e.timestamp_ns == last {
            if at_last > 0 {
                at_last -= 1;
            } else {
                after.push(e);
            }
        }
    }
    before.extend(server);
    before.append(&mut after);
    before
}
