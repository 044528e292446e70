//! The keyspace, with expiry, and the pub/sub channels.
//!
//! The map sits behind a `std::sync::Mutex`: every critical section is a few map
//! operations with no `.await` inside, which is what Tokio recommends for such state.
//! Expired keys are removed by one background task that sleeps until the earliest
//! deadline and is woken (`Notify`) when a key gets an earlier one. A `GET` never returns
//! an expired key, even before that task has run.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, Notify};
use tokio::time::Instant;

/// Messages a subscriber may fall behind by before it misses some.
const CHANNEL_CAPACITY: usize = 1024;

/// A handle on the shared keyspace; clones share it. When the last handle drops, the
/// purge task ends.
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
    _owner: Arc<Owner>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the purge task: a new earliest deadline, or the end.
    purge: Notify,
}

#[derive(Default)]
struct State {
    entries: HashMap<Vec<u8>, Entry>,
    /// Keys by deadline, earliest first.
    expirations: BTreeSet<(Instant, Vec<u8>)>,
    channels: HashMap<Vec<u8>, broadcast::Sender<Vec<u8>>>,
    closed: bool,
}

struct Entry {
    value: Vec<u8>,
    expires_at: Option<Instant>,
}

/// Tells the purge task to end once every `Db` handle has dropped.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().closed = true;
        self.0.purge.notify_one();
    }
}

impl Db {
    /// A new, empty keyspace, and its purge task (spawned on the current runtime).
    pub fn new() -> Db {
        let shared = Arc::new(Shared { state: Mutex::new(State::default()), purge: Notify::new() });
        tokio::spawn(purge_expired_keys(Arc::clone(&shared)));
        Db { _owner: Arc::new(Owner(Arc::clone(&shared))), shared }
    }

    /// The value of `key`, unless it is missing or has expired.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let state = self.shared.state.lock().unwrap();
        let entry = state.entries.get(key)?;
        if entry.expires_at.is_some_and(|at| at <= Instant::now()) {
            return None;
        }
        Some(entry.value.clone())
    }

    /// Set `key` to `value`, to expire after `ttl` if given (replacing any earlier expiry).
    pub fn set(&self, key: Vec<u8>, value: Vec<u8>, ttl: Option<Duration>) {
        let expires_at = ttl.and_then(|ttl| Instant::now().checked_add(ttl));
        let mut state = self.shared.state.lock().unwrap();
        let earliest = state.expirations.first().map(|(at, _)| *at);
        if let Some(at) = expires_at {
            state.expirations.insert((at, key.clone()));
        }
        let old = state.entries.insert(key.clone(), Entry { value, expires_at });
        if let Some(at) = old.and_then(|e| e.expires_at) {
            state.expirations.remove(&(at, key));
        }
        drop(state);
        // The purge task sleeps until the earliest deadline: wake it for an earlier one.
        if expires_at.is_some_and(|at| earliest.is_none_or(|e| at < e)) {
            self.shared.purge.notify_one();
        }
    }

    /// How many keys are stored (expired ones the purge task has not yet removed
    /// included).
    pub fn len(&self) -> usize {
        self.shared.state.lock().unwrap().entries.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A receiver of the messages published on `channel` from now on.
    pub fn subscribe(&self, channel: &[u8]) -> broadcast::Receiver<Vec<u8>> {
        let mut state = self.shared.state.lock().unwrap();
        match state.channels.get(channel) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(CHANNEL_CAPACITY);
                state.channels.insert(channel.to_vec(), tx);
                rx
            }
        }
    }

    /// Publish `message` on `channel`; how many subscribers will receive it.
    pub fn publish(&self, channel: &[u8], message: Vec<u8>) -> usize {
        let mut state = self.shared.state.lock().unwrap();
        let Some(tx) = state.channels.get(channel) else { return 0 };
        match tx.send(message) {
            Ok(n) => n,
            Err(_) => {
                // Every subscriber has gone: forget the channel.
                state.channels.remove(channel);
                0
            }
        }
    }
}

impl Default for Db {
    fn default() -> Db {
        Db::new()
    }
}

/// Remove expired keys; the earliest deadline still to come, if any.
fn remove_expired(shared: &Shared) -> Option<Instant> {
    let mut state = shared.state.lock().unwrap();
    let now = Instant::now();
    while let Some((at, key)) = state.expirations.first().cloned() {
        if at > now {
            return Some(at);
        }
        state.expirations.pop_first();
        state.entries.remove(&key);
    }
    None
}

async fn purge_expired_keys(shared: Arc<Shared>) {
    loop {
        if shared.state.lock().unwrap().closed {
            return;
        }
        match remove_expired(&shared) {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = shared.purge.notified() => {}
                }
            }
            None => shared.purge.notified().await,
        }
    }
}
