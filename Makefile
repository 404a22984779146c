# stepgraph — see README.md. Two commands set up a fresh machine:
#   make run    build and start the local server on the embedded store
#   make test   install every test dependency (pinned), then run all tests

GO      ?= go
BIN     := bin/stepgraph
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test test-deps vet fmt-check fuzz clean bench bench-smoke

# Each fuzz target runs a fixed number of executions (about 10 s each here).
# Counts, not durations: a duration -fuzztime can fail a clean run with a bare
# "context deadline exceeded" (a race in Go's fuzz coordinator, go.dev/issue/75804,
# fixed in Go 1.27). FUZZSCALE multiplies every count (e.g. FUZZSCALE=10).
FUZZSCALE ?= 1
FUZZ_TARGETS := internal/api:FuzzRequests:12000 internal/graph:FuzzRunInput:400000

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stepgraph

run: build
	./$(BIN) serve

test-deps:
	scripts/install-test-deps.sh

test: test-deps fmt-check vet
	$(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) bench-smoke
	$(MAKE) fuzz

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
# `langgraphjs dev`): installs the pinned peers, runs the same workloads on
# each and on stepgraph (durability async and sync) on 127.0.0.1, and writes
# bench/results/<date>.md, .json and .png. Takes several minutes.
bench:
	scripts/install-bench-deps.sh
	$(GO) run ./bench/cmd/loadgen -invoked-by "make bench"

# The same load generator against stepgraph only, with tiny counts, every
# answer checked: a few seconds, no peers, no files.
bench-smoke:
	$(GO) run ./bench/cmd/loadgen -smoke
