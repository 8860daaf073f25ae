# flowd — build, run and test.
#
#   make run    a local three-node cluster with demo workers (flowd dev)
#   make test   the whole test suite (what CI runs)

SHELL   := /usr/bin/env bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN     := bin/flowd

# Packages with concurrency run under the race detector.
RACE_PKGS := ./fsm/... ./cluster/... ./rpc/... ./daemon/... ./worker/...

.PHONY: all build run test test-unit test-race test-e2e vet bench deps clean image

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/flowd

run: build
	$(BIN) dev

# Tools the tests drive from outside (socat for the one-shot protocol test).
deps:
	@command -v socat >/dev/null 2>&1 || { \
	  echo "installing socat (needed by the protocol tests)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -q socat >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q socat >/dev/null); \
	  else sudo apt-get install -y -q socat >/dev/null; fi; }

vet:
	$(GO) vet ./...

test: deps vet build
	$(GO) test -race -timeout 10m $(RACE_PKGS)
	$(GO) test -timeout 10m $$($(GO) list ./... | grep -v -E '/(fsm|cluster|rpc|daemon|worker)(/|$$)')

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3000x ./fsm/ ./cluster/

image: build
	docker build -t flowd:$(VERSION) -t flowd:dev -f examples/deploy/Dockerfile .

clean:
	rm -rf bin
