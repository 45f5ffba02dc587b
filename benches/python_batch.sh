#!/usr/bin/env bash
# Python `recsel.select_batch` versus the same call through the Rust library (target: the
# binding costs at most 1.2x). 10,000 users x 500 candidates, rnm/gem/mgem at eps = 1.
# Both sides print the median of 7 calls and a checksum of the picks (equal checksums: the same
# selections). Needs the package installed (`pip install ./python`).
#
# Usage: CARGO_TARGET_DIR=... benches/python_batch.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
cargo bench --locked --bench batch 2>/dev/null
python3 benches/python_batch.py
