#!/usr/bin/env bash
# Wall time and peak memory of the full real-data grid: every mechanism of docs/mechanisms.md × the
# 11 ε of docs/protocol.md, step 8 × 50 trials for every test user, top-500 candidates, on the shared data sets.
# Target: amazon-book-kgat in at most 10 minutes on the 2-core machine.
#
# Usage: CARGO_TARGET_DIR=... benches/select_real.sh [DATASET ...]
#   DATASET in amazon-book-kgat (default), gowalla, ml-1m-implicit; DATA=../shared/data overrides.
#   Results go to $OUT/<dataset> (default /tmp/recsel-select); every run starts over (--force).
#   EXTRA="--secure" runs the secure path (docs/secure.md) instead of seeded streams (no --seed).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${DATA:-$ROOT/../shared/data}
OUT=${OUT:-/tmp/recsel-select}
[ -d "$DATA" ] || { echo "SKIPPED: $DATA not found (the shared data sets)" >&2; exit 0; }
(cd "$ROOT" && cargo build --release -j 2 >&2)
# RECSEL=path overrides the binary (a shared CARGO_TARGET_DIR may hold another checkout's build).
RECSEL="${RECSEL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel}"
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(amazon-book-kgat)
printf "%-18s %-28s %10s %10s %10s %10s\n" dataset model users "sens s" "select s" "peak MB"
for d in "${sets[@]}"; do
  # The model settings of docs/results.md, "SANSA against the Python reference", for these data sets.
  case "$d" in
    amazon-book-kgat|gowalla) model=(--method icf --l2 20 --density 0.0005) ;;
    ml-1m-implicit) model=(--method exact --l2 200 --density 0.05) ;;
    *) echo "unknown data set $d" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  if [ -n "${EXTRA:-}" ]; then seed=(); else seed=(--seed 1); fi
  json=$("$RECSEL" select --format lightgcn --path "$DATA/$d" "${model[@]}" "${seed[@]}" ${EXTRA:-} --force \
    --out "$OUT/$d" --json 2> "$OUT-$d.log")
  python3 - "$d" "${model[*]}" "$json" <<'PY'
import json, sys
d, model, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print(f"{d:<18} {model.replace('--', ''):<28} {j['users']:>10} {j['sensitivity_seconds']:>10.1f} "
      f"{j['selection_seconds']:>10.1f} {j['peak_rss_mb']:>10.0f}")
PY
done
