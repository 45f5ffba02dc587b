#!/usr/bin/env bash
# Utility of DP training (docs/training-privacy.md; docs/results.md, "DP training"): `recsel fit`
# on the LightGCN splits of ml-1m-implicit, amazon-book-kgat and gowalla, without DP and with DP
# at ε_T in $EPSILONS (δ = $DELTA, cap $CAP interactions per user), one JSON line per fit
# appended to $OUT/rows.jsonl (Recall@20, nDCG@20, the non-private top-1 hit@1, the λ used, the
# fit's seconds). Then `python3 benches/dp_utility_report.py $OUT/rows.jsonl` writes the table
# and the plot. With ITEMS=K the DP fits are restricted to K items chosen by a DP count
# (`--dp-items K`, docs/training-privacy.md, "Large catalogues"), SANSA's density then being
# ITEMS_DENSITY of the K × K matrix; the non-DP row stays the full catalogue. With CATALOGUE=all
# the DP fits are given a declared catalogue (`--catalogue`) of every item id of the data set's
# id space (0 to the largest id in its train and test files), so they fit every item; without
# it a DP fit releases its items by DP partition selection (docs/training-privacy.md).
#
# Usage: RECSEL=path benches/dp_utility.sh [DATASET...]   (default: all three)
#   DATA=../shared/data  EPSILONS="4 1 2 8"  DELTA=1e-8  CAP=20  OUT=/tmp/recsel-dp-utility
#   ITEMS=  ITEMS_DENSITY=0.1  NONE=1 (0: skip the non-DP row)  CATALOGUE= (all: every item id)
#   DP_ARGS="--dp-bound sample --dp-shift 10"   further options of the DP fits (recorded per row)
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
ITEMS=${ITEMS:-}; ITEMS_DENSITY=${ITEMS_DENSITY:-0.1}; NONE=${NONE:-1}; CATALOGUE=${CATALOGUE:-}
case "$CATALOGUE" in ""|all) ;; *) echo "CATALOGUE must be empty or 'all', got '$CATALOGUE'" >&2; exit 2 ;; esac
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
  runs=$EPSILONS; [ "$NONE" = 0 ] || runs="none $EPSILONS"
  for eps in $runs; do
    dp=(); [ "$eps" = none ] || dp=(--dp-epsilon "$eps" --dp-delta "$DELTA" --dp-cap "$CAP" "${DP_ARGS[@]}")
    tag=$eps; m=("${M[@]}"); recorded="${DP_ARGS[*]}"
    if [ "$eps" != none ] && [ "$CATALOGUE" = all ]; then
      cat="$OUT/$ds-catalogue.txt"
      awk '{for (i = 2; i <= NF; i++) if ($i + 0 > m) m = $i + 0} END {for (j = 0; j <= m; j++) print j}' \
        "$DATA/$ds/train.txt" "$DATA/$ds/test.txt" > "$cat"
      dp+=(--catalogue "$cat"); tag="$tag-cat"; recorded="${recorded:+$recorded }--catalogue all"
    fi
    if [ "$eps" != none ] && [ -n "$ITEMS" ]; then
      dp+=(--dp-items "$ITEMS"); tag="$tag-k$ITEMS"
      for i in "${!m[@]}"; do [ "${m[$i]}" != --density ] || m[i+1]=$ITEMS_DENSITY; done
    fi
    log="$OUT/$ds-$tag.log"
    if "$RECSEL" fit --format lightgcn --path "$DATA/$ds" "${m[@]}" "${dp[@]}" --json \
        > "$OUT/$ds-$tag.json" 2> "$log"; then
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j['data']=sys.argv[2]; j['eps_t']=None if sys.argv[3]=='none' else float(sys.argv[3]); j['delta_t']=float(sys.argv[4]); j['cap']=int(sys.argv[5]); j['dp_items']=int(sys.argv[6]) if sys.argv[6] and sys.argv[3]!='none' else None; j['dp_args']=sys.argv[7]; print(json.dumps(j))" \
        "$OUT/$ds-$tag.json" "$ds" "$eps" "$DELTA" "$CAP" "$ITEMS" "$recorded" >> "$OUT/rows.jsonl"
      echo "$ds ε_T=$tag done: $(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('R@20 %.4f nDCG@20 %.4f hit@1 %.4f λ %.0f fit %.1fs' % (j['recall20_lightgcn'], j['ndcg20'], j['hit1'], j['l2_used'], j['fit_seconds']))" "$OUT/$ds-$tag.json")"
    else
      echo "$ds ε_T=$tag failed: $(tail -2 "$log")"
    fi
  done
done
