#!/usr/bin/env bash
# Builds chosen test and example targets in release and copies their executables, stripped, into
# $STAGE (default .gpu/) as test-<name> / example-<name> / bench-<name>, for the device machine
# (which has no cargo). Faster than ../shared/gpu/stage when only a few targets are needed.
# Usage: bash scripts/stage.sh -p fuse --test gpu_interop --example softmax [-p fuse-runtime --test gpu ...]
# (arguments are cargo build's; run it once per package).
# STRIP=0 keeps the symbols (for a backtrace from a crash on the device).
set -euo pipefail
STAGE=${STAGE:-.gpu}
mkdir -p "$STAGE"
cargo build --release --message-format=json "$@" | python3 "$(dirname "$0")/stage_artifacts.py" "$STAGE"
