use super::*;

fn v4_head(kind: u8, addr: SocketAddr) -> (u32, u64) {
    let SocketAddr::V4(v4) = addr else { unreachable!() };
    (kind as u32 | F_ADDR_V4 | (v4.port() as u32) << PORT_SHIFT, u32::from(*v4.ip()) as u64)
}

fn waits(r: &WaitRecord, now: Instant) -> (Vec<Wait>, u32) {
    r.read().expect("no writer races this test").decode(now)
}

#[test]
fn records_round_trip_through_the_words() {
    let r = WaitRecord::default();
    let now = Instant::now();
    assert_eq!(waits(&r, now), (vec![], 0), "a new record lists nothing");
    assert!(!r.read().unwrap().names_any());
    let v6: SocketAddr = "[2001:db8::7]:5000".parse().unwrap();
    let v4: SocketAddr = "127.0.0.1:5000".parse().unwrap();
    let ip = u128::from(
        *match v6 {
            SocketAddr::V6(a) => a,
            _ => unreachable!(),
        }
        .ip(),
    );
    let at = (now + Duration::from_secs(3)).duration_since(base()).as_nanos() as u64;
    type Write = Box<dyn Fn(&WaitRecord, u32)>;
    let cases: Vec<(Write, Wait)> = vec![
        (Box::new(|r, s| r.push(s, W_JOIN as u32, 42, None)), Wait::Join(42)),
        (
            Box::new(move |r, s| {
                let head = W_READ as u32 | F_ADDR_V6 | 5000 << PORT_SHIFT;
                r.push(s, head, (ip >> 64) as u64, Some(ip as u64))
            }),
            Wait::Read(Some(v6)),
        ),
        (
            Box::new(move |r, s| {
                let (h, a) = v4_head(W_ACCEPT, v4);
                r.push(s, h, a, None)
            }),
            Wait::Accept(Some(v4)),
        ),
        (Box::new(|r, s| r.put_label(s, "a channel", usize::MAX)), Wait::Label("a channel".into())),
        (
            Box::new(move |r, s| r.push(s, W_SLEEP as u32 | F_DEADLINE, at, None)),
            Wait::Sleep(Some(Duration::from_secs(3))),
        ),
        (Box::new(|r, s| r.push(s, W_TIMEOUT as u32, 0, None)), Wait::Timeout(None)),
    ];
    // Each in a poll of its own: the list of a new poll starts afresh.
    for (stamp, (write, want)) in (1..).zip(cases) {
        write(&r, stamp);
        assert_eq!(waits(&r, now), (vec![want], 0));
        let w = r.read().unwrap();
        assert!(w.is_current(stamp) && !w.is_current(stamp.wrapping_add(1)) && !w.is_current(stamp.wrapping_sub(1)));
    }
    assert_eq!(WaitWords::unknown().decode(now), (vec![Wait::Unknown], 0));
    assert_eq!(WaitWords::yielded().decode(now), (vec![Wait::Yield], 0));
}

/// One poll's waits are listed in order, a repeat once, the ones past the slots
/// counted; an IPv6 address that no longer fits is counted, not half listed.
#[test]
fn a_poll_lists_its_waits_in_order_once_each_and_counts_the_rest() {
    let r = WaitRecord::default();
    let now = Instant::now();
    let v6 = |r: &WaitRecord| r.push(9, W_WRITE as u32 | F_ADDR_V6 | 80 << PORT_SHIFT, 1, Some(2));
    let v6_addr: SocketAddr = "[::1:0:0:0:2]:80".parse().unwrap();
    r.push(9, W_JOIN as u32, 1, None);
    v6(&r);
    r.push(9, W_JOIN as u32, 1, None);
    v6(&r);
    assert_eq!(waits(&r, now), (vec![Wait::Join(1), Wait::Write(Some(v6_addr))], 0), "repeats listed once");
    r.push(9, W_JOIN as u32, 2, None);
    v6(&r);
    assert_eq!(waits(&r, now), (vec![Wait::Join(1), Wait::Write(Some(v6_addr)), Wait::Join(2)], 0), "full");
    v6(&r);
    r.push(9, W_JOIN as u32, 3, None);
    r.put_label(9, "late", usize::MAX);
    assert_eq!(waits(&r, now), (vec![Wait::Join(1), Wait::Write(Some(v6_addr)), Wait::Join(2)], 2));
    // With one slot left, an IPv6 address (two slots) is counted, not half listed.
    r.push(11, W_JOIN as u32, 1, None);
    r.push(11, W_JOIN as u32, 2, None);
    r.push(11, W_JOIN as u32, 3, None);
    r.push(11, W_READ as u32 | F_ADDR_V6, 5, Some(6));
    r.push(11, W_JOIN as u32, 4, None);
    assert_eq!(waits(&r, now), (vec![Wait::Join(1), Wait::Join(2), Wait::Join(3), Wait::Join(4)], 1));
    // The next poll starts afresh.
    r.push(12, W_JOIN as u32, 7, None);
    assert_eq!(waits(&r, now), (vec![Wait::Join(7)], 0));
}

/// Labels are copied into the record: an owned one is readable after it is dropped,
/// a long one is cut at a character boundary and marked, and the labels of a poll
/// share the bytes.
#[test]
fn labels_are_copied_cut_and_marked() {
    let r = WaitRecord::default();
    let now = Instant::now();
    let owned = format!("GET /users/{}", 12345);
    r.put_label(1, &owned, usize::MAX);
    drop(owned);
    assert_eq!(waits(&r, now).0, vec![Wait::Label("GET /users/12345".into())]);
    // 38 bytes of 'x', then a 3-byte character across the 40-byte limit.
    let long = format!("{}€ and more", "x".repeat(38));
    r.put_label(2, &long, usize::MAX);
    assert_eq!(waits(&r, now).0, vec![Wait::Label(format!("{}…", "x".repeat(38)))]);
    r.put_label(2, &long, usize::MAX);
    assert_eq!(waits(&r, now).0.len(), 1, "the same cut label is a repeat");
    // Two labels in one poll: the second gets what the first left.
    r.put_label(3, "db pool permit", usize::MAX);
    r.put_label(3, "a lock on the user table, row 12345678", usize::MAX);
    r.put_label(3, "third", usize::MAX);
    let (w, more) = waits(&r, now);
    assert_eq!(
        w,
        vec![
            Wait::Label("db pool permit".into()),
            Wait::Label("a lock on the user table, …".into()),
            Wait::Label("…".into())
        ]
    );
    assert_eq!(more, 0);
}

/// Two labels in one poll, of every pair of lengths from 0 to the whole label room, each
/// at every offset the first leaves it: both read back as written (cut where the room
/// ends), whichever words of the label bytes they start and end in.
#[test]
fn labels_read_back_at_every_offset_and_length() {
    let now = Instant::now();
    // No two of its substrings that start at different places are equal (no character
    // repeats), so the second label is never a repeat of the first.
    let text: String = (0..2 * LABEL_BYTES + 4).map(|i| (b'!' + i as u8) as char).collect();
    let mut stamp = 0;
    // Under Miri every third offset and length (which still meets every place in a word,
    // three being prime to its size) and the last ones: each case is interpreted.
    let step = if cfg!(miri) { 3 } else { 1 };
    for a in (0..=LABEL_BYTES).step_by(step).chain([LABEL_BYTES]) {
        for b in (1..=LABEL_BYTES + 2).step_by(step).chain([LABEL_BYTES + 2]) {
            stamp += 1;
            let r = WaitRecord::default();
            let (first, second) = (&text[..a], &text[a..a + b]);
            if a > 0 {
                r.put_label(stamp, first, usize::MAX);
            }
            r.put_label(stamp, second, usize::MAX);
            let fits = b.min(LABEL_BYTES - a);
            let cut = if fits < b { "…" } else { "" };
            let mut want = Vec::new();
            if a > 0 {
                want.push(Wait::Label(first.into()));
            }
            want.push(Wait::Label(format!("{}{cut}", &second[..fits])));
            assert_eq!(waits(&r, now).0, want, "first {a} bytes, second {b}");
        }
    }
}

/// A wrapper's label goes where its future's waits begin, ahead of them; on a full
/// list the last wait makes room (both slots of an IPv6 address).
#[test]
fn a_wrappers_label_goes_in_front_of_its_futures_waits() {
    let r = WaitRecord::default();
    let now = Instant::now();
    r.push(4, W_JOIN as u32, 1, None);
    let mark = r.current(4);
    r.push(4, W_JOIN as u32, 2, None);
    r.push(4, W_JOIN as u32, 3, None);
    r.put_label(4, "outer", mark.used);
    assert_eq!(waits(&r, now), (vec![Wait::Join(1), Wait::Label("outer".into()), Wait::Join(2), Wait::Join(3)], 0));
    r.put_label(4, "outer", mark.used);
    assert_eq!(waits(&r, now).0.len(), 4, "a repeat");
    r.put_label(4, "front", 0);
    assert_eq!(
        waits(&r, now),
        (vec![Wait::Label("front".into()), Wait::Join(1), Wait::Label("outer".into()), Wait::Join(2)], 1)
    );
    r.put_label(4, "past the end", SLOTS);
    assert_eq!(waits(&r, now).1, 2);
    r.push(5, W_JOIN as u32, 1, None);
    r.push(5, W_READ as u32 | F_ADDR_V6, 5, Some(6));
    r.push(5, W_JOIN as u32, 2, None);
    r.put_label(5, "mid", 1);
    let (w, more) = waits(&r, now);
    assert_eq!((w.len(), more), (3, 1), "{w:?}");
    assert_eq!(w[1], Wait::Label("mid".into()));
    assert!(matches!(w[2], Wait::Read(Some(_))), "{w:?}");
}

/// A sync wait keeps its tag and resource id through the record.
#[test]
fn a_sync_wait_round_trips() {
    let r = WaitRecord::default();
    let now = Instant::now();
    r.push(6, W_SYNC as u32 | 4 << SYNC_TAG_SHIFT, 1234, None);
    r.push(6, W_SYNC as u32 | 4 << SYNC_TAG_SHIFT, 1234, None);
    r.push(6, W_SYNC as u32 | 1 << SYNC_TAG_SHIFT, 99, None);
    assert_eq!(
        waits(&r, now),
        (vec![Wait::Sync { tag: 4, resource: 1234 }, Wait::Sync { tag: 1, resource: 99 }], 0),
        "a repeat is listed once"
    );
}

/// The record stays small: it lives in every task's statistics.
#[test]
fn the_record_is_104_bytes() {
    assert_eq!(std::mem::size_of::<WaitRecord>(), 104);
}

#[test]
fn outside_a_poll_nothing_is_recorded_and_the_source_is_outside() {
    record_label("x");
    record_task(W_JOIN, 3);
    assert!(!Mark::now().unchanged(), "no task: nothing to compare");
    assert_eq!(wake_source(), SRC_OUTSIDE as u64);
    {
        let _g = SourceGuard::new(SRC_TIMER);
        assert_eq!(wake_source(), SRC_TIMER as u64);
        let _h = SourceGuard::new(SRC_IO);
        assert_eq!(wake_source(), SRC_IO as u64);
    }
    assert_eq!(wake_source(), SRC_OUTSIDE as u64);
}
