//! The replay player: it plays a recording back at the pace it was recorded (gaps over
//! 2 s are cut to 2 s), reading the file as it goes, so it holds the update due next and
//! never the whole recording. Space pauses and `.` steps one update (the keys are
//! [`crate::input`]'s; the main loop calls [`Player::step`]).

use super::{count_updates, RecordReader};
use crate::app::{App, Status};
use std::path::Path;
use std::time::{Duration, Instant};
use volt_console_proto as proto;

/// A recording being played back.
pub struct Player {
    reader: RecordReader,
    /// The next update to show (read ahead, to know its time).
    pending: Option<proto::Update>,
    /// Updates shown so far.
    next: usize,
    /// About how many the file holds (from its frame headers).
    total: usize,
    due: Instant,
    /// Why reading stopped early, if it did.
    error: Option<String>,
}

impl Player {
    /// Open `path` and read its first update.
    pub fn open(path: &Path) -> std::io::Result<Player> {
        let total = count_updates(path)? as usize;
        let mut reader = RecordReader::open(path)?;
        let pending = reader.next_update()?;
        Ok(Player { reader, pending, next: 0, total, due: Instant::now(), error: None })
    }

    /// Whether the recording holds no (more) updates.
    pub fn ended(&self) -> bool {
        self.pending.is_none()
    }

    /// The next update, if it is due (or `force`d by a step).
    fn poll(&mut self, force: bool) -> Option<proto::Update> {
        if !force && Instant::now() < self.due {
            return None;
        }
        let u = self.pending.take()?;
        self.next += 1;
        self.pending = match self.reader.next_update() {
            Ok(n) => n,
            Err(e) => {
                self.error = Some(e.to_string());
                None
            }
        };
        if let Some(n) = &self.pending {
            let gap = Duration::from_nanos(n.uptime_ns.saturating_sub(u.uptime_ns)).min(Duration::from_secs(2));
            self.due = Instant::now() + gap;
        }
        self.total = self.total.max(self.next + usize::from(self.pending.is_some()));
        Some(u)
    }

    /// Once a frame: apply the updates that are due (unless paused), and set the
    /// status and what went wrong with the file so far.
    pub fn advance(&mut self, app: &mut App) {
        if !app.screen.paused {
            while let Some(u) = self.poll(false) {
                app.apply(u);
            }
        }
        app.status = if self.ended() && !app.screen.paused {
            Status::Ended
        } else {
            Status::Replay {
                position: self.next,
                total: self.total,
                paused: app.screen.paused,
                skipped: self.reader.skipped,
            }
        };
        // What went wrong with the file stays on screen, as a warning.
        app.replay_problems = self.problems();
    }

    /// `.`: pause, and show the next update now.
    pub fn step(&mut self, app: &mut App) {
        app.screen.paused = true;
        if let Some(u) = self.poll(true) {
            app.apply(u);
        }
    }

    /// What the replay found wrong with its file so far, for the header.
    fn problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.reader.skipped > 0 {
            v.push(format!(
                "{} damaged update(s) in the recording skipped (checksum or length wrong)",
                self.reader.skipped
            ));
        }
        if self.reader.truncated_bytes > 0 {
            v.push(format!("the recording ends with {} bytes of a cut-off update", self.reader.truncated_bytes));
        }
        if let Some(e) = &self.error {
            v.push(format!("reading the recording failed: {e}"));
        }
        v
    }
}
