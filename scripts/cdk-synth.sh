#!/usr/bin/env bash
# Synthesizes the CDK app in infra/ with the pinned CDK CLI, offline and
# without AWS credentials: writes infra/cdk.out (the CloudFormation template
# stepgraph-<stage>.template.json and the Lambda assets).
#
#   scripts/cdk-synth.sh                      # stage dev, arm64
#   scripts/cdk-synth.sh -c stage=prod -c arch=x86_64
#
# Extra arguments go to `cdk synth` (context keys: see infra/main.go). The
# Lambda assets are bin/lambdas/<name>/bootstrap: when one is missing this
# runs `make lambdas` first, for the architecture of -c arch. LAMBDAS=rebuild
# always runs it; LAMBDAS=skip never does (e.g. with -c lambdaDir=<dir of
# prebuilt bootstraps>). The CLI and Node.js come from infra/node_modules
# (scripts/install-cdk.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-cdk.sh >/dev/null

need=${LAMBDAS:-}
if [[ -z "$need" ]]; then
	for d in functions/*/; do
		[[ -d "$d" ]] || continue
		[[ -f "bin/lambdas/$(basename "$d")/bootstrap" ]] || need=rebuild
	done
fi
if [[ "$need" == rebuild ]]; then
	# The architecture the stack declares (-c arch=..., default arm64).
	lambda_arch=arm64
	for a in "$@"; do
		case "$a" in
		arch=x86_64 | arch=amd64) lambda_arch=amd64 ;;
		arch=arm64) lambda_arch=arm64 ;;
		esac
	done
	make --no-print-directory lambdas LAMBDA_ARCH="$lambda_arch"
fi

cd infra
export PATH="$PWD/node_modules/.bin:$PATH"
# Offline: no version check, telemetry, notices or instance-metadata lookups.
export CDK_DISABLE_VERSION_CHECK=1 CDK_DISABLE_CLI_TELEMETRY=true AWS_EC2_METADATA_DISABLED=true
start=$(date +%s)
cdk synth --quiet --no-notices --no-version-reporting "$@"
echo "cdk-synth: infra/cdk.out written in $(( $(date +%s) - start )) s:"
for t in cdk.out/*.template.json; do
	n=$(node -e 'console.log(Object.keys(require(process.argv[1]).Resources).length)' "$PWD/$t")
	echo "  $t ($n resources)"
done
