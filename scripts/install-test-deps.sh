#!/usr/bin/env bash
# Installs everything the tests need, at pinned versions, into the project:
#   - the Go modules (versions pinned in go.mod/go.sum);
#   - a Python venv at .venv with the packages pinned in
#     test/conformance/python/requirements.txt (official langgraph-sdk, pytest)
#     and test/schemathesis/requirements.txt (schemathesis);
#   - the npm packages pinned in test/conformance/js/package-lock.json
#     (official @langchain/langgraph-sdk), installed with `npm ci`, and those
#     of console/package-lock.json (the web console's build toolchain);
#   - Debian's chromium at a pinned version (the console's browser tests);
#   - the AWS CLI v1 (awscli, pinned below) in .venv-awscli, for the app
#     build's buildspec run by internal/awstest/codebuildlocal;
#   - the wheels of a LangGraph app's Lambda zip for x86_64 (the runtime's pins)
#     in .deps/lambda-wheels/x86_64, for `stepgraph build`'s offline tests;
#   - upstream's OpenAPI document (langgraph-api's openapi.json, pinned in
#     test/conformance/upstream/langgraph-api.pin) in .deps/langgraph-api;
#   - the wheels of the LangGraph runtime's pins (runtimes/python/requirements.txt)
#     in .deps/wheelhouse, for offline virtual environments;
#   - upstream's `langgraph dev` (langgraph-cli[inmem], the benchmark's pins in
#     bench/peers/python/requirements.txt) in .venv-langgraph-dev;
#   - MiniStack, the AWS emulator, in .venv-ministack (scripts/install-ministack.sh);
#   - the OAuth 2.0 server of the agent-auth tests (mock-oauth2-server, pinned in
#     test/oauth/pom.xml) in .deps/mock-oauth2-server/lib, each jar checked
#     against test/oauth/jars.sha256.
# Idempotent: the venv and node_modules each keep a stamp file holding the
# sha256 of the file they were installed from, and are left alone while it
# matches, so a second run takes a second or two.
set -euo pipefail
cd "$(dirname "$0")/.."

go mod download
go mod verify >/dev/null

hash_of() { sha256sum "$1" | cut -d' ' -f1; }

# pip_install VENV STAMP WANT CHECK -- PIP_ARGS...: installs PIP_ARGS into
# VENV (made when missing) unless VENV/STAMP holds WANT; CHECK=check runs
# `pip check` after. The stamp is written last, so an interrupted install
# is done again.
pip_install() {
	local venv=$1 stamp="$1/$2" want=$3 check=$4
	shift 5
	if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		echo "install-test-deps: $* in $venv up to date"
		return
	fi
	echo "install-test-deps: installing $* into $venv"
	if [[ ! -x "$venv/bin/python" ]]; then
		rm -rf "$venv"
		python3 -m venv "$venv"
	fi
	rm -f "$stamp"
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$@"
	if [[ $check == check ]] && ! out=$("$venv/bin/python" -m pip check); then
		echo "$out" >&2
		exit 1
	fi
	echo "$want" >"$stamp"
}

# --- Python: .venv -----------------------------------------------------------
req=test/conformance/python/requirements.txt
venv=.venv
pip_install "$venv" .stepgraph-requirements.sha256 "$(hash_of "$req")" nocheck -- -r "$req"

# --- Python: Schemathesis, into the same .venv -------------------------------
# Pinned in test/schemathesis/requirements.txt; the conformance pins above are
# its constraints, so the packages both need keep one version. The stamp holds
# the hash of both files: a change to either reinstalls.
streq=test/schemathesis/requirements.txt
pip_install "$venv" .stepgraph-schemathesis.sha256 "$(cat "$req" "$streq" | sha256sum | cut -d' ' -f1)" check -- \
	-r "$streq" -c "$req"

# --- Python: the LangGraph app runtime, into the same .venv --------------------
# runtimes/python/requirements.txt pins what the runtime needs (LangGraph);
# the conformance pins constrain it, so both keep one version of each (they
# are a subset of them today: nothing new is downloaded). The .venv is the
# base environment the LangGraph-app tests run apps with.
rtreq=runtimes/python/requirements.txt
pip_install "$venv" .stepgraph-pyruntime.sha256 "$(cat "$req" "$rtreq" | sha256sum | cut -d' ' -f1)" nocheck -- \
	-r "$rtreq" -c "$req"

# --- Python: .deps/wheelhouse (the runtime's wheels, for offline installs) ----
# `stepgraph dev`'s tests make a virtual environment from these wheels with
# -no-index -find-links (no package index): the runtime's pinned requirements
# and everything they depend on. The stamp holds the requirements' hash.
wheels=.deps/wheelhouse
stamp="$wheels/.stepgraph-pyruntime.sha256"
want=$(hash_of "$rtreq")
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-test-deps: $wheels up to date"
else
	echo "install-test-deps: downloading the wheels of $rtreq into $wheels"
	rm -rf "$wheels"
	mkdir -p "$wheels"
	"$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-input \
		--only-binary=:all: -d "$wheels" -r "$rtreq"
	echo "$want" >"$stamp"
fi

# --- Python: the Lambda wheelhouse, .deps/lambda-wheels/x86_64 ---------------
# The wheels `stepgraph build` puts in a LangGraph app's Lambda zip, for
# Lambda's python3.11 on x86_64 (manylinux2014, binary wheels only), so its
# tests build offline (-no-index -find-links). The conformance pins
# constrain them, as they do the .venv's. The stamp holds both files' hash.
lw=.deps/lambda-wheels/x86_64
stamp="$lw/.stepgraph-wheels.sha256"
want=$(cat "$req" "$rtreq" | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-test-deps: $lw up to date"
else
	echo "install-test-deps: downloading the Lambda wheels into $lw"
	rm -rf "$lw"
	"$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-input -d "$lw" \
		--only-binary=:all: --implementation cp --python-version 3.11 \
		--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
		-r "$rtreq" -c "$req"
	echo "$want" >"$stamp"
fi

# --- Python: .venv-awscli (the AWS CLI of the app build's tests) -------------
# internal/awstest/codebuildlocal runs the app build's buildspec on this
# machine, whose `aws s3 cp` needs an AWS CLI: v1 from PyPI at a pinned
# version (v2 is not on PyPI), in a venv of its own so that no globally
# installed `aws` is used by accident.
awscli_version=1.45.11
pip_install .venv-awscli .stepgraph-awscli.version "$awscli_version" check -- "awscli==$awscli_version"

# --- Python: .venv-interop (MCP and A2A clients) -----------------------------
# The official MCP and A2A SDKs pin shared packages differently from the
# LangGraph SDK suite, so they get a venv of their own (test/conformance/interop).
ireq=test/conformance/interop/requirements.txt
pip_install .venv-interop .stepgraph-requirements.sha256 "$(hash_of "$ireq")" check -- -r "$ireq"

# --- Python: .venv-langgraph-dev (upstream's `langgraph dev`) ---------------
# The Python in-memory Agent Server (langgraph-cli[inmem]: langgraph-api
# 0.16.7) with the benchmark's exact pins (bench/peers/python/requirements.txt),
# in a venv of its own: test/conformance's TestLangGraphDevParity serves the
# same LangGraph app on it and on stepgraph and compares the SDK's answers.
# The stamp holds the requirements' hash.
dreq=bench/peers/python/requirements.txt
pip_install .venv-langgraph-dev .stepgraph-requirements.sha256 "$(hash_of "$dreq")" check -- -r "$dreq"

# --- Upstream's OpenAPI document: .deps/langgraph-api/openapi.json -----------
# The langgraph-api wheel at the version and sha256 of
# test/conformance/upstream/langgraph-api.pin, from PyPI without its
# dependencies (nothing of it is installed or run); only its openapi.json is
# kept. The stamp holds the pin file's hash.
pin=test/conformance/upstream/langgraph-api.pin
lga=.deps/langgraph-api
stamp="$lga/.stepgraph-pin.sha256"
want=$(hash_of "$pin")
if [[ -f "$lga/openapi.json" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-test-deps: $lga up to date"
else
	lga_version=$(sed -n 's/^version=//p' "$pin")
	lga_sha=$(sed -n 's/^sha256=//p' "$pin")
	echo "install-test-deps: fetching langgraph-api==$lga_version's openapi.json into $lga"
	rm -rf "$lga"
	mkdir -p "$lga/wheel"
	"$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-input \
		--no-deps --only-binary=:all: -d "$lga/wheel" "langgraph-api==$lga_version"
	whl="$lga/wheel/langgraph_api-$lga_version-py3-none-any.whl"
	echo "$lga_sha  $whl" | sha256sum --quiet -c -
	"$venv/bin/python" -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("openapi.json"))' \
		"$whl" "$lga/openapi.json"
	rm -rf "$lga/wheel"
	echo "$want" >"$stamp"
fi

# --- JavaScript: test/conformance/js/node_modules ------------------------------
jsdir=test/conformance/js
lock="$jsdir/package-lock.json"
stamp="$jsdir/node_modules/.stepgraph-lock.sha256"
want=$(hash_of "$lock")
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-test-deps: $jsdir/node_modules up to date"
else
	echo "install-test-deps: npm ci in $jsdir"
	(cd "$jsdir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
	echo "$want" >"$stamp"
fi

# --- JavaScript: console/node_modules (the web console's pinned toolchain) ---
# internal/console's TestBuildMatchesSources rebuilds the committed bundle
# with it (esbuild's binary comes in its @esbuild/<platform> package: no
# install script is needed).
jsdir=console
lock="$jsdir/package-lock.json"
stamp="$jsdir/node_modules/.stepgraph-lock.sha256"
want=$(hash_of "$lock")
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-test-deps: $jsdir/node_modules up to date"
else
	echo "install-test-deps: npm ci in $jsdir"
	(cd "$jsdir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
	echo "$want" >"$stamp"
fi

# --- Headless browser: Debian's chromium (the console's browser tests) -------
# Exact versions, newest first. Debian's security archive serves only the
# latest chromium of a release and drops the one before at each update, so
# one pin alone breaks a fresh machine within weeks: the first of these the
# archive still serves is installed, the last being the release's point
# version (it changes only at point releases). When none is served any
# more, add the one `apt-cache policy chromium` offers at the top.
chromium_versions=(156.0.8078.129-1~deb12u1 156.0.8078.108-1~deb12u1 150.0.7871.100-1~deb12u1)
installed=$(dpkg-query -W -f='${Version}' chromium 2>/dev/null || true)
if [[ " ${chromium_versions[*]} " == *" $installed "* ]]; then
	echo "install-test-deps: chromium $installed present"
else
	apt-get update -qq
	served=$(apt-cache madison chromium | awk -F'|' '{gsub(/ /, "", $2); print $2}')
	chromium_version=
	for v in "${chromium_versions[@]}"; do
		if grep -qxF -- "$v" <<<"$served"; then
			chromium_version=$v
			break
		fi
	done
	if [[ -z $chromium_version ]]; then
		echo "install-test-deps: none of chromium ${chromium_versions[*]} is served any more (served: $(echo $served)); add the current one to chromium_versions" >&2
		exit 1
	fi
	echo "install-test-deps: installing chromium $chromium_version"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "chromium=$chromium_version" >/dev/null
fi

# --- OAuth 2.0 server: .deps/mock-oauth2-server/lib -------------------------
# Maven Central, through Maven (which checks each download's checksum); the
# jars are then checked against our own sha256 list. Java 17 runs it.
mo2=.deps/mock-oauth2-server
stamp="$mo2/.stepgraph-oauth.sha256"
want=$(cat test/oauth/pom.xml test/oauth/jars.sha256 | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-test-deps: $mo2 up to date"
else
	echo "install-test-deps: fetching mock-oauth2-server into $mo2"
	rm -rf "$mo2"
	mvn -q -B -f test/oauth/pom.xml dependency:copy-dependencies \
		-DoutputDirectory="$PWD/$mo2/lib" -DincludeScope=runtime
	(cd "$mo2/lib" && sha256sum --quiet -c "$OLDPWD/test/oauth/jars.sha256")
	if [[ $(ls "$mo2/lib" | wc -l) != $(wc -l <test/oauth/jars.sha256) ]]; then
		echo "install-test-deps: $mo2/lib does not hold exactly the jars of test/oauth/jars.sha256" >&2
		exit 1
	fi
	echo "$want" >"$stamp"
fi

# --- AWS emulator: .venv-ministack -------------------------------------------
scripts/install-ministack.sh

# --- CDK app: infra/node_modules (CDK CLI, Node 22) and infra's Go modules ---
scripts/install-cdk.sh
