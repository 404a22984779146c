#!/usr/bin/env bash
# Deploys the real CDK app (infra/) into MiniStack, the AWS emulator, with the
# pinned CDK CLI: `cdk bootstrap` then `cdk deploy`, no cdklocal. Then checks
# the deployed HTTP API answers through API Gateway (GET /ok, a stateless
# and a thread runs/wait executed by Step Functions and the run worker, a
# request without a key refused), prints the timings, and stops the
# emulator (also on failure).
#
#   scripts/cdk-deploy-ministack.sh            # deploy, check, stop
#   KEEP=1 scripts/cdk-deploy-ministack.sh     # leave MiniStack running and
#                                              # print how to reach it
#
# MiniStack runs on a free loopback port (never 4566, which tests or a
# developer may use), from .venv-ministack (scripts/install-ministack.sh).
# Its Lambdas run the bootstrap as a local process, so the functions are
# built here for the host's architecture (`make lambdas LAMBDA_ARCH=<host>`,
# -c arch follows) into a temporary directory; bin/lambdas (arm64, for AWS)
# is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
stage=${STAGE:-ministack}

scripts/install-cdk.sh >/dev/null
scripts/install-ministack.sh >/dev/null

work=$(mktemp -d -t stepgraph-cdk-ministack-XXXXXX)
ms_pid=
cleanup() {
	local status=$?
	if [[ -n "$ms_pid" && -z "${KEEP:-}" && ( -z "${OUTPUTS:-}" || $status -ne 0 ) ]]; then
		kill "$ms_pid" 2>/dev/null || true
		wait "$ms_pid" 2>/dev/null || true
	fi
	if [[ -z "${KEEP:-}" ]]; then
		rm -rf "$work"
	fi
}
trap cleanup EXIT

now() { date +%s%N; }
since() { local ms=$((($(now) - $1) / 1000000)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

# --- the functions, for the host ---------------------------------------------
t=$(now)
goarch=$(go env GOARCH)
case "$goarch" in
amd64) arch=x86_64 ;;
arm64) arch=arm64 ;;
*) echo "cdk-deploy-ministack: unsupported host architecture $goarch" >&2; exit 1 ;;
esac
make --no-print-directory lambdas LAMBDA_ARCH="$goarch" LAMBDA_DIR="$work/lambdas" >/dev/null
echo "cdk-deploy-ministack: functions built for linux/$goarch in $(since "$t") s"

# --- MiniStack on a free loopback port -----------------------------------------
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
t=$(now)
# Only the variables below reach MiniStack (and the Lambdas it runs): no
# AWS settings of the caller's environment.
env -i PATH="$PATH" HOME="$HOME" \
	BIND_HOST=127.0.0.1 GATEWAY_PORT="$port" IOT_MTLS_ENABLED=0 SFTP_ENABLED=0 \
	SFN_WAIT_SCALE=0 PERSIST_STATE=0 MINISTACK_REGION=us-east-1 LOG_LEVEL=WARNING \
	AWS_ENDPOINT_URL="$url" AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
	.venv-ministack/bin/ministack >"$work/ministack.log" 2>&1 &
ms_pid=$!
for _ in $(seq 1 300); do
	curl -sf "$url/_ministack/health" >/dev/null 2>&1 && break
	kill -0 "$ms_pid" 2>/dev/null || { tail -20 "$work/ministack.log" >&2; exit 1; }
	sleep 0.2
done
curl -sf "$url/_ministack/health" >/dev/null || { echo "MiniStack did not start" >&2; tail -20 "$work/ministack.log" >&2; exit 1; }
echo "cdk-deploy-ministack: MiniStack (pid $ms_pid) healthy on $url in $(since "$t") s"

# --- cdk bootstrap + deploy ------------------------------------------------------
cd infra
export PATH="$PWD/node_modules/.bin:$PATH"
export CDK_DISABLE_VERSION_CHECK=1 CDK_DISABLE_CLI_TELEMETRY=true AWS_EC2_METADATA_DISABLED=true
export AWS_ENDPOINT_URL="$url" AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
unset AWS_PROFILE AWS_SESSION_TOKEN
export CDK_DEFAULT_ACCOUNT=000000000000 CDK_DEFAULT_REGION=us-east-1
# waf=false: MiniStack's CloudFormation has no AWS::WAFv2::WebACLAssociation
# (the web ACL itself is checked by the synth tests, infra/stack).
ctx=(-c "stage=$stage" -c "arch=$arch" -c "lambdaDir=$work/lambdas" -c retain=false -c waf=false)

t=$(now)
cdk bootstrap aws://000000000000/us-east-1 --no-notices "${ctx[@]}" --output "$work/cdk.out" >"$work/bootstrap.log" 2>&1 ||
	{ tail -40 "$work/bootstrap.log" >&2; exit 1; }
echo "cdk-deploy-ministack: cdk bootstrap in $(since "$t") s"

t=$(now)
cdk deploy "stepgraph-$stage" --no-notices --require-approval never "${ctx[@]}" \
	--output "$work/cdk.out" --outputs-file "$work/outputs.json" >"$work/deploy.log" 2>&1 ||
	{ tail -60 "$work/deploy.log" >&2; exit 1; }
echo "cdk-deploy-ministack: cdk deploy in $(since "$t") s"
cat "$work/outputs.json"

# MiniStack ignores TimeToLiveSpecification in CloudFormation: enable TTL on
# the tables the template declares it for, as AWS does on deploy.
t=$(now)
node -e '
const tmpl = require(process.argv[1]);
for (const r of Object.values(tmpl.Resources)) {
  const p = r.Properties || {};
  if (r.Type === "AWS::DynamoDB::Table" && p.TimeToLiveSpecification) {
    console.log(p.TableName + " " + p.TimeToLiveSpecification.AttributeName);
  }
}' "$work/cdk.out/stepgraph-$stage.template.json" | while read -r table attr; do
	curl -sf -o /dev/null -X POST "$url/" -H 'Content-Type: application/x-amz-json-1.0' \
		-H 'X-Amz-Target: DynamoDB_20120810.UpdateTimeToLive' \
		-H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' \
		-d "{\"TableName\":\"$table\",\"TimeToLiveSpecification\":{\"AttributeName\":\"$attr\",\"Enabled\":true}}"
	echo "cdk-deploy-ministack: TTL on $table.$attr"
done

# --- the deployed API answers through API Gateway ---------------------------------
api_id=$(node -e 'const o = require(process.argv[1]); console.log(Object.values(o)[0].ApiId)' "$work/outputs.json")

# MiniStack's CloudFormation keeps the HTTP API's CorsConfiguration with the
# template's key names (AllowOrigins), which its gateway does not read
# (allowOrigins): set it again through the API (UpdateApi), as AWS has it.
cors=$(node -e '
const tmpl = require(process.argv[1]);
for (const r of Object.values(tmpl.Resources)) {
  const c = r.Type === "AWS::ApiGatewayV2::Api" && (r.Properties || {}).CorsConfiguration;
  if (c) {
    const out = {};
    for (const [k, v] of Object.entries(c)) out[k[0].toLowerCase() + k.slice(1)] = v;
    console.log(JSON.stringify({corsConfiguration: out}));
  }
}' "$work/cdk.out/stepgraph-$stage.template.json")
if [[ -n "$cors" ]]; then
	curl -sf -o /dev/null -X PATCH "$url/v2/apis/$api_id" -H 'Content-Type: application/json' \
		-H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/apigateway/aws4_request, SignedHeaders=host, Signature=0' \
		-d "$cors"
	# A browser's preflight from the stage's allow-list (LangGraph Studio by
	# default) passes at the gateway, without a function; another origin's
	# does not, and no OPTIONS reaches the system function's 405.
	studio=https://smith.langchain.com
	h=$(curl -sS --max-time 60 -o /dev/null -D - -X OPTIONS -H "Origin: $studio" -H 'Access-Control-Request-Method: POST' \
		-H 'Access-Control-Request-Headers: content-type,x-api-key' "$url/_aws/execute-api/$api_id/threads/$(cat /proc/sys/kernel/random/uuid)/runs/stream")
	echo "cdk-deploy-ministack: preflight from $studio -> $(head -1 <<<"$h" | tr -d '\r')"
	{ grep -q '^HTTP/[0-9.]* 204' <<<"$h" && grep -qi "^access-control-allow-origin: $studio" <<<"$h" && grep -qi '^access-control-allow-headers:.*x-api-key' <<<"$h"; } ||
		{ echo "cdk-deploy-ministack: the preflight failed:" >&2; echo "$h" >&2; exit 1; }
	code=$(curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: https://evil.example' \
		-H 'Access-Control-Request-Method: POST' "$url/_aws/execute-api/$api_id/threads")
	echo "cdk-deploy-ministack: preflight from another origin -> $code"
	[[ "$code" == 403 ]] || { echo "cdk-deploy-ministack: another origin's preflight answered $code" >&2; exit 1; }
fi
t=$(now)
body=$(curl -sS --max-time 60 -w ' HTTP %{http_code}' "$url/_aws/execute-api/$api_id/ok")
echo "cdk-deploy-ministack: GET /ok through API Gateway -> $body ($(since "$t") s)"
[[ "$body" == *"HTTP 200" ]] || { echo "cdk-deploy-ministack: /ok failed" >&2; tail -40 "$work/ministack.log" >&2; exit 1; }
if [[ -n "$cors" ]]; then
	h=$(curl -sS --max-time 60 -o /dev/null -D - -H "Origin: $studio" "$url/_aws/execute-api/$api_id/ok")
	grep -qi "^access-control-allow-origin: $studio" <<<"$h" || { echo "cdk-deploy-ministack: GET /ok from $studio without CORS headers:" >&2; echo "$h" >&2; exit 1; }
	echo "cdk-deploy-ministack: GET /ok from $studio carries Access-Control-Allow-Origin"
fi
# Any other path reaches the system function through $default: the API's
# own 404, not the gateway's.
body=$(curl -sS --max-time 60 -w ' HTTP %{http_code}' "$url/_aws/execute-api/$api_id/no/such/path")
echo "cdk-deploy-ministack: GET /no/such/path -> $body"
[[ "$body" == '{"detail":'*"HTTP 404" ]] || { echo "cdk-deploy-ministack: \$default route failed" >&2; exit 1; }

# A key for the deployed stack (stepgraph keys on its tables), then runs
# through API Gateway → the API Lambdas → Step Functions → the run worker.
prefix=$(node -e 'const o = require(process.argv[1]); console.log(Object.values(o)[0].TablePrefix)' "$work/outputs.json")
key=$(cd "$root" && go run ./cmd/stepgraph keys create --org default --aws-table-prefix "$prefix")
api="$url/_aws/execute-api/$api_id"
t=$(now)
body=$(curl -sS --max-time 60 -w ' HTTP %{http_code}' -H "X-Api-Key: $key" -H 'Content-Type: application/json' \
	-d '{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}' "$api/runs/wait")
echo "cdk-deploy-ministack: POST /runs/wait (echo) -> $body ($(since "$t") s)"
[[ "$body" == *'"content":"echo: hi"'*"HTTP 200" ]] || { echo "cdk-deploy-ministack: stateless run failed" >&2; tail -40 "$work/ministack.log" >&2; exit 1; }
thread=$(cat /proc/sys/kernel/random/uuid)
t=$(now)
body=$(curl -sS --max-time 60 -w ' HTTP %{http_code}' -H "X-Api-Key: $key" -H 'Content-Type: application/json' \
	-d '{"assistant_id":"counter","input":{"steps":5},"if_not_exists":"create"}' "$api/threads/$thread/runs/wait")
echo "cdk-deploy-ministack: POST /threads/$thread/runs/wait (counter, 5 steps) -> $body ($(since "$t") s)"
[[ "$body" == *'"count":5'*"HTTP 200" ]] || { echo "cdk-deploy-ministack: thread run failed" >&2; tail -40 "$work/ministack.log" >&2; exit 1; }
body=$(curl -sS --max-time 60 -w ' HTTP %{http_code}' -d '{"assistant_id":"echo"}' "$api/runs/wait")
[[ "$body" == '{"detail":'*"HTTP 401" ]] || { echo "cdk-deploy-ministack: a request without a key got $body" >&2; exit 1; }

# OUTPUTS=<file>: leave MiniStack up for the caller (test/awsstack drives the
# deployed stack further) and say where everything is, as JSON. The caller
# stops it: MiniStack runs in this script's process group.
if [[ -n "${OUTPUTS:-}" ]]; then
	node -e '
const o = Object.values(require(process.argv[1]))[0];
console.log(JSON.stringify({endpoint: process.argv[2], api: process.argv[2] + "/_aws/execute-api/" + o.ApiId,
  table_prefix: o.TablePrefix, secrets_prefix: o.SecretsPrefix, ministack_pid: Number(process.argv[3])}));
' "$work/outputs.json" "$url" "$ms_pid" >"$OUTPUTS"
fi

if [[ -n "${KEEP:-}" ]]; then
	cat <<EOT
MiniStack stays up (pid $ms_pid); stop it with: kill $ms_pid
  export AWS_ENDPOINT_URL=$url AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  API: $url/_aws/execute-api/$api_id/
  files: $work
EOT
fi
