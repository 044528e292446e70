//! The lookup table from a task's name (or spawn location) to its group: found once
//! per spawn, without a lock.

use super::*;

/// A group's key as the table keeps it.
#[derive(Clone, Copy)]
pub(super) enum Key {
    /// Not written yet (the slot's `ready` is clear).
    Unset,
    /// A name, cut to [`LABEL_BYTES`].
    Name {
        len: u8,
        bytes: [u8; LABEL_BYTES],
    },
    Spawned(&'static Location<'static>),
}

/// A key being looked up.
#[derive(Clone, Copy)]
pub(super) enum Lookup<'a> {
    Name(&'a str),
    Spawned(&'static Location<'static>),
}

impl Lookup<'_> {
    pub(super) fn hash(&self) -> u64 {
        match self {
            Lookup::Name(n) => finish(fold(0x6e61_6d65, n.as_bytes())),
            Lookup::Spawned(l) => {
                let h = fold(0x6c6f_6361, l.file().as_bytes());
                finish(mix(h, (l.line() as u64) << 32 | l.column() as u64))
            }
        }
    }

    pub(super) fn matches(&self, key: &Key) -> bool {
        match (self, key) {
            (Lookup::Name(n), Key::Name { len, bytes }) => cut(n).as_bytes() == &bytes[..*len as usize],
            (Lookup::Spawned(a), Key::Spawned(b)) => {
                std::ptr::eq(*a, *b) || (a.line() == b.line() && a.column() == b.column() && a.file() == b.file())
            }
            _ => false,
        }
    }

    pub(super) fn key(&self) -> Key {
        match self {
            Lookup::Name(n) => {
                let n = cut(n).as_bytes();
                let mut bytes = [0; LABEL_BYTES];
                bytes[..n.len()].copy_from_slice(n);
                Key::Name { len: n.len() as u8, bytes }
            }
            Lookup::Spawned(l) => Key::Spawned(l),
        }
    }
}

/// `n` cut to at most [`LABEL_BYTES`], at a character boundary.
pub(super) fn cut(n: &str) -> &str {
    if n.len() <= LABEL_BYTES {
        return n;
    }
    let mut end = LABEL_BYTES;
    while !n.is_char_boundary(end) {
        end -= 1;
    }
    &n[..end]
}

/// One step of the key hash: a multiply and a rotation per word.
#[inline(always)]
pub(super) fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26)
}

/// `bytes` into the hash `h`, eight at a time, then their length.
pub(super) fn fold(mut h: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = mix(h, u64::from_le_bytes(w.try_into().expect("eight bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(last));
    }
    mix(h, bytes.len() as u64)
}

/// Spread every input bit over the whole word (the slot index takes the low bits, the
/// slot's word the high ones).
pub(super) fn finish(mut h: u64) -> u64 {
    h ^= h >> 31;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 29;
    h
}

pub(super) struct Slot {
    /// 0: free; else the key's hash (high 56 bits, the top one set) and the group's
    /// index (low 8 bits). Set once.
    pub(super) word: AtomicU64,
    /// Set (release) once `key` is written.
    pub(super) ready: AtomicBool,
    /// Written once, by the thread whose claim set `word`, before `ready`.
    pub(super) key: UnsafeCell<Key>,
}

// SAFETY: `key` is written by one thread only (the one whose compare-and-swap claimed
// the slot), once, before it sets `ready` with release; every other access is a read
// after an acquire load saw `ready` set.
unsafe impl Sync for Slot {}

impl Slot {
    /// The key, once it is written.
    pub(super) fn key(&self) -> Option<Key> {
        if !self.ready.load(Acquire) {
            return None;
        }
        // SAFETY: `ready` is set: the key was written before it and never changes.
        Some(unsafe { *self.key.get() })
    }
}

/// The indices not yet given to a group, one bit each (see the module doc).
pub(super) struct FreeIndices([AtomicU64; 2]);

impl FreeIndices {
    pub(super) fn new() -> FreeIndices {
        let all = |from: usize| {
            let n = MAX_TASK_GROUPS.saturating_sub(from).min(64);
            if n == 64 {
                u64::MAX
            } else {
                (1u64 << n) - 1
            }
        };
        FreeIndices([AtomicU64::new(all(0)), AtomicU64::new(all(64))])
    }

    /// Take the lowest free index.
    pub(super) fn take(&self) -> Option<u8> {
        for (i, word) in self.0.iter().enumerate() {
            let mut v = word.load(Relaxed);
            while v != 0 {
                let bit = v.trailing_zeros();
                match word.compare_exchange_weak(v, v & !(1 << bit), AcqRel, Relaxed) {
                    Ok(_) => return Some((i * 64) as u8 + bit as u8),
                    Err(now) => v = now,
                }
            }
        }
        None
    }

    pub(super) fn give_back(&self, index: u8) {
        self.0[index as usize / 64].fetch_or(1 << (index % 64), Release);
    }
}

/// The table from keys to groups (see the module doc).
pub(super) struct GroupTable {
    pub(super) slots: Box<[Slot]>,
    pub(super) free: FreeIndices,
    /// For each group index, its slot plus one (0: not yet known), for the reader.
    pub(super) slot_of: Box<[AtomicU16]>,
}

impl GroupTable {
    pub(super) fn new() -> GroupTable {
        GroupTable {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    word: AtomicU64::new(0),
                    ready: AtomicBool::new(false),
                    key: UnsafeCell::new(Key::Unset),
                })
                .collect(),
            free: FreeIndices::new(),
            slot_of: (0..MAX_TASK_GROUPS).map(|_| AtomicU16::new(0)).collect(),
        }
    }

    /// The group of `key`, made if it is new and there is room.
    pub(super) fn group_of(&self, key: Lookup<'_>) -> GroupId {
        let h = key.hash();
        let tag = (h | 1 << 63) & !0xff;
        let mut i = h as usize & (SLOTS - 1);
        for _ in 0..SLOTS {
            let slot = &self.slots[i];
            let mut word = slot.word.load(Acquire);
            if word == 0 {
                // The key is not in the table: keys are never removed, and every probe
                // for one passes this slot before any slot after it.
                let Some(index) = self.free.take() else { return GroupId::OTHER };
                match slot.word.compare_exchange(0, tag | index as u64, AcqRel, Acquire) {
                    Ok(_) => {
                        // SAFETY: our claim is the one that set `word`: no other thread
                        // writes the key, and none reads it before `ready`.
                        unsafe { *slot.key.get() = key.key() };
                        slot.ready.store(true, Release);
                        self.slot_of[index as usize].store(i as u16 + 1, Release);
                        return GroupId(index);
                    }
                    Err(now) => {
                        self.free.give_back(index);
                        word = now;
                    }
                }
            }
            if word & !0xff == tag && slot.key().is_none_or(|k| key.matches(&k)) {
                return GroupId((word & 0xff) as u8);
            }
            i = (i + 1) & (SLOTS - 1);
        }
        GroupId::OTHER
    }

    /// Group `index`'s name and kind, once its key is written.
    pub(super) fn label(&self, index: usize) -> Option<(String, TaskGroupKind)> {
        if index == GroupId::OTHER.0 as usize {
            return Some((OTHER_TASK_GROUP.to_string(), TaskGroupKind::Other));
        }
        let slot = self.slot_of[index].load(Acquire).checked_sub(1)?;
        match self.slots[slot as usize].key()? {
            Key::Name { len, bytes } => {
                Some((String::from_utf8_lossy(&bytes[..len as usize]).into_owned(), TaskGroupKind::Named))
            }
            Key::Spawned(l) => Some((l.to_string(), TaskGroupKind::SpawnLocation)),
            Key::Unset => None,
        }
    }
}
