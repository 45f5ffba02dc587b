#!/usr/bin/env bash
# The private choice of the DP fit's shift (docs/training-privacy.md, "A private choice of the
# shift"; docs/results.md, "DP training"): on ml-1m-implicit (dense EASE, λ = 200) and the
# Netflix shape (`--dataset synthetic --shape netflix`, SANSA exact, λ = 1200, density 0.005),
# RUNS fits at ε_T = 1 in total — the DP fit at EPS_FIT with the shift chosen from GRID by the
# exponential mechanism at EPS_SEL on the calibration users — and RUNS fits of the default
# (`--dp-epsilon 1`, K = 3). Every run draws fresh noise from the OS. One JSON line per fit in
# $OUT/<data>-<kind>-<run>.json; `python3 benches/dp_shift_report.py $OUT` prints the table.
#
# Usage: RECSEL=path benches/dp_shift.sh [ml-1m-implicit] [netflix]
#   RUNS=3 DEFAULT_RUNS=$RUNS GRID=1,2,3,5,10 EPS_FIT=0.9 EPS_SEL=0.1 DATA=../shared/data OUT=/tmp/recsel-dp-shift
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RECSEL=${RECSEL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel}
DATA=${DATA:-$ROOT/../shared/data}
OUT=${OUT:-/tmp/recsel-dp-shift}
RUNS=${RUNS:-3}; DEFAULT_RUNS=${DEFAULT_RUNS:-$RUNS}; GRID=${GRID:-1,2,3,5,10}; EPS_FIT=${EPS_FIT:-0.9}; EPS_SEL=${EPS_SEL:-0.1}
mkdir -p "$OUT"
for ds in "$@"; do
  case $ds in
    # The grid's calibration users are LightGCN held-out users (--validation-users auto): every
    # fit of ml-1m-implicit here uses that split, so all are evaluated on the same test users.
    ml-1m-implicit) base=(fit --format lightgcn --path "$DATA/ml-1m-implicit" --validation-users auto --method ease --l2 200 --json) ;;
    # The same on a declared catalogue of all 3,043 items (no partition selection).
    ml-1m-implicit-catalogue)
      seq 0 3042 > "$OUT/ml-1m-catalogue.txt"
      base=(fit --format lightgcn --path "$DATA/ml-1m-implicit" --validation-users auto --catalogue "$OUT/ml-1m-catalogue.txt" --method ease --l2 200 --json) ;;
    netflix) base=(fit --dataset synthetic --shape netflix --method exact --l2 1200 --density 0.005 --json) ;;
    *) echo "unknown data set $ds" >&2; exit 2 ;;
  esac
  [ -s "$OUT/$ds-public.json" ] || "$RECSEL" "${base[@]}" > "$OUT/$ds-public.json" 2> "$OUT/$ds-public.log"
  for r in $(seq 1 "$RUNS"); do
    "$RECSEL" "${base[@]}" --dp-epsilon "$EPS_FIT" --dp-shift-grid "$GRID" --dp-select-epsilon "$EPS_SEL" \
      > "$OUT/$ds-grid-$r.json" 2> "$OUT/$ds-grid-$r.log"
    echo "$ds grid run $r: $(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('chose K=%s R@20 %.4f' % (j['dp_shift_chosen'], j['recall20']))" "$OUT/$ds-grid-$r.json")"
    [ "$r" -le "$DEFAULT_RUNS" ] || continue
    "$RECSEL" "${base[@]}" --dp-epsilon 1 > "$OUT/$ds-default-$r.json" 2> "$OUT/$ds-default-$r.log"
    echo "$ds default run $r: $(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('R@20 %.4f' % j['recall20'])" "$OUT/$ds-default-$r.json")"
  done
done
