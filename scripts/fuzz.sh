#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ (the signature-header parsers, a receiver's payload
# path and an OpenAPI import's reading of its document) for a short time.
#
#   ./scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
#
# On the stable toolchain the targets are built with `--sanitizer none`: libFuzzer's coverage
# guidance works without a sanitizer, and the code under test is safe Rust, where a panic is
# the failure being looked for. With a nightly toolchain installed, FUZZ_SANITIZER=address
# `cargo +nightly` gives AddressSanitizer too. cargo-fuzz is installed from crates.io when
# missing. .ci/run runs this for a few seconds per target.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
sanitizer=${FUZZ_SANITIZER:-none}
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cd fuzz
for target in $(cargo fuzz list); do
    echo "== fuzzing $target for ${seconds}s (sanitizer: $sanitizer)"
    cargo fuzz run --sanitizer "$sanitizer" "$target" -- \
        -max_total_time="$seconds" -print_final_stats=1
done
