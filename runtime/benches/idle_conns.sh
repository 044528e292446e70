#!/usr/bin/env bash
# Memory per idle HTTP/1.1 connection: the `http_bench` example (axum's hello world on
# `volt::hyper::serve`, or on `axum::serve` with Tokio), holding N connections that each
# sent part of a request head (`GET / HTTP/1.1\r\nHost: x\r\n`) and then wait, as a slow
# or idle client would. Run by hand (not in CI); needs python3, and valgrind for HEAP=1.
#
#   bash runtime/benches/idle_conns.sh                   # 2,000 connections, 3 rounds
#   CONNS="2000 10000" ROUNDS=5 bash runtime/benches/idle_conns.sh
#   HEAP=1 bash runtime/benches/idle_conns.sh            # also live heap, under valgrind
#   PROTO=h2 bash runtime/benches/idle_conns.sh          # idle HTTP/2 connections instead
#   PROTO=keepalive bash runtime/benches/idle_conns.sh   # idle after one whole request
#
# With PROTO=h2 each connection sends the HTTP/2 preface and an empty SETTINGS frame
# (prior knowledge, as `curl --http2-prior-knowledge` starts), then nothing: an HTTP/2
# connection the server has set up, with no stream open. With PROTO=keepalive each makes
# one whole request, reads the answer, and keeps the connection open.
#
# Per server process (a fresh one each time, volt, volt-uring and tokio in turn;
# volt-uring is Volt on its io_uring I/O driver): its resident set
# (`VmRSS`) after 20 whole requests, then after the N connections were opened and 1.5 s
# of settling (2.5 s with PROTO=keepalive: `serve` gives hyper's buffers back once a
# kept-alive connection has waited 1 s); the difference divided by N is the figure. RSS counts only the pages
# touched, so a buffer allocated but not yet written costs less than its size.
#
# HEAP=1 adds, for 300 connections, the heap still allocated per connection when the
# server exits (valgrind's DHAT: the bytes of the live blocks at the end, minus those of a
# run with no idle connections), with the largest allocation sites: this is what the
# program holds, with no allocator in the count.
#
# Each connection is one file descriptor in the server and one in this script, so N is
# bounded by the open-file limit (`ulimit -n`).
set -euo pipefail
cd "$(dirname "$0")/../.."
CONNS=${CONNS:-2000}
ROUNDS=${ROUNDS:-3}
HEAP=${HEAP:-0}
PROTO=${PROTO:-http1}

cargo build --release -p volt-examples --example http_bench >&2
BIN=target/release/examples/http_bench

python3 - "$BIN" "$CONNS" "$ROUNDS" "$HEAP" "$PROTO" <<'EOF'
import json, os, re, signal, socket, subprocess, sys, tempfile, time

BIN, CONNS, ROUNDS, HEAP = sys.argv[1], [int(n) for n in sys.argv[2].split()], int(sys.argv[3]), sys.argv[4] == "1"
PROTO = sys.argv[5]
if PROTO == "h2":
    # The preface, then a SETTINGS frame with no settings (length 0, type 4, stream 0).
    HEAD = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
elif PROTO == "keepalive":
    HEAD = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
else:
    HEAD = b"GET / HTTP/1.1\r\nHost: x\r\n"

def rss_kib(pid):
    return int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))

def start(rt, wrap=()):
    # `volt-uring` is Volt on its io_uring I/O driver; the others are pinned to epoll.
    env = dict(os.environ, VOLT_IO_DRIVER="io_uring" if rt == "volt-uring" else "epoll")
    p = subprocess.Popen([*wrap, BIN, "--runtime", rt.split("-")[0], "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    addr = p.stdout.readline().split()[-1]
    host, port = addr.rsplit(":", 1)
    return p, (host, int(port))

def warm(addr, n=20):
    for _ in range(n):
        c = socket.create_connection(addr)
        c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while c.recv(4096):
            pass
        c.close()

def idle(addr, n):
    socks = []
    for _ in range(n):
        c = socket.create_connection(addr)
        c.sendall(HEAD)
        socks.append(c)
    if PROTO == "keepalive":
        for c in socks:
            got = b""
            while not got.endswith(b"Hello, world!"):
                got += c.recv(4096)
    return socks

def rss_per_conn(rt, n):
    p, addr = start(rt)
    try:
        warm(addr)
        time.sleep(0.3)
        before = rss_kib(p.pid)
        socks = idle(addr, n)
        # A kept-alive connection gives hyper's buffers back after waiting 1 s for its
        # next request: settle past that.
        time.sleep(2.5 if PROTO == "keepalive" else 1.5)
        after = rss_kib(p.pid)
    finally:
        p.kill()
        p.wait()
    for c in socks:
        c.close()
    return (after - before) * 1024 / n

def live_heap(rt, n):
    """Live bytes at exit under DHAT, and the top allocation sites per connection."""
    out = tempfile.mktemp(suffix=".dhat.json")
    p, addr = start(rt, ("valgrind", "--tool=dhat", f"--dhat-out-file={out}"))
    time.sleep(2)
    warm(addr, 5)
    socks = idle(addr, n)
    time.sleep(8)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
    for c in socks:
        c.close()
    d = json.load(open(out))
    os.unlink(out)
    def where(s):
        frames = [d["ftbl"][i] for i in s["fs"]]
        keep = [f for f in frames if any(k in f for k in ("hyper", "volt::", "tokio::", "axum"))]
        return (keep or frames)[0].split(": ", 1)[-1][:110]
    # Sites with the same innermost frame of interest are one site (a call reached from
    # two threads' stacks is two DHAT sites).
    by = {}
    for s in d["pps"]:
        if s.get("eb", 0):
            k = where(s)
            eb, ebk = by.get(k, (0, 0))
            by[k] = (eb + s["eb"], ebk + s.get("ebk", 0))
    top = sorted(by.items(), key=lambda kv: -kv[1][0])[:5]
    top = [(eb / n, ebk, k) for k, (eb, ebk) in top if n and ebk >= n]
    return sum(s.get("eb", 0) for s in d["pps"]), top

print(f"## RSS per idle {PROTO} connection (KiB)\n")
RTS = ("volt", "volt-uring", "tokio")
print("| connections | volt | volt-uring | tokio | volt/tokio | volt-uring/tokio |")
print("|---:|---|---|---|---:|---:|")
for n in CONNS:
    got = {rt: [] for rt in RTS}
    for _ in range(ROUNDS):
        for rt in RTS:
            got[rt].append(rss_per_conn(rt, n) / 1024)
    med = {rt: sorted(v)[len(v) // 2] for rt, v in got.items()}
    fmt = lambda v: ", ".join(f"{x:.1f}" for x in v)
    ratio = lambda rt: f"{med[rt] / med['tokio']:.2f}" if med["tokio"] > 0 else "-"
    print(f"| {n} | {' | '.join(fmt(got[rt]) for rt in RTS)} | {ratio('volt')} | {ratio('volt-uring')} |", flush=True)

if HEAP:
    n = 300
    print(f"\n## Live heap per idle {PROTO} connection at exit, {n} connections (valgrind DHAT)\n")
    for rt in ("volt", "tokio"):
        base, _ = live_heap(rt, 0)
        total, top = live_heap(rt, n)
        print(f"{rt}: {(total - base) / n / 1024:.1f} KiB per connection; largest sites:")
        for per, blocks, site in top:
            print(f"  {per:8.0f} B  ({blocks} blocks)  {site}")
EOF
