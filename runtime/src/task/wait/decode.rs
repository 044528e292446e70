//! Reading a wait record back: [`Wait`], what a task's record says it waits on.

use super::*;

/// Deadlines further than this from the first use in the process are shown as none
/// (the far deadline `Duration::MAX` saturates to is decades away).
pub(super) const NEVER: Duration = Duration::from_secs(10 * 365 * 86_400);

/// The instant deadlines are stored against (the first use in the process).
pub(super) fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// A decoded wait: what `telemetry::WaitReason` is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    Sleep(Option<Duration>),
    Timeout(Option<Duration>),
    Interval(Option<Duration>),
    Accept(Option<SocketAddr>),
    Read(Option<SocketAddr>),
    Write(Option<SocketAddr>),
    Recv(Option<SocketAddr>),
    Send(Option<SocketAddr>),
    Join(u64),
    Blocking(u64),
    Yield,
    /// A wait on a sync primitive: its tag and resource id (`sync::track`).
    Sync {
        tag: u8,
        resource: u64,
    },
    /// A label, with `…` after it if it was cut.
    Label(String),
    Unknown,
}

impl WaitWords {
    /// A copy that says one thing: `kind` (a reader's inference, never recorded).
    fn only(kind: u8) -> WaitWords {
        let mut w = WaitWords { poll: PollWord { used: 1, ..PollWord::default() }.pack(0), ..WaitWords::default() };
        w.heads[0] = kind as u32;
        w
    }

    /// A yield, as a reader infers it (nothing records it: see `yield_now`).
    pub(crate) fn yielded() -> WaitWords {
        WaitWords::only(W_YIELD)
    }

    /// An idle task's wait when its latest poll recorded none.
    pub(crate) fn unknown() -> WaitWords {
        WaitWords::only(W_UNKNOWN)
    }

    /// Whether the list comes from the poll that left the task with `polls` polls.
    pub(crate) fn is_current(&self, poll_number: u32) -> bool {
        (self.poll >> STAMP_SHIFT) as u32 == poll_number
    }

    /// Whether the list names any wait.
    pub(crate) fn names_any(&self) -> bool {
        PollWord::unpack(self.poll).used > 0
    }

    /// Decode, with time left until a deadline measured at `now`: the listed waits in
    /// the order they were recorded, and how many more were recorded than listed.
    pub(crate) fn decode(&self, now: Instant) -> (Vec<Wait>, u32) {
        let p = PollWord::unpack(self.poll);
        let used = p.used.min(SLOTS);
        let mut out = Vec::with_capacity(used);
        let mut i = 0;
        while i < used {
            let (head, a) = (self.heads[i], self.payloads[i]);
            // An IPv6 address's low half, from the slot after it.
            let spill = (head & F_ADDR_V6 != 0 && i + 1 < used && self.heads[i + 1] as u8 == W_SPILL)
                .then(|| self.payloads[i + 1]);
            i += 1 + spill.is_some() as usize;
            if let Some(w) = self.decode_slot(head, a, spill, now) {
                out.push(w);
            }
        }
        (out, p.more)
    }

    fn decode_slot(&self, head: u32, a: u64, spill: Option<u64>, now: Instant) -> Option<Wait> {
        let addr = || {
            let port = (head >> PORT_SHIFT) as u16;
            if head & F_ADDR_V4 != 0 {
                Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a as u32)), port))
            } else if head & F_ADDR_V6 != 0 {
                let ip = (a as u128) << 64 | spill? as u128;
                Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
            } else {
                None
            }
        };
        let left = || {
            (head & F_DEADLINE != 0).then(|| {
                let deadline = base() + Duration::from_nanos(a);
                deadline.saturating_duration_since(now)
            })
        };
        Some(match head as u8 {
            W_SLEEP => Wait::Sleep(left()),
            W_TIMEOUT => Wait::Timeout(left()),
            W_INTERVAL => Wait::Interval(left()),
            W_ACCEPT => Wait::Accept(addr()),
            W_READ => Wait::Read(addr()),
            W_WRITE => Wait::Write(addr()),
            W_RECV => Wait::Recv(addr()),
            W_SEND => Wait::Send(addr()),
            W_JOIN => Wait::Join(a),
            W_BLOCKING => Wait::Blocking(a),
            W_YIELD => Wait::Yield,
            W_SYNC => Wait::Sync { tag: (head >> SYNC_TAG_SHIFT) as u8, resource: a },
            W_LABEL => Wait::Label(self.label(head)),
            W_UNKNOWN => Wait::Unknown,
            _ => return None,
        })
    }

    /// A label's text, with `…` after it if it was cut.
    fn label(&self, head: u32) -> String {
        let (at, len, cut) = label_place(head);
        let mut bytes = [0u8; LABEL_BYTES];
        for (i, w) in self.text.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        // The writer cut at a character boundary; a lossy decode keeps a reader safe
        // from anything else.
        let mut s = String::from_utf8_lossy(&bytes[at..at + len]).into_owned();
        if cut {
            s.push('…');
        }
        s
    }
}
