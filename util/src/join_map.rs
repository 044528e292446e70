//! [`JoinMap`]: tasks on Volt's runtime, each under a key, joined as they finish.

use hashbrown::HashTable;
use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use volt::runtime::Handle;
use volt::task::{AbortHandle, Id, JoinError, JoinSet, LocalSet};

/// Tasks spawned under keys (tokio-util's `JoinMap`, on Volt's `JoinSet`): each result
/// comes back with its key, a spawn under a key already in use aborts the task it
/// replaces (whose result then never comes back), and a task can be aborted by key.
/// Dropping the map aborts its tasks.
pub struct JoinMap<K, V, S = RandomState> {
    tasks: JoinSet<V>,
    /// Each task's key and abort handle, found by the key's hash.
    by_key: HashTable<(K, AbortHandle)>,
    /// Each task's key hash, by task id: how a result finds its entry.
    hash_of: HashMap<Id, u64>,
    hasher: S,
}

/// The keys of a [`JoinMap`], from [`JoinMap::keys`].
pub struct JoinMapKeys<'a, K, V> {
    iter: hashbrown::hash_table::Iter<'a, (K, AbortHandle)>,
    _value: std::marker::PhantomData<&'a V>,
}

impl<'a, K, V> Iterator for JoinMapKeys<'a, K, V> {
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        self.iter.next().map(|(k, _)| k)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<K, V> ExactSizeIterator for JoinMapKeys<'_, K, V> {}
impl<K, V> std::iter::FusedIterator for JoinMapKeys<'_, K, V> {}

impl<K: fmt::Debug, V> fmt::Debug for JoinMapKeys<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter.clone().map(|(k, _)| k)).finish()
    }
}

impl<K, V> JoinMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }

    /// An empty map with room for `capacity` tasks.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_hasher(capacity, RandomState::new())
    }
}

impl<K, V, S> JoinMap<K, V, S> {
    /// An empty map that hashes keys with `hash_builder`.
    pub fn with_hasher(hash_builder: S) -> Self {
        Self::with_capacity_and_hasher(0, hash_builder)
    }

    /// An empty map with room for `capacity` tasks, hashing keys with `hash_builder`.
    pub fn with_capacity_and_hasher(capacity: usize, hash_builder: S) -> Self {
        JoinMap {
            tasks: JoinSet::new(),
            by_key: HashTable::with_capacity(capacity),
            hash_of: HashMap::with_capacity(capacity),
            hasher: hash_builder,
        }
    }

    /// Tasks in the map (finished or not, until joined).
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Tasks it can hold without allocating.
    pub fn capacity(&self) -> usize {
        self.by_key.capacity()
    }

    /// Abort every task (they stay in the map until joined).
    pub fn abort_all(&mut self) {
        self.tasks.abort_all();
    }

    /// Empty the map without aborting anything: the tasks run on, unjoined.
    pub fn detach_all(&mut self) {
        self.tasks.detach_all();
        self.by_key.clear();
        self.hash_of.clear();
    }
}

impl<K: Hash + Eq, V: 'static, S: BuildHasher> JoinMap<K, V, S> {
    /// Spawn `task` on the current runtime under `key`, aborting the task `key` named.
    #[track_caller]
    pub fn spawn<F>(&mut self, key: K, task: F)
    where
        F: Future<Output = V> + Send + 'static,
        V: Send,
    {
        let handle = self.tasks.spawn(task);
        self.insert(key, handle);
    }

    /// Spawn `task` on `handle`'s runtime under `key`, aborting the task `key` named.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, key: K, task: F, handle: &Handle)
    where
        F: Future<Output = V> + Send + 'static,
        V: Send,
    {
        let handle = self.tasks.spawn_on(task, handle);
        self.insert(key, handle);
    }

    /// Run `f` on the current runtime's blocking pool under `key`, aborting the task
    /// `key` named.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, key: K, f: F)
    where
        F: FnOnce() -> V + Send + 'static,
        V: Send,
    {
        let handle = self.tasks.spawn_blocking(f);
        self.insert(key, handle);
    }

    /// Run `f` on `handle`'s blocking pool under `key`, aborting the task `key` named.
    #[track_caller]
    pub fn spawn_blocking_on<F>(&mut self, key: K, f: F, handle: &Handle)
    where
        F: FnOnce() -> V + Send + 'static,
        V: Send,
    {
        let handle = self.tasks.spawn_blocking_on(f, handle);
        self.insert(key, handle);
    }

    /// Spawn `task` on the current `LocalSet` under `key`, aborting the task `key` named.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, key: K, task: F)
    where
        F: Future<Output = V> + 'static,
    {
        let handle = self.tasks.spawn_local(task);
        self.insert(key, handle);
    }

    /// Spawn `task` on `local_set` under `key`, aborting the task `key` named.
    #[track_caller]
    pub fn spawn_local_on<F>(&mut self, key: K, task: F, local_set: &LocalSet)
    where
        F: Future<Output = V> + 'static,
    {
        let handle = self.tasks.spawn_local_on(task, local_set);
        self.insert(key, handle);
    }

    fn insert(&mut self, key: K, handle: AbortHandle) {
        let hash = self.hasher.hash_one(&key);
        let id = handle.id();
        let hasher = &self.hasher;
        match self.by_key.entry(hash, |(k, _)| *k == key, |(k, _)| hasher.hash_one(k)) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                // The task it replaces is aborted, and forgotten: its result is skipped.
                let old = std::mem::replace(&mut e.get_mut().1, handle);
                old.abort();
                self.hash_of.remove(&old.id());
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((key, handle));
            }
        }
        self.hash_of.insert(id, hash);
    }

    /// The next task to finish, with its key and result; `None` when the map is empty.
    pub async fn join_next(&mut self) -> Option<(K, Result<V, JoinError>)> {
        loop {
            let result = self.tasks.join_next_with_id().await?;
            if let Some(out) = self.claim(result) {
                return Some(out);
            }
        }
    }

    /// A finished task's key and result, without waiting.
    pub fn try_join_next(&mut self) -> Option<(K, Result<V, JoinError>)> {
        loop {
            let result = self.tasks.try_join_next_with_id()?;
            if let Some(out) = self.claim(result) {
                return Some(out);
            }
        }
    }

    /// The key of a joined result, taken out of the map; `None` for a task a spawn
    /// under its key replaced.
    fn claim(&mut self, result: Result<(Id, V), JoinError>) -> Option<(K, Result<V, JoinError>)> {
        let id = match &result {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        let hash = self.hash_of.remove(&id)?;
        let entry = self.by_key.find_entry(hash, |(_, h)| h.id() == id).ok()?;
        let ((key, _), _) = entry.remove();
        Some((key, result.map(|(_, v)| v)))
    }

    /// Abort every task, then wait for all of them to end.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Abort the task under `key`: true if there was one. It stays in the map until
    /// joined (its result is a cancellation, unless it finished first).
    pub fn abort<Q>(&mut self, key: &Q) -> bool
    where
        Q: Hash + Eq + ?Sized,
        K: Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        match self.by_key.find(hash, |(k, _)| k.borrow() == key) {
            Some((_, handle)) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    /// Abort every task whose key `predicate` holds for.
    pub fn abort_matching(&mut self, mut predicate: impl FnMut(&K) -> bool) {
        for (key, handle) in self.by_key.iter() {
            if predicate(key) {
                handle.abort();
            }
        }
    }

    /// The keys of the tasks in the map, in no particular order.
    pub fn keys(&self) -> JoinMapKeys<'_, K, V> {
        JoinMapKeys { iter: self.by_key.iter(), _value: std::marker::PhantomData }
    }

    /// Whether a task is under `key`.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        Q: Hash + Eq + ?Sized,
        K: Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        self.by_key.find(hash, |(k, _)| k.borrow() == key).is_some()
    }

    /// Whether the task of `task` is in the map.
    pub fn contains_task(&self, task: &Id) -> bool {
        self.hash_of.contains_key(task)
    }

    /// Make room for `additional` more tasks.
    pub fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.by_key.reserve(additional, |(k, _)| hasher.hash_one(k));
        self.hash_of.reserve(additional);
    }

    /// Give back the memory the tasks do not use.
    pub fn shrink_to_fit(&mut self) {
        let hasher = &self.hasher;
        self.by_key.shrink_to_fit(|(k, _)| hasher.hash_one(k));
        self.hash_of.shrink_to_fit();
    }

    /// Give back memory, keeping room for at least `min_capacity` tasks.
    pub fn shrink_to(&mut self, min_capacity: usize) {
        let hasher = &self.hasher;
        self.by_key.shrink_to(min_capacity, |(k, _)| hasher.hash_one(k));
        self.hash_of.shrink_to(min_capacity);
    }
}

impl<K: fmt::Debug, V, S> fmt::Debug for JoinMap<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.by_key.iter().map(|(k, h)| (k, h.id()))).finish()
    }
}

impl<K, V> Default for JoinMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}
