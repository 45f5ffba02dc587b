#!/usr/bin/env bash
# `recsel select` versus `python -m recsel.ray select` on synthetic data of Netflix's
# shape (463,435 users, 17,769 items, 40,000 test users), on a local Ray cluster with 2 workers:
# the MSE tables must be identical, the wall times are printed side by side.
#
# The model is fitted once (first command, not timed against anything) and reused by both timed
# runs, which start from fresh output directories. Needs `pip install ./python` and ray.
#
# Usage: CARGO_TARGET_DIR=... benches/ray_select.sh [SHAPE]   (SHAPE: netflix (default) or small)
#   SELECT="--mech gem,mgem,rnm --eps 0.1,1 --trials 5" overrides the selection grid, MODEL the
#   model options (default --method icf --l2 20 --density 0.005).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHAPE=${1:-netflix}
OUT=${OUT:-/tmp/recsel-ray-bench}
RECSEL="${RECSEL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel}"
# shellcheck disable=SC2206
grid=(${SELECT:---mech gem,mgem,rnm --eps 0.1,1 --trials 5})
# The model of the netflix-shaped scale run (docs/results.md, "Python and Ray") (MODEL overrides).
# shellcheck disable=SC2206
model=(${MODEL:---method icf --l2 20 --density 0.005})
common=(--dataset synthetic --shape "$SHAPE" "${model[@]}" "${grid[@]}" --seed 7 --model-dir "$OUT/model")
mkdir -p "$OUT"
if [ ! -f "$OUT/model/model.json" ]; then
  echo "== fitting the model once ($OUT/model)"
  /usr/bin/time -f "   fit run: %e s wall, %M KB peak" "$RECSEL" fit --dataset synthetic \
    --shape "$SHAPE" "${model[@]}" --out "$OUT/model" >/dev/null
fi
rm -rf "$OUT/cli" "$OUT/ray"
echo "== recsel select ${common[*]}"
/usr/bin/time -f "   recsel select: %e s wall, %M KB peak" \
  "$RECSEL" select "${common[@]}" --out "$OUT/cli" >"$OUT/cli.txt" 2>"$OUT/cli.err" \
  || { cat "$OUT/cli.err"; exit 1; }
tail -1 "$OUT/cli.err"
echo "== python -m recsel.ray select ${common[*]} --partitions 2 (local cluster, 2 CPUs)"
RAY_DEDUP_LOGS=0 /usr/bin/time -f "   recsel.ray select: %e s wall (driver %M KB peak)" python3 -c "
import sys, ray, recsel.ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
sys.exit(recsel.ray.main(sys.argv[1:]))
" select "${common[@]}" --out "$OUT/ray" --partitions 2 >"$OUT/ray.txt" 2>"$OUT/ray.err" \
  || { cat "$OUT/ray.err"; exit 1; }
grep -E "phases|wall" "$OUT/ray.err"
for f in mse.csv users.csv items.csv rules.csv diagnostics.json config.json; do
  if cmp -s "$OUT/cli/$f" "$OUT/ray/$f"; then echo "   $f identical"; else echo "   $f DIFFERS"; fi
done
grep -E "time|users" "$OUT/cli.txt" | head -3 | sed 's/^/   cli: /'
