#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ (the signature-header parsers) for a short time.
#
#   ./scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
#
# cargo-fuzz needs a nightly toolchain (libFuzzer and sanitizer flags are nightly-only), so
# this is not part of ./scripts/test.sh or .ci/run, which use the stable toolchain. It installs
# cargo-fuzz from crates.io when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "cargo-fuzz needs a nightly toolchain: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cd fuzz
for target in $(cargo +nightly fuzz list); do
    echo "== fuzzing $target for ${seconds}s"
    cargo +nightly fuzz run "$target" -- -max_total_time="$seconds"
done
