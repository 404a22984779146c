#!/usr/bin/env bash
# Installs the benchmark's peers (bench/, `make bench`), at pinned versions,
# into the project:
#   - bench/.venv: the Python in-memory Agent Server (`langgraph dev`,
#     PyPI langgraph-cli[inmem]) with every package pinned in
#     bench/peers/python/requirements.txt;
#   - bench/peers/js/node_modules: the JS server (`langgraphjs dev`, npm
#     @langchain/langgraph-cli 2.0.0) from bench/peers/js/package-lock.json,
#     installed with `npm ci`.
# Idempotent: each keeps a stamp file holding the sha256 of the file it was
# installed from and is left alone while it matches. Network is needed here
# only; the benchmark itself runs offline on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

hash_of() { sha256sum "$1" | cut -d' ' -f1; }

# --- Python peer: bench/.venv --------------------------------------------------
req=bench/peers/python/requirements.txt
venv=bench/.venv
stamp="$venv/.stepgraph-requirements.sha256"
want=$(hash_of "$req")
if [[ -x "$venv/bin/python" && -x "$venv/bin/langgraph" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-bench-deps: $venv up to date"
else
	echo "install-bench-deps: installing $req into $venv"
	if [[ ! -x "$venv/bin/python" ]]; then
		rm -rf "$venv"
		"${PYTHON:-python3}" -m venv "$venv"
	fi
	rm -f "$stamp"
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
		--no-input -r "$req"
	echo "$want" >"$stamp"
fi

# --- JS peer: bench/peers/js/node_modules -------------------------------------
jsdir=bench/peers/js
lock="$jsdir/package-lock.json"
stamp="$jsdir/node_modules/.stepgraph-lock.sha256"
want=$(hash_of "$lock")
if [[ -x "$jsdir/node_modules/.bin/langgraphjs" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-bench-deps: $jsdir/node_modules up to date"
else
	echo "install-bench-deps: npm ci in $jsdir"
	# Install scripts stay off: esbuild ships its binary as an optional
	# dependency package and does not need its postinstall.
	(cd "$jsdir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
	echo "$want" >"$stamp"
fi
