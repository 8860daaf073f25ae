# flowd — build, run and test.
#
#   make run    a local three-node cluster with demo workers (flowd dev);
#               ARGS='--nodes 5 --no-tls' passes flowd dev flags, and the
#               FLOWD_DEV_* variables (FLOWD_DEV_NODES=5 make run) work too
#   make test   the whole test suite (what CI runs)

SHELL   := /usr/bin/env bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN     := bin/flowd

# Packages with concurrency run under the race detector.
RACE_PKGS := ./fsm/... ./cluster/... ./rpc/... ./daemon/... ./worker/... ./tui/...

.PHONY: all build run test test-python vet staticcheck generate-check bench bench-queues bench-profile deps clean image chaos compose-test

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/flowd

# ARGS: flowd dev's flags (make run ARGS='--nodes 5 --http-base-port 0').
ARGS ?=
run: build
	$(BIN) dev $(ARGS)

# Tools the tests drive from outside: socat (one-shot protocol calls), jq
# (examples/scripts/submit.sh), tmux (the TUI end-to-end test), mypy (the
# Python SDK's type check; Debian's package).
TOOLS := socat jq tmux mypy

# staticcheck comes from the Go module proxy (go run ...@version, cached in
# the module cache after the first run); no other download.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# deps installs only as root (apt-get, never sudo inside make); otherwise it
# names what is missing and how to install it (the e2e tests that drive
# socat and jq fail without them, the tmux one skips).
deps:
	@missing=""; for t in $(TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing$$missing (used by the tests)"; \
	    apt-get install -y -q $$missing >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }; \
	  else \
	    echo "missing$$missing (used by the tests): run sudo apt-get install$$missing, then make test again"; \
	  fi; \
	fi
	$(GO) mod download

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed (run gofmt -w on them):"; echo "$$unformatted"; exit 1; fi

staticcheck:
	$(STATICCHECK) ./...

# Generated code (go:generate: the MessagePack record codecs) must match its
# source: regenerate and fail if anything changed.
generate-check:
	$(GO) generate ./...
	@if git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --quiet -- $$(git ls-files '*_msgp.go'); then \
	  echo "generated code is out of date: run go generate ./... and commit the result"; git diff --stat -- $$(git ls-files '*_msgp.go'); exit 1; fi

# The second line runs with -count=1: the chaos, e2e and CLI tests build and
# start the flowd binary themselves, which go test's cache does not see, so a
# cached pass could hide a change to the agent.
test: deps vet staticcheck generate-check build
	$(GO) test -race -timeout 10m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 10m $$($(GO) list ./... | grep -v -E 'flowd/flowd/(fsm|cluster|rpc|daemon|worker|tui)(/|$$)')
	cd internal/hashicorp-raft && $(GO) test -count=1 -run 'Await' .
	$(MAKE) --no-print-directory test-python

# The Python SDK (worker/python): installed offline into a fresh venv, as a
# user would (pip, no index, the package's in-tree build backend), then its
# unittest suite against three real agents it starts from bin/flowd.
PY_VENV ?= $(or $(TMPDIR),/tmp)/flowd-py-venv
test-python: build
	rm -rf $(PY_VENV) && python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q --no-index --no-build-isolation ./worker/python
	@if command -v mypy >/dev/null 2>&1; then mypy --strict --python-version 3.9 worker/python/src/flowd; \
	else echo "mypy not installed (make deps installs it as root): type check skipped; test_imports checks the annotations"; fi
	cd worker/python/tests && FLOWD_BIN=$(CURDIR)/$(BIN) $(PY_VENV)/bin/python -m unittest discover -s . -t .

# The compose example as shipped (examples/deploy): builds the image
# flowd:dev from static binaries, docker-compose up (certificates, three
# mTLS agents, the example worker), a leader over the TLS client listener
# with a token, a workflow the worker completes, docker-compose down -v.
# Needs Docker Engine and docker-compose v1; about a minute, so not in test.
compose-test:
	FLOWD_DOCKER=1 $(GO) test -count=1 -timeout 10m -run '^TestComposeUp$$' -v ./internal/testing/e2e/

# The long fault-injection run (internal/testing/chaos, docs/chaos.md; root, ip, nft;
# ~6-10 min): every fault kind at least twice under load, >= 8,000 tasks.
# It fails on the liveness counters too (FLOWD_CHAOS_STRICT=0: report them).
chaos:
	FLOWD_CHAOS_LONG=1 $(GO) test -count=1 -timeout 45m -run '^TestChaosLong$$' -v ./internal/testing/chaos/

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3000x ./fsm/ ./cluster/raftnode/

# The side-by-side job-queue benchmark (../shared/bench/queues: flowd against
# Asynq, River and a Postgres SKIP LOCKED loop, interleaved passes; ~40 min).
# It installs and starts its own Postgres and Redis. Results: bench-results/.
QUEUES ?= ../shared/bench/queues
bench-queues: build
	FLOWD_BIN=$(BIN) PEERS="flowd flowd-batch8 asynq-everysec asynq-always pgskiplocked river" \
	  N=$${N:-10000} PASSES=$${PASSES:-3} EXTRA_PEERS="flowd-leader" EXTRA_WS="1 64" \
	  PACED_PEERS="flowd asynq-always pgskiplocked" bash $(QUEUES)/run.sh

# CPU profiles of the agents while the harness runs flowd at W=64 (the agents
# serve /debug/pprof only with --pprof: FLOWD_PPROF=1 reaches them through
# flowd dev).
bench-profile: build
	FLOWD_PPROF=1 FLOWD_BIN=$(BIN) bash $(QUEUES)/profile-flowd.sh

image: build
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w' -o bin/flowd-example-worker ./examples/worker
	docker build -t flowd:$(VERSION) -t flowd:dev -f examples/deploy/Dockerfile .

clean:
	rm -rf bin
