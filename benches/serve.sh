#!/usr/bin/env bash
# Capacity of `recsel serve` on loopback (docs/serving.md, "Capacity"; the numbers:
# docs/results.md, "The HTTP service"), beside the batch path on the same model, users and cores
# in the same run.
#
# 1. the netflix-shaped model (`recsel fit --dataset synthetic --shape netflix --out`), if missing;
# 2. a users file: the first 20,000 test users' input histories (benches/serve_load.rs `users`);
# 3. the batch reference: `recsel recommend --users FILE --secure` with every item a candidate and
#    the user's own items not excluded (the service's `--candidates all`), users per second;
# 4. `recsel serve` with the same mechanism and policy, its ledger on disk and then on tmpfs
#    (/dev/shm: the same SQLite code without the fsync cost), a budget that never runs out, and
#    for each 32 and 128 closed-loop keep-alive clients for SECONDS s (benches/serve_load.rs
#    `load`): requests per second and p50/p90/p95/p99/max latency;
# 5. the batch reference again.
#
# On a shared machine wall-clock rates depend on how many threads each side has (the scheduler
# shares the cores per thread, and the load generator's clients are threads too), so every stage
# also reports the CPU time (user + system) of the measured process per recommendation: the
# batch's from GNU time, the server's from /proc/PID/stat around each load run. Their ratio is the
# throughput ratio on the same cores. Load averages are printed around every stage.
#
# Every request goes to 127.0.0.1; every stage is bounded in time (SECONDS per load run, at most
# MAX_REQUESTS requests) and the server is stopped with SIGTERM at the end of each stage.
#
# Usage: CARGO_TARGET_DIR=... benches/serve.sh
#   OUT=...            models, users, ledgers and logs (default: $TMPDIR/recsel-serve-bench)
#   SECONDS_PER_RUN=30 length of each load run;  CLIENTS="32 128";  MECH=mgem;  EPS=1
#   THREADS=           worker threads of the server and of the batch run (default: every core)
#   COMPARE="BIN_A BIN_B"  instead of the stages above, two recsel binaries (e.g. two commits'
#                      builds) side by side in one run: for ROUNDS rounds (default 2), each
#                      binary's `serve` with its ledger on tmpfs under every CLIENTS count, the
#                      binaries alternated A B A B, so both see the same machine load
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/recsel-serve-bench}
SECS=${SECONDS_PER_RUN:-30}
CLIENTS=${CLIENTS:-"32 128"}
MECH=${MECH:-mgem}
EPS=${EPS:-1}
MAX_REQUESTS=${MAX_REQUESTS:-2000000}
THREADS_ARG=()
[ -n "${THREADS:-}" ] && THREADS_ARG=(--threads "$THREADS")
mkdir -p "$OUT"
cd "$ROOT"
cargo build --release --locked >&2
RECSEL="${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel"
LOAD=(cargo bench --locked --bench serve_load --)
load_avg() { echo "[load] $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) cores) $1"; }

if [ ! -f "$OUT/model/release.json" ]; then
  load_avg "before fit"
  "$RECSEL" fit --dataset synthetic --shape netflix --out "$OUT/model"
fi
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
[ -f "$OUT/users.jsonl" ] || "${LOAD[@]}" users --shape netflix --n 20000 --out "$OUT/users.jsonl"
N_ITEMS=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['n_items'])" "$OUT/model/release.json")
echo "[bench] model $OUT/model: $N_ITEMS items; $(wc -l < "$OUT/users.jsonl") users; $MECH eps=$EPS; every item a candidate"

TICKS=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
head -n "${BATCH_USERS:-5000}" "$OUT/users.jsonl" > "$OUT/batch-users.jsonl"

batch() {
  load_avg "before batch"
  /usr/bin/time -f "%e %U %S" -o "$OUT/batch.time" \
    "$RECSEL" "${THREADS_ARG[@]}" recommend --model "$OUT/model" --mech "$MECH" --eps "$EPS" \
    --users "$OUT/batch-users.jsonl" --secure --candidates all \
    --out "$OUT/batch.csv" 2>&1 | grep -E '^\[recommend\] [0-9]+ users' | sed 's/^/[batch] /'
  local n; n=$(wc -l < "$OUT/batch-users.jsonl")
  read -r wall user sys < "$OUT/batch.time"
  echo "[batch] cpu: $n users, wall ${wall} s, cpu $(awk "BEGIN {print $user + $sys}") s, $(awk "BEGIN {printf \"%.3f\", 1000 * ($user + $sys) / $n}") cpu ms per user (whole process: loading the model included)"
}

serve_stage() {
  local kind=$1 ledger=$2 bin=${3:-$RECSEL} label=${4:-}
  rm -f "$ledger" "$ledger-wal" "$ledger-shm"
  local log="$OUT/serve-$kind.log"
  # The log exists before the server starts, so the loop below never reads a missing file.
  : > "$log"
  # A binary that creates a missing ledger only when asked gets --create-ledger; one built before
  # that flag existed creates it unasked (COMPARE against an older build).
  local create=()
  "$bin" serve --help | grep -q -- '--create-ledger' && create=(--create-ledger)
  "$bin" "${THREADS_ARG[@]}" serve --model "$OUT/model" --ledger "$ledger" "${create[@]}" --budget 1000000000 \
    --mech "$MECH" --eps "$EPS" --candidates all --listen 127.0.0.1:0 2> "$log" &
  local pid=$!
  # A failed stage (set -e) must not leave the server running.
  trap 'kill "$pid" 2>/dev/null || true' EXIT
  local addr=""
  for _ in $(seq 600); do
    addr=$(sed -n 's/^recsel serve: listening on http:\/\///p' "$log")
    if [ -n "$addr" ] && curl -sf "http://$addr/readyz" > /dev/null; then break; fi
    sleep 0.1
  done
  curl -sf "http://$addr/readyz" > /dev/null || { cat "$log"; kill "$pid"; exit 1; }
  for c in $CLIENTS; do
    load_avg "before serve, ledger on $kind, $c clients"
    local t0; t0=$(cpu_ticks "$pid")
    "${LOAD[@]}" load --addr "$addr" --users "$OUT/users.jsonl" --clients "$c" \
      --seconds "$SECS" --max-requests "$MAX_REQUESTS" --label "[serve]$label ledger=$kind" \
      | tee "$OUT/load.txt"
    local t1; t1=$(cpu_ticks "$pid")
    local ok; ok=$(sed -n 's/.* ok=\([0-9]*\) .*/\1/p' "$OUT/load.txt")
    echo "[serve]$label cpu: ledger=$kind clients=$c server cpu $(awk "BEGIN {printf \"%.2f\", ($t1 - $t0) / $TICKS}") s for $ok requests, $(awk "BEGIN {printf \"%.3f\", 1000 * ($t1 - $t0) / $TICKS / $ok}") cpu ms per request"
  done
  load_avg "after serve, ledger on $kind"
  curl -s "http://$addr/metrics" | grep -E '^recsel_ledger_(commits_total|committed_requests_total|commit_seconds_total|largest_group) ' | sed 's/^/[metrics] /'
  kill -TERM "$pid"
  wait "$pid" || true
  trap - EXIT
  grep -E '^recsel serve: (stopped|ready)' "$log" | sed 's/^/[serve] /'
  rm -f "$ledger" "$ledger-wal" "$ledger-shm"
}

if [ -n "${COMPARE:-}" ]; then
  read -r BIN_A BIN_B <<< "$COMPARE"
  for round in $(seq "${ROUNDS:-2}"); do
    serve_stage tmpfs "/dev/shm/recsel-serve-bench-$$.db" "$BIN_A" " A round=$round"
    serve_stage tmpfs "/dev/shm/recsel-serve-bench-$$.db" "$BIN_B" " B round=$round"
  done
  exit 0
fi
batch
serve_stage disk "$OUT/ledger-bench.db"
serve_stage tmpfs "/dev/shm/recsel-serve-bench-$$.db"
batch
