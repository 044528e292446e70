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

/// The most messages one frame takes in.
pub const DRAIN_PER_FRAME: usize = 16;

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

    /// Take in what the watcher sent since the last frame, at most [`DRAIN_PER_FRAME`]
    /// messages, so a frame (and the keys read between frames) comes round however fast
    /// updates arrive; the rest wait in the bounded channel, and past it the server skips
    /// updates for this client. Updates are recorded even while the display is paused
    /// (and held, see [`App::hold`]); a recording that fails stops, and says why.
    /// Returns how many messages it took.
    pub fn drain(&mut self, app: &mut App) -> usize {
        let mut taken = 0;
        for _ in 0..DRAIN_PER_FRAME {
            let msg = self.rx.try_recv();
            taken += msg.is_ok() as usize;
            match msg {
                Ok(Msg::Status(s)) => {
                    if s != Status::Live {
                        // No page comes for a query the lost stream had not answered.
                        app.awaiting_page = false;
                    }
                    app.status = s;
                }
                Ok(Msg::Task { id, details }) => app.apply_task(id, details.map(|d| *d)),
                Ok(Msg::Page(page)) => app.apply_page(*page),
                Ok(Msg::Update(u)) => {
                    if let Some(r) = &mut self.recorder {
                        if let Err(e) = r.write(&u) {
                            app.recording = Some(format!("stopped: {e}"));
                            self.recorder = None;
                        }
                    }
                    if app.screen.paused {
                        app.hold(*u);
                    } else {
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
        taken
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

#[cfg(test)]
mod tests {
    use super::*;

    /// However many messages wait, a frame takes at most `DRAIN_PER_FRAME`, and the next
    /// frames take the rest.
    #[test]
    fn a_frame_takes_a_bounded_number_of_messages() {
        let (tx, rx) = mpsc::sync_channel(100);
        // A watcher of a port nothing listens on (it only adds its own statuses).
        let watcher = crate::client::spawn_watcher("127.0.0.1:1".into(), None, tx.clone());
        for _ in 0..40 {
            tx.send(Msg::Status(Status::Live)).unwrap();
        }
        let mut conn = Conn::new(rx, None, watcher);
        let mut app = App::new(String::from("test"));
        assert_eq!(conn.drain(&mut app), DRAIN_PER_FRAME);
        assert_eq!(conn.drain(&mut app), DRAIN_PER_FRAME);
        let mut rest = 0;
        for _ in 0..10 {
            rest += conn.drain(&mut app);
        }
        assert!(rest >= 40 - 2 * DRAIN_PER_FRAME, "{rest}");
    }
}
