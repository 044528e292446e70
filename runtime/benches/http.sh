#!/usr/bin/env bash
# HTTP server throughput, latency and CPU per request: the `http_bench` example (one axum
# route, `GET /` -> "Hello, world!") on Volt and on Tokio, 2 workers each, driven by `wrk`.
# Run by hand (not in CI); needs `wrk`, and `tmux` for the watched variant.
#
#   bash runtime/benches/http.sh                      # 5 runs per variant, 64 and 256 connections
#   RUNS=3 DURATION=10 CONNS="64" bash runtime/benches/http.sh
#
# Three variants, run in turn (volt, tokio, watched, volt, tokio, watched, ...) so that a
# slow spell of the machine hits all of them alike:
#   volt     Volt, `volt::hyper::serve`
#   tokio    Tokio's multi-thread runtime, `axum::serve`
#   watched  Volt with the event ring on (`--event-ring 4096`) and the console server
#            streaming to a `volt-console` that stays connected (in a detached tmux)
# and, when VARIANTS names them:
#   volt-uring Volt on its io_uring I/O driver (`VOLT_IO_DRIVER=io_uring`)
#   volt-nht Volt without `volt::hyper::serve`'s header-read timeout (`axum::serve` on
#            Tokio has none), so both servers do the same work per request
#   volt-nsm Volt without the stall monitor (`stall_threshold(None)`)
#   volt-sm200 Volt with a 200 ms stall threshold (the monitor samples every 100 ms)
#   ceiling-epoll, ceiling-uring, ceiling-uring-direct  the `io_ceiling` bench's
#            servers: no runtime, no hyper, a thread per worker with epoll readiness or
#            io_uring completions (the last with direct descriptors): what an io_uring
#            driver could gain at most (see `benches/io_ceiling.rs`)
#
# Server and wrk share the machine's cores unpinned: on a 2-core machine there is no core
# to give either one alone, so both runtimes are measured competing with the load
# generator for the CPU, as they would with any co-located client.
#
# Per run: wrk's requests/s and its p50/p99 (`--latency`), and the server's CPU time per
# request: its utime+stime from /proc/PID/stat read just before and just after the
# measured wrk run, divided by the requests wrk completed, and the utime part alone (the
# runtime, hyper and the handler; the rest is the kernel's TCP work and system calls,
# which on loopback include delivering the bytes to wrk). Because loopback charges each
# side for part of the other's work, the server's and wrk's CPU per request together are
# printed too. Each run is a fresh server
# process warmed by a 1 s wrk run first. The table gives the median of the runs; the
# Volt/Tokio ratios compare medians (for p99 and CPU, below 1 means Volt is better), and
# the watching cost is watched/volt. The "paired" ratios are the median of the ratios of
# runs made back to back (run r of each variant), which the machine's slow and fast
# spells move less, each with a 90% interval from resampling the pairs.
#
# Then one more run per variant and connection count, not timed, with the server's system
# calls and context switches counted by `perf stat` (kernel tracepoints; COUNT=0 skips
# it, and it is skipped where perf or the tracepoint is missing), per request.
#
# The machine may be shared. Each run also measures the CPU time that went to neither the
# server, wrk nor the console client (from /proc/stat); a run where that exceeds
# OTHERS_MAX percent of the machine (default 10) is thrown away and run again after a
# pause, up to RETRIES times (default 6), and the share is printed with every run.
#
# BIN=path/to/http_bench skips the build (to compare builds kept aside).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}
DURATION=${DURATION:-5}
CONNS=${CONNS:-"64 256"}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-2}
OTHERS_MAX=${OTHERS_MAX:-10}
VARIANTS=${VARIANTS:-"volt tokio watched"}
RETRIES=${RETRIES:-6}

command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
command -v tmux >/dev/null || { echo "tmux is needed for the watched variant (apt-get install tmux)"; exit 1; }

if [ -z "${BIN:-}" ]; then
  cargo build --release -p volt-examples --example http_bench -p volt-console --bin volt-console >&2
  BIN=target/release/examples/http_bench
fi
CONSOLE=${CONSOLE:-target/release/volt-console}
case " $VARIANTS " in
  *" ceiling-"*)
    if [ -z "${CEILING_BIN:-}" ]; then
      CEILING_BIN=$(cargo bench -p volt --bench io_ceiling --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "io_ceiling" and m.get("executable"):
        print(m["executable"])')
    fi ;;
esac

out=$(mktemp -d)
server_pid=
session="volt-http-bench-$$"
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  tmux kill-session -t "$session" 2>/dev/null || true
}
trap cleanup EXIT

# A free port: the kernel picks one for a listener we close at once.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
user_ticks() { awk '{print $14}' "/proc/$1/stat"; }
# Busy ticks of the whole machine (user, nice, system, irq, softirq, steal).
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# Run wrk; print the CPU ticks it used.
wrk_timed() {
  python3 - "$@" <<'PY'
import os, resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=open(os.environ["WRK_OUT"], "w"), check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(round((r.ru_utime + r.ru_stime) * os.sysconf("SC_CLK_TCK")))
PY
}

# run VARIANT CONNS: one measured run; appends "rps p50_ms p99_ms cpu_us_per_req others%"
# to $out/VARIANT.CONNS, or returns 1 if the machine was too busy with other work.
run() {
  local variant=$1 conns=$2 port args=() envs=(VOLT_IO_DRIVER=epoll) console_port= console_pid=
  port=$(free_port)
  case $variant in
    volt) args=(--runtime volt) ;;
    volt-uring) args=(--runtime volt); envs=(VOLT_IO_DRIVER=io_uring) ;;
    volt-nht) args=(--runtime volt --no-header-timeout) ;;
    volt-nsm) args=(--runtime volt --no-stall-monitor) ;;
    volt-sm200) args=(--runtime volt --stall-threshold-ms 200) ;;
    tokio) args=(--runtime tokio) ;;
    ceiling-epoll) args=(--mode epoll) ;;
    ceiling-uring) args=(--mode uring) ;;
    ceiling-uring-direct) args=(--mode uring-direct) ;;
    watched)
      console_port=$(free_port)
      args=(--runtime volt --event-ring 4096 --console --console-bind "127.0.0.1:$console_port") ;;
  esac
  local bin=$BIN
  case $variant in ceiling-*) bin=$CEILING_BIN ;; esac
  env "${envs[@]}" "$bin" "${args[@]}" --workers "$WORKERS" --addr "127.0.0.1:$port" > "$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do grep -qs "listening on" "$out/server.log" && break; sleep 0.05; done
  grep -q "listening on" "$out/server.log" || { cat "$out/server.log"; exit 1; }
  if [ "$variant" = volt-uring ]; then
    sleep 0.05
    grep -q "I/O driver: IoUring" "$out/server.log" || { echo "volt-uring is not on io_uring:"; cat "$out/server.log"; exit 1; }
  fi
  if [ -n "$console_port" ]; then
    tmux new-session -d -s "$session" -x 200 -y 50 "exec $CONSOLE 127.0.0.1:$console_port"
    console_pid=$(tmux list-panes -t "$session" -F '#{pane_pid}')
  fi
  wrk -t"$THREADS" -c"$conns" -d1s "http://127.0.0.1:$port/" > /dev/null
  local t0 t1 u0 u1 m0 m1 c0=0 c1=0 wrk_ticks perf_pid=
  if [ "${COUNTING:-0}" = 1 ]; then
    # System calls and context switches of the server (all its threads), counted in
    # the kernel for the measured run only.
    perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$server_pid" -o "$out/perf.txt" &
    perf_pid=$!
    sleep 0.2
  fi
  m0=$(machine_ticks)
  t0=$(cpu_ticks "$server_pid")
  u0=$(user_ticks "$server_pid")
  [ -n "$console_pid" ] && c0=$(cpu_ticks "$console_pid")
  wrk_ticks=$(WRK_OUT="$out/wrk.txt" wrk_timed wrk -t"$THREADS" -c"$conns" -d"${DURATION}s" --latency "http://127.0.0.1:$port/")
  t1=$(cpu_ticks "$server_pid")
  u1=$(user_ticks "$server_pid")
  [ -n "$console_pid" ] && c1=$(cpu_ticks "$console_pid")
  m1=$(machine_ticks)
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid"
    wait "$perf_pid" 2>/dev/null || true
  fi
  if [ -n "$console_port" ]; then
    # The client must have stayed connected for the whole run.
    tmux has-session -t "$session" 2>/dev/null || { echo "volt-console exited during the run"; exit 1; }
    tmux kill-session -t "$session"
  fi
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  local others=$(((m1 - m0) - (t1 - t0) - (c1 - c0) - wrk_ticks))
  local others_pct=$((others * 100 / ($(nproc) * DURATION * $(getconf CLK_TCK))))
  if [ -n "$perf_pid" ]; then
    python3 - "$out/wrk.txt" "$out/perf.txt" >> "$out/$variant.$conns.count" <<'PY'
import re, sys
reqs = int(re.search(r"(\d+) requests in", open(sys.argv[1]).read()).group(1))
counts = {}
for line in open(sys.argv[2]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].isdigit():
        counts[f[2]] = int(f[0])
print(f"{counts['raw_syscalls:sys_enter'] / reqs:.3f} {counts['context-switches'] / reqs:.3f}")
PY
    echo "  $variant c=$conns: system calls and context switches per request $(tail -1 "$out/$variant.$conns.count")" >&2
    return 0
  fi
  if [ "$others_pct" -gt "$OTHERS_MAX" ]; then
    echo "  $variant c=$conns: other processes took ${others_pct}% of the machine; run again" >&2
    return 1
  fi
  python3 - "$out/wrk.txt" "$((t1 - t0))" "$(getconf CLK_TCK)" "$others_pct" "$((u1 - u0))" "$wrk_ticks" >> "$out/$variant.$conns" <<'PY'
import re, sys
text, ticks, hz, others = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
user, wrk = int(sys.argv[5]), int(sys.argv[6])
def ms(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
reqs = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p50 = ms(re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1))
errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", text)
if errors:
    print(f"wrk reported errors: {errors.group(0)}", file=sys.stderr)
print(f"{rps:.0f} {p50:.3f} {p99:.3f} {ticks / hz * 1e6 / reqs:.2f} {others} {user / hz * 1e6 / reqs:.2f} {(ticks + wrk) / hz * 1e6 / reqs:.2f}")
PY
  echo "  $variant c=$conns: $(tail -1 "$out/$variant.$conns")" >&2
}

for conns in $CONNS; do
  for r in $(seq 1 "$RUNS"); do
    for variant in $VARIANTS; do
      tries=0
      until run "$variant" "$conns"; do
        tries=$((tries + 1))
        [ "$tries" -ge "$RETRIES" ] && { echo "the machine stayed busy; giving up" >&2; exit 1; }
        sleep 10
      done
    done
  done
done

# One more run of each variant with the server's system calls and context switches
# counted (`perf stat`, kernel tracepoints), apart from the timed runs above: counting
# each system call costs the server a little, so these runs are not timed.
COUNT=${COUNT:-$(command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1 && echo 1 || echo 0)}
if [ "$COUNT" = 1 ]; then
  for conns in $CONNS; do
    for variant in $VARIANTS; do
      COUNTING=1 run "$variant" "$conns"
    done
  done
fi

python3 - "$out" "$CONNS" "$RUNS" "$DURATION" "$WORKERS" "$VARIANTS" <<'PY'
import statistics, sys
d, conns, runs, dur, workers = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4], sys.argv[5]
variants = sys.argv[6].split()
def load(v, c):
    rows = [list(map(float, l.split())) for l in open(f"{d}/{v}.{c}")]
    cols = list(zip(*rows))
    return [statistics.median(col) for col in cols[:4]] + [statistics.median(cols[5]), statistics.median(cols[6])], rows
print(f"wrk -t2 -d{dur}s --latency, {workers} workers each, {runs} alternating runs per variant, medians\n")
print("| conns | variant | requests/s | p50 | p99 | CPU/request | of it in user space |")
print("|---:|---|---:|---:|---:|---:|---:|")
meds = {}
for c in conns:
    meds[c] = {v: load(v, c)[0] for v in variants}
    for v in variants:
        rps, p50, p99, cpu, user, _ = meds[c][v]
        print(f"| {c} | {v} | {rps:,.0f} | {p50:.2f} ms | {p99:.2f} ms | {cpu:.1f} µs | {user:.2f} µs |")
if "tokio" in variants:
    print("\n| conns | variant | /Tokio requests/s | /Tokio p99 | /Tokio CPU/request |")
    print("|---:|---|---:|---:|---:|")
    for c in conns:
        t = meds[c]["tokio"]
        for v in variants:
            if v in ("tokio", "watched"):
                continue
            m = meds[c][v]
            print(f"| {c} | {v} | {m[0]/t[0]:.2f} | {m[2]/t[2]:.2f} | {m[3]/t[3]:.2f} |")
if "tokio" in variants:
    # Runs r of two variants ran back to back, so the machine's state (which swings
    # between a fast and a slow mode for seconds at a time, whatever runs) is mostly
    # the same for both: the median of these per-run ratios is less moved by how many
    # runs of each variant fell in each mode than the ratio of the medians above.
    # Each paired ratio comes with a 90% interval from resampling the pairs (2,000
    # bootstrap draws of the median of the per-run ratios): an interval that holds 1.00
    # says these runs cannot tell the two runtimes apart on that figure.
    import random
    rng = random.Random(1)
    def median_and_interval(ratios):
        draws = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
        return statistics.median(ratios), draws[100], draws[1899]
    print("\n| conns | variant | paired /Tokio requests/s | paired /Tokio p99 | paired /Tokio CPU/request |")
    print("|---:|---|---:|---:|---:|")
    for c in conns:
        t = load("tokio", c)[1]
        for v in variants:
            if v in ("tokio", "watched"):
                continue
            m = load(v, c)[1]
            cells = []
            for i in (0, 2, 3):
                med, lo, hi = median_and_interval([a[i] / b[i] for a, b in zip(m, t)])
                cells.append(f"{med:.2f} ({lo:.2f}-{hi:.2f})")
            print(f"| {c} | {v} | " + " | ".join(cells) + " |")
if "volt" in variants and "watched" in variants:
    print("\n| conns | watching cost (watched/volt CPU/request) | watched/volt requests/s |")
    print("|---:|---:|---:|")
    for c in conns:
        v, w = meds[c]["volt"], meds[c]["watched"]
        print(f"| {c} | {w[3]/v[3]:.2f} | {w[0]/v[0]:.2f} |")
uring = [v for v in ("ceiling-uring", "ceiling-uring-direct") if v in variants]
if "ceiling-epoll" in variants and uring:
    # The same servers but for the system-call interface: what completions could save.
    print("\n| conns | variant | /ceiling-epoll requests/s | p99 | CPU/request | user-space CPU/request | server and wrk CPU/request |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for c in conns:
        e = meds[c]["ceiling-epoll"]
        for v in uring:
            u = meds[c][v]
            print(f"| {c} | {v} | {u[0]/e[0]:.2f} | {u[2]/e[2]:.2f} | {u[3]/e[3]:.2f} | {u[4]/e[4]:.2f} | {u[5]/e[5]:.2f} |")
import os
if all(os.path.exists(f"{d}/{v}.{c}.count") for c in conns for v in variants):
    print("\n| conns | variant | system calls/request | context switches/request |")
    print("|---:|---|---:|---:|")
    for c in conns:
        for v in variants:
            sc, cs = map(float, open(f"{d}/{v}.{c}.count").read().split())
            print(f"| {c} | {v} | {sc:.2f} | {cs:.3f} |")
print("\nEvery run (requests/s, p50 ms, p99 ms, CPU µs/request, % of the machine other processes took, user-space CPU µs/request, server and wrk CPU µs/request):")
for c in conns:
    for v in variants:
        print(f"  c={c} {v}: " + "; ".join(" ".join(f"{x:g}" for x in r) for r in load(v, c)[1]))
PY
