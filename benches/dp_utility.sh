#!/usr/bin/env bash
# Utility of DP training (docs/training-privacy.md; docs/results.md, "DP training"): `recsel fit`
# on the LightGCN splits of ml-1m-implicit, amazon-book-kgat and gowalla, without DP and with DP
# at ε_T in $EPSILONS (δ = $DELTA, cap $CAP interactions per user), one JSON line per fit
# appended to $OUT/rows.jsonl (Recall@20, nDCG@20, the non-private top-1 hit@1, the λ used, the
# fit's seconds). Then `python3 benches/dp_utility_report.py $OUT/rows.jsonl` writes the table
# and the plot.
#
# Usage: RECSEL=path benches/dp_utility.sh [DATASET...]   (default: all three)
#   DATA=../shared/data  EPSILONS="4 1 2 8"  DELTA=1e-8  CAP=20  OUT=/tmp/recsel-dp-utility
#   DP_ARGS="--dp-bound sample --dp-shift 10"   further options of the DP fits (recorded per row)
#   PUBLIC=0   skip the non-DP fit (deterministic: its numbers from an earlier run still hold)
# Models: ml-1m-implicit dense EASE, λ = 200; the larger catalogues SANSA exact (the DP fit's
# dense path, f32), λ = 200, density 0.005. The DP fit raises λ to its positive-definite floor.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RECSEL=${RECSEL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel}
DATA=${DATA:-$ROOT/../shared/data}
EPSILONS=${EPSILONS:-"4 1 2 8"}; DELTA=${DELTA:-1e-8}; CAP=${CAP:-20}
# shellcheck disable=SC2206
DP_ARGS=(${DP_ARGS:-})
OUT=${OUT:-/tmp/recsel-dp-utility}
mkdir -p "$OUT"
SETS=("$@"); [ ${#SETS[@]} -gt 0 ] || SETS=(ml-1m-implicit amazon-book-kgat gowalla)
model_of() {
  case "$1" in
    ml-1m-implicit) echo "--method ease --l2 200" ;;
    *) echo "--method exact --l2 200 --density 0.005" ;;
  esac
}
for ds in "${SETS[@]}"; do
  # shellcheck disable=SC2207
  M=($(model_of "$ds"))
  PUB=(none); [ "${PUBLIC:-1}" = 0 ] && PUB=()
  for eps in "${PUB[@]}" $EPSILONS; do
    dp=(); [ "$eps" = none ] || dp=(--dp-epsilon "$eps" --dp-delta "$DELTA" --dp-cap "$CAP" "${DP_ARGS[@]}")
    log="$OUT/$ds-$eps.log"
    if "$RECSEL" fit --format lightgcn --path "$DATA/$ds" "${M[@]}" "${dp[@]}" --json \
        > "$OUT/$ds-$eps.json" 2> "$log"; then
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j['data']=sys.argv[2]; j['eps_t']=None if sys.argv[3]=='none' else float(sys.argv[3]); j['delta_t']=float(sys.argv[4]); j['cap']=int(sys.argv[5]); j['dp_args']=sys.argv[6]; print(json.dumps(j))" \
        "$OUT/$ds-$eps.json" "$ds" "$eps" "$DELTA" "$CAP" "${DP_ARGS[*]}" >> "$OUT/rows.jsonl"
      echo "$ds ε_T=$eps done: $(tail -c 300 "$OUT/$ds-$eps.json" | head -c 0)$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('R@20 %.4f nDCG@20 %.4f hit@1 %.4f λ %.0f fit %.1fs' % (j['recall20_lightgcn'], j['ndcg20'], j['hit1'], j['l2_used'], j['fit_seconds']))" "$OUT/$ds-$eps.json")"
    else
      echo "$ds ε_T=$eps failed: $(tail -2 "$log")"
    fi
  done
done
