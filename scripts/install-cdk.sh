#!/usr/bin/env bash
# Installs what the CDK app in infra/ needs, at pinned versions, into the
# project:
#   - infra/node_modules from infra/package-lock.json with `npm ci`: the CDK
#     CLI (aws-cdk 2.1148.1 — never unpinned: its `latest` tag is an
#     accidental 3.0.0) and Node.js 22 (npm `node`) that runs the CLI and the
#     app's jsii runtime (the machine's node may be an end-of-life 20);
#   - infra's Go modules (infra/go.mod and go.sum: awscdk v2.220.0, ...).
# Idempotent: node_modules keeps a stamp holding the sha256 of package.json
# and package-lock.json and is left alone while it matches, so a second run
# takes a second or two.
set -euo pipefail
cd "$(dirname "$0")/../infra"

want=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
stamp=node_modules/.stepgraph-lock.sha256
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x node_modules/.bin/cdk && -x node_modules/.bin/node ]]; then
	echo "install-cdk: infra/node_modules up to date"
else
	echo "install-cdk: npm ci in infra"
	# Install scripts stay on: the `node` package fetches its binary in one.
	npm ci --no-audit --no-fund --loglevel=error
	echo "$want" >"$stamp"
	echo "install-cdk: cdk $(node_modules/.bin/cdk --version 2>/dev/null | head -1) on node $(node_modules/.bin/node --version)"
fi
# A go.mod in node_modules keeps its Go files (the CLI's `cdk init`
# templates) out of the infra module; package.json's postinstall writes it,
# this covers an install made with --ignore-scripts.
if [[ ! -f node_modules/go.mod ]]; then
	printf '// Keeps the Go files under node_modules out of the infra module.\nmodule ignored\n' >node_modules/go.mod
fi

# `go mod download` checks what it fetches against infra/go.sum.
go mod download
echo "install-cdk: infra Go modules present"
