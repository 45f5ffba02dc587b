#!/usr/bin/env bash
# Benchmark of the default figure 14 (target: <= 60 s on 2 cores): every policy of `all`
# x 20 runs x T = 50,000, the default outputs (tables and four PNGs) included.
#   benches/bandit.sh [extra recsel bandit options]
# Prints the wall-clock time of three repetitions (after one warm-up build).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
bin="${CARGO_TARGET_DIR:-target}/release/recsel"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for i in 1 2 3; do
  /usr/bin/time -f "run $i: %e s wall, %U s user, %M KB peak" \
    "$bin" --threads 2 bandit --seed 14 --out "$out/fig14" "$@" > /dev/null
done
