#!/usr/bin/env bash
# The whole private pipeline against today's (docs/results.md, "Whole private pipeline"): on the
# same data, split seed, validation (calibration) users and test users,
#   public:  recsel fit --out (no DP)               + recsel tune            (non-private choice)
#   private: recsel fit --dp-epsilon E_T --out ...  + recsel tune --private  (private choice)
# both releases with the default private release statistics (model-derived clip ranges,
# discrete-Laplace counts), then `recsel evaluate --model` on the test users — whom neither the fit
# nor the tuning saw — at each serving ε of $SERVE_EPS, and `recsel privacy --model` of each
# release. `benches/private_pipeline_report.py $OUT` prints the tables (it is run at the end).
#
# Usage: benches/private_pipeline.sh [--dataset ml-1m-implicit|NAME|synthetic] [--shape S]
#   NAME: a LightGCN directory under $DATA (default ml-1m-implicit; held-out users: a fifth of the
#   users with a train and a test item, at most 3,000 per group). synthetic: `recsel fit --dataset
#   synthetic --shape S` (small, ml20m, netflix) with --validation-users auto (as many validation
#   users as test users, each validation user's row split 80/20 for calibration).
# Environment (defaults in brackets):
#   RECSEL       the binary [$CARGO_TARGET_DIR/release/recsel]
#   DATA         LightGCN data sets [../shared/data]     OUT  where everything goes [/tmp/recsel-pipeline-DATASET]
#   EPS_T        ε_T of the DP fits ["1 2 4 8"]          DELTA  δ_T [1e-8]
#   SERVE_EPS    serving ε, tuned and evaluated [1,2,4]  SPLIT_SEED [42]
#   FIT_MODEL    the model of both fits [LightGCN: "--method ease --l2 200"; synthetic:
#                "--method exact --l2 1200 --density 0.005" (ml20m/netflix), "--method exact --l2 200
#                --density 0.01" (small)]
#   FIT_DP_FLAGS extra flags of the DP fit only (e.g. "--dp-cap 40") [none]
#   TUNE_FLAGS   extra flags of both tunings [none]     PRIVATE_TUNE_FLAGS extra flags of tune --private [none]
#   PRIVATE_SEEDS  --private-seed of each private tuning (one tuning and evaluation each) ["1 2 3"]
#   EVAL_MECH    registry mechanisms tuned (public) and evaluated beside the tuned row
#                [LightGCN and synthetic small: em,rnm,gem,mgem; ml20m/netflix: none]
#   PARALLEL     1: run the public pipeline and every ε_T's private pipeline at once [0]
#   ATTRIBUTE    1: also tune each DP model with the exact tuner and evaluate it, which splits the
#                private pipeline's loss into the DP fit's and the private tuning's [1]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RECSEL=${RECSEL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel}
DATASET=ml-1m-implicit; SHAPE=small
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) DATASET=$2; shift 2 ;;
    --shape) SHAPE=$2; shift 2 ;;
    *) echo "unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
DATA=${DATA:-$ROOT/../shared/data}
EPS_T=${EPS_T:-"1 2 4 8"}; DELTA=${DELTA:-1e-8}; SERVE_EPS=${SERVE_EPS:-1,2,4}
SPLIT_SEED=${SPLIT_SEED:-42}; PRIVATE_SEEDS=${PRIVATE_SEEDS:-"1 2 3"}
FIT_DP_FLAGS=${FIT_DP_FLAGS:-}; TUNE_FLAGS=${TUNE_FLAGS:-}; PRIVATE_TUNE_FLAGS=${PRIVATE_TUNE_FLAGS:-}
PARALLEL=${PARALLEL:-0}; ATTRIBUTE=${ATTRIBUTE:-1}
if [ "$DATASET" = synthetic ]; then
  D=(--dataset synthetic --shape "$SHAPE")
  case "$SHAPE" in
    small) model="--method exact --l2 200 --density 0.01"; mech=em,rnm,gem,mgem ;;
    ml20m|netflix) model="--method exact --l2 1200 --density 0.005"; mech= ;;
    *) echo "unknown --shape '$SHAPE' (small, ml20m, netflix)" >&2; exit 2 ;;
  esac
  TAG=synthetic-$SHAPE
else
  [ -d "$DATA/$DATASET" ] || { echo "no LightGCN data set at $DATA/$DATASET" >&2; exit 2; }
  D=(--format lightgcn --path "$DATA/$DATASET")
  model="--method ease --l2 200"; mech=em,rnm,gem,mgem
  TAG=$DATASET
fi
# Both pipelines hold the same users out: the split depends on the data and the split seed only.
D+=(--validation-users auto --split-seed "$SPLIT_SEED")
FIT_MODEL=${FIT_MODEL:-$model}; EVAL_MECH=${EVAL_MECH-$mech}
OUT=${OUT:-/tmp/recsel-pipeline-$TAG}
[ -x "$RECSEL" ] || { echo "no recsel binary at $RECSEL (set RECSEL or build first)" >&2; exit 2; }
mkdir -p "$OUT"
# shellcheck disable=SC2206
M=($FIT_MODEL); DPF=($FIT_DP_FLAGS); TF=($TUNE_FLAGS); PTF=($PRIVATE_TUNE_FLAGS)
tune_mech=${EVAL_MECH:-none}
# The run's settings, for the report (passed through the environment: no quoting to get wrong).
TAG=$TAG DOPTS="${D[*]}" FIT_MODEL=$FIT_MODEL FIT_DP_FLAGS=$FIT_DP_FLAGS EPS_T=$EPS_T DELTA=$DELTA \
SERVE_EPS=$SERVE_EPS SPLIT_SEED=$SPLIT_SEED PRIVATE_SEEDS=$PRIVATE_SEEDS EVAL_MECH=$EVAL_MECH \
TUNE_FLAGS=$TUNE_FLAGS PRIVATE_TUNE_FLAGS=$PRIVATE_TUNE_FLAGS RECSEL=$RECSEL python3 -c '
import json, os, sys
e = os.environ
json.dump(dict(dataset=e["TAG"], data_options=e["DOPTS"], fit_model=e["FIT_MODEL"],
               fit_dp_flags=e["FIT_DP_FLAGS"], eps_t=e["EPS_T"].split(), delta_t=float(e["DELTA"]),
               serve_eps=e["SERVE_EPS"], split_seed=int(e["SPLIT_SEED"]),
               private_seeds=e["PRIVATE_SEEDS"].split(), eval_mech=e["EVAL_MECH"],
               tune_flags=e["TUNE_FLAGS"], private_tune_flags=e["PRIVATE_TUNE_FLAGS"],
               recsel=e["RECSEL"]), open(sys.argv[1], "w"))' "$OUT/run.json"

say() { echo "[$(date +%H:%M:%S)] $*"; }
# run LOG CMD...: the command's stdout to LOG.out, stderr to LOG.log; on failure its tail.
run() {
  local log=$1; shift
  echo "$*" > "$log.cmd"
  if ! "$@" > "$log.out" 2> "$log.log"; then
    say "FAILED: $*"; tail -5 "$log.log" >&2; return 1
  fi
}

public() {
  local dir=$OUT/public
  rm -rf "$dir"
  say "public: fit (${FIT_MODEL}, no DP)"
  run "$OUT/public-fit" "$RECSEL" fit "${D[@]}" "${M[@]}" --out "$dir" --json
  say "public: tune (non-private)"
  run "$OUT/public-tune" "$RECSEL" tune --model "$dir" "${D[@]}" --eps "$SERVE_EPS" --mech "$tune_mech" "${TF[@]}"
  say "public: evaluate on the test users"
  run "$OUT/public-eval" "$RECSEL" evaluate --model "$dir" "${D[@]}" --eps "$SERVE_EPS" \
    --mech "$EVAL_MECH" --out "$OUT/public-utility" --json
  run "$OUT/public-privacy" "$RECSEL" privacy --model "$dir" --json
  say "public: done"
}

private() {
  local e=$1 dir=$OUT/dp-$1 first=1 s
  rm -rf "$dir"
  say "private ε_T=$e: fit (${FIT_MODEL} --dp-epsilon $e --dp-delta $DELTA ${FIT_DP_FLAGS})"
  run "$OUT/dp-$e-fit" "$RECSEL" fit "${D[@]}" "${M[@]}" --dp-epsilon "$e" --dp-delta "$DELTA" \
    "${DPF[@]}" --out "$dir" --json
  if [ "$ATTRIBUTE" = 1 ]; then
    # The DP model with the exact (non-private) tuner: what the private tuning costs on its own.
    rm -rf "$dir-exact-tune"; cp -r "$dir" "$dir-exact-tune"
    say "private ε_T=$e: the DP model tuned exactly (attribution)"
    run "$OUT/dp-$e-exact-tune" "$RECSEL" tune --model "$dir-exact-tune" "${D[@]}" --eps "$SERVE_EPS" \
      --mech none "${TF[@]}"
    run "$OUT/dp-$e-exact-eval" "$RECSEL" evaluate --model "$dir-exact-tune" "${D[@]}" \
      --eps "$SERVE_EPS" --mech "" --out "$OUT/dp-$e-exact-utility" --json
  fi
  for s in $PRIVATE_SEEDS; do
    say "private ε_T=$e: tune --private (seed $s)"
    run "$OUT/dp-$e-tune-$s" "$RECSEL" tune --model "$dir" "${D[@]}" --eps "$SERVE_EPS" --private \
      --private-seed "$s" "${TF[@]}" "${PTF[@]}"
    cp "$dir/tuning.json" "$OUT/dp-$e-tuning-$s.json"
    # The registry mechanisms' rows do not depend on the private tuning (it tunes none: the
    # release serves them over every item with its own clip range), so they are measured once.
    local em=""; [ $first = 1 ] && em=$EVAL_MECH
    say "private ε_T=$e: evaluate on the test users (seed $s)"
    run "$OUT/dp-$e-eval-$s" "$RECSEL" evaluate --model "$dir" "${D[@]}" --eps "$SERVE_EPS" \
      --mech "$em" --out "$OUT/dp-$e-utility-$s" --json
    run "$OUT/dp-$e-privacy-$s" "$RECSEL" privacy --model "$dir" --json
    first=0
  done
  say "private ε_T=$e: done"
}

say "$TAG: data options ${D[*]}; model ${FIT_MODEL}; ε_T ${EPS_T}; serving ε ${SERVE_EPS}; out $OUT"
if [ "$PARALLEL" = 1 ]; then
  pids=()
  public & pids+=($!)
  for e in $EPS_T; do private "$e" & pids+=($!); done
  fail=0; for p in "${pids[@]}"; do wait "$p" || fail=1; done
  [ $fail = 0 ] || exit 1
else
  public
  for e in $EPS_T; do private "$e"; done
fi
python3 "$ROOT/benches/private_pipeline_report.py" "$OUT" | tee "$OUT/report.md"
