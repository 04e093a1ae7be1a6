#!/usr/bin/env bash
# Runs hookd's whole test suite on a fresh machine.
#
# 1. A Python venv (.venv) with the reference libraries from scripts/python-requirements.txt,
#    which the cross-check tests run as code we did not write (HOOKD_TEST_PYTHON points at it).
# 2. cargo test over the whole workspace.
#
# PostgreSQL tests run when HOOKD_TEST_POSTGRES_URL is set (a server URL whose user may create
# databases); otherwise they print that they are skipped. .ci/run sets it and requires it.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r scripts/python-requirements.txt
export HOOKD_TEST_PYTHON="$PWD/$venv/bin/python"

cargo test --workspace "$@"
