#!/usr/bin/env bash
# Users per second of `recsel recommend` with and without `--ledger` on the same users file
# (docs/ledger.md, "Cost"): the synthetic model (`recsel fit --dataset synthetic --out`), 20,000
# users of 5 random items each, mgem at eps = 1 over the top 500 candidates, --secure. farm-bench
# runs the two commands alternately and reports the ratio pair by pair; every ledger run starts
# from an empty ledger file (so every request is charged, none replayed), with groups of 256
# requests per commit (the default).
#
#   bash benches/ledger_recommend.sh [USERS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
USERS=${1:-20000}
RUNS=${2:-5}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release --locked --quiet
BIN="$CARGO_TARGET_DIR/release/recsel"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$BIN" fit --dataset synthetic --out "$WORK/model" >/dev/null 2>&1
python3 - "$WORK" "$USERS" <<'PY'
import json, random, sys
work, n = sys.argv[1], int(sys.argv[2])
ids = json.load(open(f"{work}/model/release.json"))["item_ids"]
r = random.Random(1)
with open(f"{work}/users.csv", "w") as f:
    f.write("user,item\n")
    for u in range(n):
        for i in r.sample(ids, 5):
            f.write(f"u{u},{i}\n")
PY
COMMON="--model $WORK/model --mech mgem --eps 1 --candidates popular:500 --secure --users $WORK/users.csv"
farm-bench -n "$RUNS" --timeout 600 \
  --vs "sh -c 'exec $BIN recommend $COMMON --out $WORK/plain.csv 2>/dev/null'" \
  -- sh -c "rm -f $WORK/l.db $WORK/l.db-wal $WORK/l.db-shm; exec $BIN recommend $COMMON --out $WORK/charged.csv --ledger $WORK/l.db --create-ledger --budget 10 2>/dev/null"
# One ledger run's own summary line (users/s inside the process, commits and their mean time).
rm -f "$WORK/l.db" "$WORK/l.db-wal" "$WORK/l.db-shm"
"$BIN" recommend $COMMON --out "$WORK/charged.csv" --ledger "$WORK/l.db" --create-ledger --budget 10 2>&1 | grep '^\[ledger\] [0-9]'
