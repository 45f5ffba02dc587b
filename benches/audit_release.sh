#!/usr/bin/env bash
# The whole-release neighbour audit on real data (docs/privacy-report.md, "The whole-release
# audit"): releases fitted (and tuned with --private) on a data set D and on five neighbours D′
# with the same seeds and noise streams, each compared with D's by `recsel audit-release`.
#
#   KIND=movielens|lightgcn  RECSEL=path/to/recsel  AUDIT=path/to/recsel-with-audit-release \
#   OUT=/tmp/audit  FIT_ARGS="--dp-epsilon 8"  TUNE=1  benches/audit_release.sh
#
# movielens: ../shared/data/movielens-latest-small/ratings.csv as a CSV (ratings >= 4, users
# with at least one item); lightgcn: the LightGCN export of `--dataset synthetic`. Neighbours:
# one user added; one removed; a user whose only item is unique; a user with a very long row
# (every item of D and 50 of their own); one user's row replaced by 40 popular items; and D
# itself with other noise seeds (what moves with the noise must be a declared noisy output).
set -eu
KIND=${KIND:-movielens}
RECSEL=${RECSEL:-target/release/recsel}
AUDIT=${AUDIT:-$RECSEL}
OUT=${OUT:-/tmp/audit-release}
FIT_ARGS=${FIT_ARGS:-}
TUNE=${TUNE:-0}
DATA=${DATA:-../shared/data}
export RECSEL_AUDIT_NOISE_SEED=${RECSEL_AUDIT_NOISE_SEED:-11}
mkdir -p "$OUT"

if [ "$KIND" = movielens ]; then
  src="$DATA/movielens-latest-small/ratings.csv"
  mkdir -p "$OUT/d"; cp "$src" "$OUT/d/ratings.csv"
  pop=$(awk -F, 'NR>1 && $3>=4 {c[$2]++} END {for (i in c) print c[i], i}' "$src" | sort -rn | head -40 | awk '{print $2}')
  all=$(awk -F, 'NR>1 && $3>=4 {print $2}' "$src" | sort -un)
  mk() { mkdir -p "$OUT/$1"; }
  mk added;    { cat "$src"; for i in $(echo "$pop" | head -10); do echo "999001,$i,5.0,0"; done; } > "$OUT/added/ratings.csv"
  mk removed;  awk -F, 'NR==1 || $1!=1' "$src" > "$OUT/removed/ratings.csv"
  mk unique;   { cat "$src"; echo "999002,77777777,5.0,0"; } > "$OUT/unique/ratings.csv"
  mk long;     { cat "$src"; for i in $all; do echo "999003,$i,5.0,0"; done; for k in $(seq 1 50); do echo "999003,8888$k,5.0,0"; done; } > "$OUT/long/ratings.csv"
  mk replaced; { awk -F, 'NR==1 || $1!=2' "$src"; for i in $pop; do echo "2,$i,5.0,0"; done; } > "$OUT/replaced/ratings.csv"
  data() { echo --format csv --path "$OUT/$1/ratings.csv" --user-col userId --item-col movieId --rating-col rating --min-user-items 1 --validation-users auto; }
else
  # Every data set in a folder named `ds`: a LightGCN data set is named after its folder.
  "$RECSEL" export --dataset synthetic --out "$OUT/d/ds" >/dev/null 2>&1
  D="$OUT/d/ds"
  last=$(awk '{print $1}' "$D/train.txt" | sort -n | tail -1)
  maxi=$(cat "$D/train.txt" "$D/test.txt" | tr ' ' '\n' | sort -n | tail -1)
  pop=$(awk '{for (i=2;i<=NF;i++) c[$i]++} END {for (i in c) print c[i], i}' "$D/train.txt" | sort -rn | head -40 | awk '{print $2}' | tr '\n' ' ')
  mk() { mkdir -p "$OUT/$1/ds"; cp "$D/train.txt" "$D/test.txt" "$OUT/$1/ds/"; }
  mk added;    echo "$((last+1)) $(echo $pop | cut -d' ' -f1-10)" >> "$OUT/added/ds/train.txt"; echo "$((last+1)) $(echo $pop | cut -d' ' -f11)" >> "$OUT/added/ds/test.txt"
  mk removed;  sed -i '1d' "$OUT/removed/ds/train.txt" "$OUT/removed/ds/test.txt"
  mk unique;   echo "$((last+1)) $((maxi+1))" >> "$OUT/unique/ds/train.txt"; echo "$((last+1)) $((maxi+1))" >> "$OUT/unique/ds/test.txt"
  mk long;     echo "$((last+1)) $(seq -s ' ' 0 $((maxi+50)))" >> "$OUT/long/ds/train.txt"; echo "$((last+1)) 0" >> "$OUT/long/ds/test.txt"
  mk replaced; sed -i "2s/.*/$(sed -n 2p "$D/train.txt" | awk '{print $1}') $pop/" "$OUT/replaced/ds/train.txt"
  data() { echo --format lightgcn --path "$OUT/$1/ds"; }
fi

for n in d added removed unique long replaced; do
  nice -n 10 "$RECSEL" fit $(data $n) --method ease --l2 50 $FIT_ARGS --out "$OUT/rel-$n" > "$OUT/fit-$n.log" 2>&1 \
    || { echo "fit on $n failed:"; tail -3 "$OUT/fit-$n.log"; exit 1; }
  if [ "$TUNE" = 1 ]; then
    nice -n 10 "$RECSEL" tune --model "$OUT/rel-$n" $(data $n) --private --private-seed 5 --eps 1 --mech mgem > "$OUT/tune-$n.log" 2>&1 \
      || { echo "tune on $n failed:"; tail -3 "$OUT/tune-$n.log"; exit 1; }
  fi
done
# D again with other noise seeds: an undeclared field that moves with the noise is an undeclared
# noisy output (the private tuner's run count, say).
n=d-noise
RECSEL_AUDIT_NOISE_SEED=12 nice -n 10 "$RECSEL" fit $(data d) --method ease --l2 50 $FIT_ARGS --out "$OUT/rel-$n" > "$OUT/fit-$n.log" 2>&1
if [ "$TUNE" = 1 ]; then
  nice -n 10 "$RECSEL" tune --model "$OUT/rel-$n" $(data d) --private --private-seed 6 --eps 1 --mech mgem > "$OUT/tune-$n.log" 2>&1
fi
for n in added removed unique long replaced d-noise; do
  echo "== D against $n"
  "$AUDIT" audit-release "$OUT/rel-d" "$OUT/rel-$n" || true
done
