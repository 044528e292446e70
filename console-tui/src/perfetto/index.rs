//! The first pass over a recording: what the trace needs before its first event is
//! written. The tracks are declared up front, so the pass counts the workers (the
//! runtime's info, the snapshots, and any worker an event names); a slice is named when
//! it is written, and a task's name may come in a task list after its first polls, so
//! the pass collects every name first; a stall report may come long after its poll (see
//! the timeline's docs), so the pass collects the reports too. It also finds where the
//! recording moves on to another runtime (a reconnection to a restarted process), since
//! timestamps start over there: the export stops at that point.

use super::decode::StallReport;
use std::collections::HashMap;
use volt_console_proto as proto;

/// The most worker tracks a trace declares; an event naming a worker past it is left out.
pub const MAX_WORKERS: usize = 4096;

/// What the first pass learned.
#[derive(Debug, Default)]
pub struct Index {
    /// Task names, from the task lists and stall reports.
    pub names: HashMap<u64, String>,
    /// Stall events by worker and task, in the order they came.
    pub stalls: HashMap<(usize, u64), Vec<StallReport>>,
    /// Worker tracks to declare.
    pub workers: usize,
    /// The runtime's process id (0: not in the recording).
    pub pid: u32,
    /// The runtime's start (Unix time, ns), which tells it from a later one with the same pid.
    started_unix_ns: u64,
    /// Updates of the first runtime, the ones exported.
    pub updates: u64,
    /// Events in those updates.
    pub events: u64,
    /// The pid of the runtime the recording moves on to, if it does.
    pub next_runtime: Option<u32>,
}

impl Index {
    /// Take in the next update. Returns false, having taken nothing, at the first update
    /// of another runtime: that one and all after it are left out.
    pub fn learn(&mut self, u: &proto::Update) -> bool {
        if self.next_runtime.is_some() {
            return false;
        }
        if let Some(info) = &u.runtime {
            let this = (info.pid, info.started_unix_ns);
            if self.updates > 0 && (self.pid, self.started_unix_ns) != this && self.pid != 0 {
                self.next_runtime = Some(info.pid);
                return false;
            }
            (self.pid, self.started_unix_ns) = this;
            self.workers = self.workers.max(info.workers as usize);
        }
        self.updates += 1;
        if let Some(s) = &u.snapshot {
            self.workers = self.workers.max(s.workers.len());
            for stall in &s.recent_stalls {
                if let Some(name) = &stall.task_name {
                    self.names.insert(stall.task_id, name.clone());
                }
            }
        }
        if let Some(t) = &u.tasks {
            for task in &t.changed {
                if let Some(name) = &task.name {
                    self.names.insert(task.id, name.clone());
                }
            }
        }
        self.events += u.events.len() as u64;
        for e in &u.events {
            if let Some(w) = e.worker {
                self.see_worker(w as usize);
            }
            if e.kind == proto::EventKind::Stall as i32 {
                let (w, report) = StallReport::of(e);
                if w < MAX_WORKERS {
                    self.see_worker(w);
                    self.stalls.entry((w, e.task_id)).or_default().push(report);
                }
            }
        }
        true
    }

    /// A worker some event names (past [`MAX_WORKERS`]: damage, left out).
    fn see_worker(&mut self, w: usize) {
        if w < MAX_WORKERS {
            self.workers = self.workers.max(w + 1);
        }
    }

    /// The name a poll of task `id` is shown under.
    pub fn task_name(&self, id: u64) -> String {
        match self.names.get(&id) {
            Some(name) => name.clone(),
            None => format!("task {id}"),
        }
    }
}
