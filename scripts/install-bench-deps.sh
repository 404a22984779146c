#!/usr/bin/env bash
# Installs the benchmark's peers (bench/, `make bench`), at pinned versions,
# into the project:
#   - bench/.venv: the Python in-memory Agent Server (`langgraph dev`,
#     PyPI langgraph-cli[inmem]) with every package pinned in
#     bench/peers/python/requirements.txt;
#   - bench/peers/js/node_modules: the JS server (`langgraphjs dev`, npm
#     @langchain/langgraph-cli 2.0.0) from bench/peers/js/package-lock.json,
#     installed with `npm ci`;
#   - bench/.venv-aegra: Aegra (PyPI aegra-api 0.11.0) with every package
#     pinned in bench/peers/aegra/requirements.txt, on Python 3.12 (pyenv's,
#     or $AEGRA_PYTHON);
#   - bench/.wheelhouse: the wheels of the Python runtime's pinned
#     requirements, from which `stepgraph dev` makes the LangGraph app's
#     .venv offline (loadgen's react workload);
#   - PostgreSQL for Aegra: Debian's postgresql-15 at $PG_DEB_VERSION (the
#     binaries only: no cluster is created; loadgen makes its own data
#     directory per run and starts and stops the server itself).
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

# --- The LangGraph app's wheels: bench/.wheelhouse ----------------------------
# loadgen's react workload serves a LangGraph app with `stepgraph dev DIR`,
# which makes DIR/.venv from the runtime's pinned requirements and the app's
# dependencies (langgraph, langchain-core: among those pins); it installs
# them from these wheels with -no-index -find-links, so the benchmark itself
# stays offline. The stamp holds the requirements' hash.
rtreq=runtimes/python/requirements.txt
wheels=bench/.wheelhouse
stamp="$wheels/.stepgraph-pyruntime.sha256"
want=$(hash_of "$rtreq")
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-bench-deps: $wheels up to date"
else
	echo "install-bench-deps: downloading the wheels of $rtreq into $wheels"
	rm -rf "$wheels"
	mkdir -p "$wheels"
	bench/.venv/bin/python -m pip download --quiet --disable-pip-version-check --no-input \
		--only-binary=:all: -d "$wheels" -r "$rtreq"
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

# --- Aegra: bench/.venv-aegra (Python >= 3.12) ---------------------------------
req=bench/peers/aegra/requirements.txt
venv=bench/.venv-aegra
stamp="$venv/.stepgraph-requirements.sha256"
want=$(hash_of "$req")
if [[ -x "$venv/bin/python" && -x "$venv/bin/uvicorn" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-bench-deps: $venv up to date"
else
	echo "install-bench-deps: installing $req into $venv"
	if [[ ! -x "$venv/bin/python" ]]; then
		py="${AEGRA_PYTHON:-}"
		if [[ -z "$py" ]]; then
			# The machine's pyenv carries 3.12 beside the default 3.11; a
			# python3.12 on PATH does too.
			for c in "$(command -v pyenv >/dev/null && pyenv root)/versions/3.12."*/bin/python3.12 \
				"$HOME/.pyenv/versions/3.12."*/bin/python3.12 "$(command -v python3.12 || true)"; do
				if [[ -x "$c" ]] && "$c" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
					py=$c
					break
				fi
			done
		fi
		if [[ -z "$py" ]]; then
			echo "install-bench-deps: aegra-api needs Python >= 3.12: none found (set AEGRA_PYTHON)" >&2
			exit 1
		fi
		rm -rf "$venv"
		"$py" -m venv "$venv"
	fi
	rm -f "$stamp"
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
		--no-input -r "$req"
	echo "$want" >"$stamp"
fi

# --- PostgreSQL for Aegra: Debian's postgresql-15 ------------------------------
# Pinned to bookworm's release; the image of this project's machines carries
# it already. Installed without a cluster: loadgen runs initdb in a
# temporary directory for every Aegra start.
PG_DEB_VERSION="${PG_DEB_VERSION:-15.18-0+deb12u1}"
have=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
if [[ "$have" == "$PG_DEB_VERSION" && -x /usr/lib/postgresql/15/bin/postgres ]]; then
	echo "install-bench-deps: postgresql-15 $have installed"
else
	echo "install-bench-deps: apt-get install postgresql-15=$PG_DEB_VERSION"
	sudo=""
	if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
	# No "main" cluster on install: nothing should listen but what loadgen starts.
	$sudo mkdir -p /etc/postgresql-common
	conf=/etc/postgresql-common/createcluster.conf
	if [[ -f $conf ]] && grep -q '^[# ]*create_main_cluster' "$conf"; then
		$sudo sed -i 's/^[# ]*create_main_cluster.*/create_main_cluster = false/' "$conf"
	else
		echo 'create_main_cluster = false' | $sudo tee -a "$conf" >/dev/null
	fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		--allow-downgrades "postgresql-15=$PG_DEB_VERSION" "postgresql-client-15=$PG_DEB_VERSION"
fi
