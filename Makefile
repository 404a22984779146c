# stepgraph — see README.md. Two commands set up a fresh machine:
#   make run    build and start the local server on the embedded store
#   make test   install every test dependency (pinned), then run all tests

GO      ?= go
BIN     := bin/stepgraph
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test test-deps test-infra vet fmt-check fuzz clean bench bench-smoke

# Each fuzz target runs a fixed number of executions (about 10 s each here).
# Counts, not durations: a duration -fuzztime can fail a clean run with a bare
# "context deadline exceeded" (a race in Go's fuzz coordinator, go.dev/issue/75804,
# fixed in Go 1.27). FUZZSCALE multiplies every count (e.g. FUZZSCALE=10).
FUZZSCALE ?= 1
FUZZ_TARGETS := internal/api:FuzzRequests:12000 internal/graph:FuzzRunInput:400000 internal/graphdoc:FuzzGraphDocument:60000

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stepgraph

# The walk-through of README.md deploys a repository it makes under
# LOCAL_REPOS: the one directory `make run` lets deployments read file://
# repositories from (serve -allow-local-repos; off by default).
LOCAL_REPOS ?= local-repos

run: build
	mkdir -p $(LOCAL_REPOS)
	./$(BIN) serve -allow-local-repos $(LOCAL_REPOS)

test-deps:
	scripts/install-test-deps.sh

test: test-deps fmt-check vet
	$(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) test-infra
	$(MAKE) bench-smoke
	$(MAKE) fuzz

# The CDK app (its own module): vet and the synth tests. (The real cdk
# bootstrap + cdk deploy onto MiniStack runs in `go test ./...`:
# test/awsstack.) The pinned Node 22 of infra/node_modules goes first on
# PATH: jsii picks `node` up when the test binary starts.
INFRA_PATH = $(CURDIR)/infra/node_modules/.bin:$(PATH)
test-infra:
	cd infra && PATH="$(INFRA_PATH)" $(GO) vet ./... && PATH="$(INFRA_PATH)" $(GO) test -count=1 ./...

# Deploys the stack to the AWS account and region of the environment (AWS
# credentials as for any AWS tool; `cdk bootstrap` once per account and
# region first): the Lambdas for arm64, then `cdk deploy`.
#   make deploy CDK_ARGS='-c stage=prod'
.PHONY: deploy
deploy: lambdas
	scripts/install-cdk.sh
	cd infra && PATH="$(INFRA_PATH)" cdk deploy $(CDK_ARGS)

# Each fuzz target from its checked-in corpus (testdata/fuzz).
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; n=$$(( $${rest##*:} * $(FUZZSCALE) )); \
		echo "fuzz $$fn ($$pkg) for $$n executions"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $${n}x ./$$pkg || exit 1; \
	done

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin

# Side by side with the LangGraph Agent Servers (Python `langgraph dev`, JS
# `langgraphjs dev`) and Aegra on a PostgreSQL of its own (started and
# stopped by loadgen): installs the pinned peers, runs the same workloads on
# each and on stepgraph (durability async and sync) on 127.0.0.1, and writes
# bench/results/<date>.md, .json and .png; then a LangGraph app (the ReAct
# agent, react) on `stepgraph dev` and `langgraph dev` beside the graph's
# own in-process time. First, ckptbench measures issue
# 19's growing conversation and large state (<date>-checkpoints.*), which
# the report quotes. Takes several minutes.
bench:
	scripts/install-bench-deps.sh
	$(GO) run ./bench/cmd/ckptbench
	$(GO) run ./bench/cmd/loadgen -invoked-by "make bench"

# The same load generator against stepgraph only, with tiny counts, every
# answer checked: a few seconds, no peers, no files.
bench-smoke:
	$(GO) run ./bench/cmd/loadgen -smoke

# The API's share of a Lambda cold start (INIT): api.New for every operation
# and for one small function's routes; and the CPU of a wait function's
# answer (review #19: sizing the wait functions). Timings only, for
# bench/results/<date>-cold-start.md; no pass/fail.
.PHONY: bench-cold-start
bench-cold-start:
	$(GO) test -run '^$$' -bench BenchmarkNew -benchtime 20x -count 3 ./internal/api/
	$(GO) test -run '^$$' -bench BenchmarkBufferedAnswer -benchtime 20x -count 3 ./internal/lambdaapp/

# What one run costs on the AWS path (issue 6's cost model): the loadgen
# workloads through the stack on MiniStack (127.0.0.1, started and stopped
# by the command), every AWS call metered, priced at AWS's on-demand prices:
# bench/results/<date>-aws-cost.md and .json. About two minutes.
.PHONY: bench-aws-cost
bench-aws-cost:
	@scripts/install-ministack.sh >/dev/null
	$(GO) run ./bench/cmd/awscost -invoked-by "make bench-aws-cost"

# The CloudFormation template of the CDK app (infra/), offline, with the
# pinned CDK CLI: infra/cdk.out. Builds the Lambdas first when missing.
# Context: make synth CDK_ARGS='-c stage=prod -c arch=x86_64'
.PHONY: synth
synth:
	scripts/cdk-synth.sh $(CDK_ARGS)

# The Lambda functions of functions/ as provided.al2023 bootstraps:
# bin/lambdas/<name>/bootstrap and bootstrap.zip. arm64 by default (the
# deployed architecture); LAMBDA_ARCH=$$(go env GOARCH) for this machine
# (what the emulator runs), LAMBDA_DIR to write elsewhere.
LAMBDA_ARCH ?= arm64
LAMBDA_DIR  ?= bin/lambdas
LAMBDA_FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
LAMBDA_LDFLAGS := -s -w -X github.com/stepgraph/stepgraph/internal/lambdaapp.Version=$(VERSION)

.PHONY: lambdas invoke
lambdas:
	@rm -rf $(LAMBDA_DIR)/.build && mkdir -p $(LAMBDA_DIR)/.build
	GOOS=linux GOARCH=$(LAMBDA_ARCH) CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath \
		-ldflags '$(LAMBDA_LDFLAGS)' -o $(LAMBDA_DIR)/.build/ $(addprefix ./functions/,$(LAMBDA_FUNCTIONS))
	@for fn in $(LAMBDA_FUNCTIONS); do \
		mkdir -p $(LAMBDA_DIR)/$$fn && mv $(LAMBDA_DIR)/.build/$$fn $(LAMBDA_DIR)/$$fn/bootstrap && \
		(cd $(LAMBDA_DIR)/$$fn && rm -f bootstrap.zip && \
		 if command -v zip >/dev/null; then zip -q -X bootstrap.zip bootstrap; \
		 else python3 -m zipfile -c bootstrap.zip bootstrap; fi) || exit 1; \
	done
	@rm -rf $(LAMBDA_DIR)/.build
	@# The stepgraph CLI the stack's CodeBuild project runs (stepgraph build
	@# of hosted_repo LangGraph apps), for the same architecture.
	mkdir -p $(LAMBDA_DIR)/stepgraph-build && GOOS=linux GOARCH=$(LAMBDA_ARCH) CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags '-s -w' -o $(LAMBDA_DIR)/stepgraph-build/stepgraph ./cmd/stepgraph
	@echo "$(words $(LAMBDA_FUNCTIONS)) functions ($(LAMBDA_ARCH)) in $(LAMBDA_DIR)/<name>/bootstrap.zip, the CLI in $(LAMBDA_DIR)/stepgraph-build"

# Runs one function's handler once on a sample event and prints its answer:
#   make invoke FN=thread-run-wait EVENT=events/thread-run-wait.json
# cmd/lambda-invoke starts MiniStack on 127.0.0.1 (installed first), deploys
# the tables, the worker Lambdas (built for this machine) and both state
# machines under a fresh prefix, fills the event's {{PLACEHOLDERS}}, runs
# the handler in-process, and stops MiniStack. See events/README.md.
invoke:
	@if [ -z "$(FN)" ] || [ -z "$(EVENT)" ]; then \
		echo "usage: make invoke FN=<function> EVENT=events/<file>.json (functions: $(LAMBDA_FUNCTIONS))"; exit 2; fi
	@scripts/install-ministack.sh >/dev/null
	$(GO) run ./cmd/lambda-invoke -fn $(FN) -event $(EVENT)
