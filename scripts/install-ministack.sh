#!/usr/bin/env bash
# Installs MiniStack, the AWS emulator the DynamoDB / Secrets Manager / Step
# Functions tests run against, into the project's own venv (.venv-ministack)
# at a pinned version. Idempotent: does nothing when that version is there.
#
#   scripts/install-ministack.sh          # install (or verify) the pin
#
# Nothing is started here: the Go test helper internal/awstest starts one
# MiniStack per test binary on loopback and stops it when the binary ends.
set -euo pipefail
cd "$(dirname "$0")/.."

MINISTACK_VERSION=1.4.21
VENV=".venv-ministack"
PYTHON="${PYTHON:-python3}"

installed_version() {
	"$VENV/bin/python" - <<'PY' 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("ministack"))
except m.PackageNotFoundError:
    pass
PY
}

if [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/ministack" ] &&
	[ "$(installed_version)" = "$MINISTACK_VERSION" ]; then
	echo "ministack $MINISTACK_VERSION already installed in $VENV"
	exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
	"$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
	"ministack==$MINISTACK_VERSION"

got="$(installed_version)"
if [ "$got" != "$MINISTACK_VERSION" ]; then
	echo "install-ministack: wanted ministack $MINISTACK_VERSION, got '${got:-none}'" >&2
	exit 1
fi
echo "ministack $MINISTACK_VERSION installed in $VENV"
