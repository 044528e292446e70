#!/usr/bin/env bash
# The console at scale: N live sleeping tasks (default 100000 and 1000000), measured
# with no client, with `volt-console --once --json`, and with the TUI in tmux.
#
#   console-tui/benches/million.sh [N...]
#
# Reports per N: the `volt-console` server thread's CPU over 10 s with no client and
# with one TUI connected (utime+stime from /proc/<pid>/task/<tid>/stat), the wall time
# of `--once --json` (default 1000 tasks) and of `--once --json --tasks all`, the TUI's
# RSS (VmRSS), and the time from a key (tmux send-keys) until the screen shows its
# effect (polling `tmux capture-pane` every 5 ms, so each figure includes up to 5 ms of
# polling and tmux's own latency; `n` and the first `f` wait for the server's page),
# and the same key's time inside the TUI, from reading the key to drawing the frame that
# shows its effect (VOLT_CONSOLE_KEY_TIMES).
# The machine is shared: the CPU figures are counts of ticks (10 ms each), the times
# are wall-clock and noisy; run it twice and compare.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES=("${@:-100000 1000000}")
[ $# -eq 0 ] && SIZES=(100000 1000000)
cargo build --release -q -p volt-console --bin volt-console --example sleepers
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/volt-console
SLEEPERS=$TARGET/release/examples/sleepers
HZ=$(getconf CLK_TCK)
PORT=${PORT:-16670}
ADDR=127.0.0.1:$PORT

thread_ticks() { # pid comm -> utime+stime of the first thread named comm
    local pid=$1 comm=$2 t
    for t in /proc/"$pid"/task/*; do
        if [ "$(cat "$t/comm" 2>/dev/null)" = "$comm" ]; then
            awk '{print $14+$15}' "$t/stat"
            return
        fi
    done
    echo 0
}

cpu_pct() { # pid comm seconds -> percent of one core
    local a b
    a=$(thread_ticks "$1" "$2")
    sleep "$3"
    b=$(thread_ticks "$1" "$2")
    awk -v a="$a" -v b="$b" -v hz="$HZ" -v s="$3" 'BEGIN{printf "%.2f", (b-a)/hz/s*100}'
}

ms_since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN{printf "%.0f", (b-a)/1e6}'; }

key_ms() { # key, text the screen shows once the key took effect
    local t0 i shown= lines
    lines=$(wc -l < "$keylog")
    t0=$(date +%s%N)
    tmux send-keys -t vbench "$1"
    for i in $(seq 1 4000); do
        if [ -z "$shown" ] && tmux capture-pane -p -t vbench | grep -q -- "$2"; then
            shown=$(ms_since "$t0")
        fi
        # The next key waits until the TUI has drawn this one's effect (its own log line),
        # so that no key is sent while the one before still waits for its page.
        if [ -n "$shown" ] && [ "$(wc -l < "$keylog")" -gt "$lines" ]; then
            echo "$shown"
            return
        fi
        sleep 0.005
    done
    echo "timeout"
}

printf '| tasks | console thread, no client | with one TUI | --once --json | --once --json --tasks all | TUI RSS | key to screen, tmux (n, f, f, b) | key to frame, in the TUI (n, f, f, b) |\n'
printf '|---:|---:|---:|---:|---:|---:|---|---|\n'
for N in "${SIZES[@]}"; do
    fifo=$(mktemp -u); mkfifo "$fifo"
    "$SLEEPERS" "$N" "$ADDR" < "$fifo" > /tmp/vbench-sleepers.out &
    spid=$!
    exec 9> "$fifo"
    while ! grep -q ready /tmp/vbench-sleepers.out 2>/dev/null; do sleep 0.2; done
    sleep 1
    idle=$(cpu_pct "$spid" volt-console 10)
    t0=$(date +%s%N); "$BIN" --once --json "$ADDR" > /tmp/vbench-once.json; once=$(ms_since "$t0")
    t0=$(date +%s%N); "$BIN" --once --json --tasks all "$ADDR" > /tmp/vbench-all.json; all=$(ms_since "$t0")
    listed=$(grep -c '"id"' /tmp/vbench-all.json || true)
    # Let the index of the one-off calls expire (10 s), so the TUI's figure is its own.
    sleep 11
    tmux kill-session -t vbench 2>/dev/null || true
    keylog=$(mktemp)
    tmux new-session -d -s vbench -x 160 -y 45 "VOLT_CONSOLE_KEY_TIMES=$keylog $BIN $ADDR"
    sleep 1
    tmux send-keys -t vbench t
    for i in $(seq 1 600); do
        tmux capture-pane -p -t vbench | grep -q "$N live" && break
        sleep 0.1
    done
    sleep 2
    withtui=$(cpu_pct "$spid" volt-console 10)
    tpid=$(tmux list-panes -t vbench -F '#{pane_pid}')
    # n: sort by name (a scan of every task on the server): the first row is sleeper-0.
    # s: running tasks only: the count comes from the server. b: back to busy time.
    : > "$keylog"   # the `t` above is not one of the measured keys
    k1=$(key_ms n "sleeper-0 "); k2=$(key_ms f "[0-9] of $N live")
    k3=$(key_ms f "scheduled only"); k4=$(key_ms b "sorted by busy")
    sleep 2   # the last key's page, if it asked for one
    inner=$(awk '{printf "%s%.1f", (NR>1?", ":""), $1/1000}' "$keylog")
    rss=$(awk '/VmRSS/{printf "%.0f MB", $2/1024}' /proc/"$tpid"/status)
    printf '| %s | %s%% | %s%% | %s ms | %s ms (%s tasks) | %s | %s, %s, %s, %s ms | %s ms |\n' \
        "$N" "$idle" "$withtui" "$once" "$all" "$listed" "$rss" "$k1" "$k2" "$k3" "$k4" "$inner"
    tmux send-keys -t vbench q
    sleep 0.5
    tmux kill-session -t vbench 2>/dev/null || true
    exec 9>&-
    wait "$spid" || true
    rm -f "$fifo" "$keylog"
done
