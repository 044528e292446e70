//! Deadlocks: cycles in the wait-for graph of the live tasks, found by a reader, never by
//! a worker.
//!
//! # The graph
//! A node is an idle task whose latest poll waits only on other tasks: every wait it
//! recorded is a join on another task's `JoinHandle` (the edge goes to the joined task)
//! or a wait on a `volt::sync` primitive that one task holds alone (a `Mutex`, an
//! `RwLock`'s writer, a `OnceCell`'s initializer: the edge goes to the holder, read from
//! the primitive's probe, see `sync::track`). A task that also waits on anything else (a
//! sleep, a socket, a label, a semaphore's permits, a lock held by readers or outside any
//! task, a wait past the four its record lists) may be woken without the tasks it waits
//! on, so it is no node, and neither is a task that runs or sits in a run queue.
//!
//! A task's waits are alternatives (a `select!` over two locks wakes on either), so a
//! task is stuck only if every task it waits on is stuck: the reading drops, until
//! nothing changes, each node with an edge to a task that is not a node (or not stuck).
//! What is left is stuck for good; its strongly connected components with a cycle (two
//! tasks or more, or a task waiting on a lock it holds itself) are the deadlocks. Tasks
//! stuck behind a deadlock without being in its cycle are not reported with it.
//!
//! # Confirmation
//! A reading is not taken at one instant: a task's wait and the holder of the lock it
//! waits on are read one after the other, and a lock handed over between the two reads
//! can make a passing wait look like a cycle. A false report is worse than a late one, so
//! a cycle is reported only when two consecutive readings find the same cycle (the same
//! edges) and none of its tasks was polled between them (the same poll counts): a task
//! that has not run since cannot have let go of anything.
//!
//! # Cost
//! A reading walks the task list (as `Telemetry::tasks` does, without decoding the waits
//! of tasks that are not nodes) and looks up each lock a node waits on. It runs only
//! when someone asks (`Telemetry::deadlocks`, the console while a client is connected,
//! the exporter on a scrape), at most once every [`MIN_INTERVAL`]; between readings a
//! call returns what the last one found.

use super::Telemetry;
use crate::sync::track;
use crate::task::wait::GraphWait;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The least time between two readings of the graph.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(250);
/// A reading older than this cannot confirm a new one: a call after a long quiet spell
/// takes two readings, [`BOOTSTRAP_GAP`] apart.
const STALE: Duration = Duration::from_secs(1);
const BOOTSTRAP_GAP: Duration = Duration::from_millis(50);
/// Deadlocks remembered as reported (so each counts once), the oldest forgotten first.
/// Task ids are never reused, so a forgotten deadlock could count again only if it
/// outlived this many newer ones.
const REMEMBERED: usize = 4096;

/// A cycle of tasks each waiting on the next, which none of them can leave: found in two
/// consecutive readings of the wait-for graph (see [`Telemetry::deadlocks`]).
///
/// Its `Display` names each task with what it holds and what it wants: `task 3 "a" holds
/// Mutex #1, wants lock Mutex #2 (held by task 4); task 4 "b" holds Mutex #2, wants lock
/// Mutex #1 (held by task 3)`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deadlock {
    /// The tasks of the cycle, by id.
    pub tasks: Vec<DeadlockedTask>,
}

/// One task of a [`Deadlock`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadlockedTask {
    /// The task's id.
    pub id: u64,
    /// Its name (`volt::task::Builder::name`).
    pub name: Option<String>,
    /// The primitives of the cycle it holds (which other tasks of the cycle want).
    pub holds: Vec<HeldResource>,
    /// What it waits for in the cycle (the first such wait, when its poll recorded
    /// several).
    pub wants: DeadlockWant,
}

/// A primitive a deadlocked task holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldResource {
    /// The primitive: `Mutex`, `RwLock`, `OnceCell`.
    pub primitive: &'static str,
    /// Its resource id (as in [`SyncWait::resource`](super::SyncWait::resource)).
    pub resource: u64,
}

/// What a deadlocked task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadlockWant {
    /// A sync primitive another task of the cycle holds.
    Sync {
        /// The operation: `lock`, `read`, `write`, `init`.
        op: &'static str,
        /// The primitive: `Mutex`, `RwLock`, `OnceCell`.
        primitive: &'static str,
        /// Its resource id.
        resource: u64,
        /// The task holding it.
        holder: u64,
    },
    /// Another task of the cycle to finish (its `JoinHandle`).
    Join {
        /// The joined task's id.
        task_id: u64,
    },
}

impl fmt::Display for DeadlockWant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadlockWant::Sync { op, primitive, resource, holder } => {
                write!(f, "{op} {primitive} #{resource} (held by task {holder})")
            }
            DeadlockWant::Join { task_id } => write!(f, "join task {task_id}"),
        }
    }
}

impl fmt::Display for DeadlockedTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.id)?;
        if let Some(n) = &self.name {
            write!(f, " {n:?}")?;
        }
        for (i, h) in self.holds.iter().enumerate() {
            let sep = if i == 0 { " holds " } else { ", " };
            write!(f, "{sep}{} #{}", h.primitive, h.resource)?;
        }
        write!(f, "{}wants {}", if self.holds.is_empty() { " " } else { ", " }, self.wants)
    }
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.tasks.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            t.fmt(f)?;
        }
        Ok(())
    }
}

/// An edge of a cycle, as its identity counts it: the waiting task, then the resource
/// (kind 0) or the joined task (kind 1).
type EdgeKey = (u64, u8, u64);

/// The detector's memory between readings (see the module doc).
pub(crate) struct Detector {
    state: Mutex<State>,
    /// Deadlocks reported so far (`Snapshot::deadlocks_total`).
    total: AtomicU64,
}

#[derive(Default)]
struct State {
    /// When the last reading was taken.
    last: Option<Instant>,
    /// The cycles the last reading found: their edges, and their tasks' poll counts.
    seen: HashMap<Vec<EdgeKey>, Vec<(u64, u64)>>,
    /// The deadlocks confirmed by the last reading.
    confirmed: Vec<Deadlock>,
    /// The identities of the deadlocks reported, and their order for forgetting.
    reported: HashSet<Vec<EdgeKey>>,
    reported_order: VecDeque<Vec<EdgeKey>>,
}

impl Detector {
    pub(crate) fn new() -> Detector {
        Detector { state: Mutex::new(State::default()), total: AtomicU64::new(0) }
    }

    /// Deadlocks reported so far.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The deadlocks as of now: a reading if the last is older than [`MIN_INTERVAL`]
    /// (two, if it is older than [`STALE`] and the caller may wait), else the last
    /// reading's.
    pub(crate) fn check(&self, t: &Telemetry) -> Vec<Deadlock> {
        let mut st = self.lock();
        let due = st.last.is_none_or(|at| at.elapsed() >= MIN_INTERVAL);
        if due {
            let stale = st.last.is_none_or(|at| at.elapsed() >= STALE);
            // Never sleep on a worker: a call from inside a task confirms at its next call.
            if stale && crate::task::wait::current_task_id().is_none() {
                self.reading(&mut st, t);
                std::thread::sleep(BOOTSTRAP_GAP);
            }
            self.reading(&mut st, t);
        }
        st.confirmed.clone()
    }

    /// Take one reading of the graph, and confirm the cycles the previous one found.
    fn reading(&self, st: &mut State, t: &Telemetry) {
        let found = find_cycles(t);
        st.last = Some(Instant::now());
        let mut confirmed = Vec::new();
        let mut seen = HashMap::with_capacity(found.len());
        for c in found {
            let polls: Vec<(u64, u64)> = c.tasks.iter().map(|n| (n.id, n.polls)).collect();
            if st.seen.get(&c.edges) == Some(&polls) {
                if st.reported.insert(c.edges.clone()) {
                    self.total.fetch_add(1, Relaxed);
                    st.reported_order.push_back(c.edges.clone());
                    if st.reported_order.len() > REMEMBERED {
                        if let Some(old) = st.reported_order.pop_front() {
                            st.reported.remove(&old);
                        }
                    }
                }
                confirmed.push(c.deadlock());
            }
            seen.insert(c.edges, polls);
        }
        confirmed.sort_by_key(|d| d.tasks.first().map(|t| t.id));
        st.seen = seen;
        st.confirmed = confirmed;
    }
}

/// A task of the graph, as one reading found it.
struct Node {
    id: u64,
    polls: u64,
    name: Option<String>,
    waits: Vec<GraphWait>,
    /// Its edges: (the node waited on, the wait's index in `waits`).
    succ: Vec<(usize, usize)>,
}

/// A cycle one reading found.
struct Cycle {
    /// Its edges, sorted: its identity.
    edges: Vec<EdgeKey>,
    tasks: Vec<CycleTask>,
}

struct CycleTask {
    id: u64,
    polls: u64,
    name: Option<String>,
    holds: Vec<HeldResource>,
    wants: DeadlockWant,
}

impl Cycle {
    fn deadlock(&self) -> Deadlock {
        Deadlock {
            tasks: self
                .tasks
                .iter()
                .map(|t| DeadlockedTask { id: t.id, name: t.name.clone(), holds: t.holds.clone(), wants: t.wants })
                .collect(),
        }
    }
}

/// Whether a wait with this tag points at a holder the graph can follow.
fn follows(tag: u8) -> bool {
    track::is_exclusive(tag) || tag == track::T_RW_READ
}

/// One reading: walk the tasks, build the graph, keep the stuck part, and return its
/// cycles (see the module doc).
fn find_cycles(t: &Telemetry) -> Vec<Cycle> {
    let mut nodes: Vec<Node> = Vec::new();
    t.for_each_task(|row, name| {
        if row.state != super::TaskState::Idle {
            return;
        }
        let mut waits = Vec::new();
        let mut other = false;
        row.wait.graph_waits(|w| match w {
            GraphWait::Other => other = true,
            GraphWait::Sync { tag, .. } => {
                if follows(tag) {
                    waits.push(w);
                } else {
                    other = true;
                }
            }
            GraphWait::Join(_) => waits.push(w),
        });
        if !other && !waits.is_empty() {
            nodes.push(Node {
                id: row.id,
                polls: row.poll_number as u64,
                name: name.map(String::from),
                waits,
                succ: Vec::new(),
            });
        }
    });
    if nodes.is_empty() {
        return Vec::new();
    }
    let index: HashMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let mut holders: HashMap<u64, Option<u64>> = HashMap::new();
    // `free[i]`: node i may be woken without the other nodes (an edge leads out of them).
    let mut free = vec![false; nodes.len()];
    for (i, n) in nodes.iter_mut().enumerate() {
        for (wi, w) in n.waits.iter().enumerate() {
            let target = match *w {
                GraphWait::Join(id) => Some(id),
                GraphWait::Sync { resource, .. } => *holders.entry(resource).or_insert_with(|| {
                    track::read(resource).map(|p| p.holder).filter(|&h| h != 0 && h != track::OUTSIDE)
                }),
                GraphWait::Other => None,
            };
            match target.and_then(|id| index.get(&id)) {
                Some(&j) => n.succ.push((j, wi)),
                None => free[i] = true,
            }
        }
    }
    // Drop every node that can reach a free one: what is left is stuck for good.
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &(j, _) in &n.succ {
            preds[j].push(i);
        }
    }
    let mut work: Vec<usize> = (0..nodes.len()).filter(|&i| free[i]).collect();
    while let Some(j) = work.pop() {
        for &p in &preds[j] {
            if !free[p] {
                free[p] = true;
                work.push(p);
            }
        }
    }
    let stuck: Vec<bool> = free.iter().map(|f| !f).collect();
    let mut cycles = Vec::new();
    for comp in components(&nodes, &stuck) {
        let members: HashSet<usize> = comp.iter().copied().collect();
        let self_loop = comp.len() == 1 && nodes[comp[0]].succ.iter().any(|&(j, _)| j == comp[0]);
        if comp.len() < 2 && !self_loop {
            continue;
        }
        cycles.push(cycle(&nodes, &comp, &members));
    }
    cycles
}

/// The report of one strongly connected component of stuck nodes.
fn cycle(nodes: &[Node], comp: &[usize], members: &HashSet<usize>) -> Cycle {
    let mut edges = Vec::new();
    let mut holds: HashMap<u64, Vec<HeldResource>> = HashMap::new();
    let mut wants: HashMap<u64, DeadlockWant> = HashMap::new();
    for &i in comp {
        let n = &nodes[i];
        for &(j, wi) in n.succ.iter().filter(|(j, _)| members.contains(j)) {
            let holder = nodes[j].id;
            let want = match n.waits[wi] {
                GraphWait::Sync { tag, resource } => {
                    let (op, primitive) = track::tag_words(tag);
                    edges.push((n.id, 0, resource));
                    let h = holds.entry(holder).or_default();
                    if !h.iter().any(|r| r.resource == resource) {
                        h.push(HeldResource { primitive, resource });
                    }
                    DeadlockWant::Sync { op, primitive, resource, holder }
                }
                GraphWait::Join(task_id) => {
                    edges.push((n.id, 1, task_id));
                    DeadlockWant::Join { task_id }
                }
                GraphWait::Other => continue,
            };
            wants.entry(n.id).or_insert(want);
        }
    }
    edges.sort_unstable();
    edges.dedup();
    let mut tasks: Vec<CycleTask> = comp
        .iter()
        .filter_map(|&i| {
            let n = &nodes[i];
            let mut held = holds.remove(&n.id).unwrap_or_default();
            held.sort_by_key(|r| r.resource);
            Some(CycleTask { id: n.id, polls: n.polls, name: n.name.clone(), holds: held, wants: *wants.get(&n.id)? })
        })
        .collect();
    tasks.sort_by_key(|t| t.id);
    Cycle { edges, tasks }
}

/// The strongly connected components of the nodes marked in `keep`, through edges
/// between kept nodes (Tarjan's algorithm, without recursion: a chain of a million
/// waits must not overflow the reader's stack).
fn components(nodes: &[Node], keep: &[bool]) -> Vec<Vec<usize>> {
    const NONE: usize = usize::MAX;
    let n = nodes.len();
    let mut index = vec![NONE; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next = 0usize;
    let mut out = Vec::new();
    // (node, position in its successor list)
    let mut call: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if !keep[root] || index[root] != NONE {
            continue;
        }
        call.push((root, 0));
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            if let Some(&(w, _)) = nodes[v].succ.get(*pos) {
                *pos += 1;
                if !keep[w] {
                    continue;
                }
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(parent, _)) = call.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(comp);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u64, succ: &[usize]) -> Node {
        Node {
            id,
            polls: 1,
            name: None,
            waits: vec![GraphWait::Join(0); succ.len().max(1)],
            succ: succ.iter().enumerate().map(|(i, &j)| (j, i)).collect(),
        }
    }

    fn sorted(mut c: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
        for x in c.iter_mut() {
            x.sort_unstable();
        }
        c.sort();
        c
    }

    #[test]
    fn components_find_cycles_and_singletons() {
        // 0 -> 1 -> 0 (a cycle), 2 -> 0 (a tail), 3 -> 3 (a self-loop), 4 -> 5 -> 6 -> 4.
        let nodes = vec![
            node(10, &[1]),
            node(11, &[0]),
            node(12, &[0]),
            node(13, &[3]),
            node(14, &[5]),
            node(15, &[6]),
            node(16, &[4]),
        ];
        let keep = vec![true; nodes.len()];
        assert_eq!(sorted(components(&nodes, &keep)), vec![vec![0, 1], vec![2], vec![3], vec![4, 5, 6]]);
    }

    #[test]
    fn components_skip_dropped_nodes() {
        let nodes = vec![node(1, &[1]), node(2, &[0])];
        assert_eq!(sorted(components(&nodes, &[true, false])), vec![vec![0]]);
    }

    #[test]
    fn a_long_chain_needs_no_deep_stack() {
        let n = 200_000;
        let nodes: Vec<Node> = (0..n).map(|i| node(i as u64, &[(i + 1) % n])).collect();
        let keep = vec![true; n];
        let c = components(&nodes, &keep);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), n);
    }

    #[test]
    fn display_names_holds_and_wants() {
        let d = Deadlock {
            tasks: vec![
                DeadlockedTask {
                    id: 3,
                    name: Some("a".into()),
                    holds: vec![HeldResource { primitive: "Mutex", resource: 1 }],
                    wants: DeadlockWant::Sync { op: "lock", primitive: "Mutex", resource: 2, holder: 4 },
                },
                DeadlockedTask { id: 4, name: None, holds: vec![], wants: DeadlockWant::Join { task_id: 3 } },
            ],
        };
        assert_eq!(
            d.to_string(),
            "task 3 \"a\" holds Mutex #1, wants lock Mutex #2 (held by task 4); task 4 wants join task 3"
        );
    }
}
