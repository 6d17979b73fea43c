#!/usr/bin/env bash
# The README's first command: set up, build (default backend: pure-Rust CPU), and train the
# MNIST CNN on real Fashion-MNIST for one epoch. Extra arguments go to `trainer train-mnist`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release
exec target/release/trainer train-mnist --data-dir /usr/share/datasets/fashion-mnist --epochs 1 "$@"
