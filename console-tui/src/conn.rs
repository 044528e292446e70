//! The dashboard's side of the connection. The client library's watcher thread talks
//! to the server (connect, subscribe, reconnect, one-off calls) and sends what happens
//! over a channel; [`Conn`] takes those messages into the [`App`] once a frame, writes
//! each update to the recording if there is one, and passes the app's requests (a task's
//! history, another window of the task list) back to the watcher. The views never see
//! it.

use crate::app::{App, Status};
use crate::client::{Msg, Watcher};
use crate::record::RecordWriter;
use std::sync::mpsc;
use volt_console_proto as proto;

/// A live connection: the watcher, its messages, and the recording being written.
pub struct Conn {
    rx: mpsc::Receiver<Msg>,
    recorder: Option<RecordWriter>,
    watcher: Watcher,
}

impl Conn {
    pub fn new(rx: mpsc::Receiver<Msg>, recorder: Option<RecordWriter>, watcher: Watcher) -> Conn {
        Conn { rx, recorder, watcher }
    }

    /// Take in everything the watcher sent since the last frame. Updates are recorded
    /// even while the display is paused; a recording that fails stops, and says why.
    pub fn drain(&mut self, app: &mut App) {
        loop {
            match self.rx.try_recv() {
                Ok(Msg::Status(s)) => app.status = s,
                Ok(Msg::Task { id, details }) => app.apply_task(id, details.map(|d| *d)),
                Ok(Msg::Page(page)) => app.apply_page(*page),
                Ok(Msg::Update(u)) => {
                    if let Some(r) = &mut self.recorder {
                        if let Err(e) = r.write(&u) {
                            app.recording = Some(format!("stopped: {e}"));
                            self.recorder = None;
                        }
                    }
                    if !app.paused {
                        app.apply(*u);
                    }
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    app.status = Status::Disconnected { reason: "the watcher stopped".into(), retry_in_ms: 0 };
                    break;
                }
            }
        }
    }

    /// Ask for task `id`'s history; the answer arrives with a later [`Conn::drain`].
    pub fn fetch_task(&self, id: u64) {
        self.watcher.fetch_task(id);
    }

    /// Ask for another window of the task list.
    pub fn query_tasks(&self, query: proto::TaskQuery) {
        self.watcher.query_tasks(query);
    }
}
