# The entry points users start from (see README.md):
#   make up    - run a single-node cluster on this host (embedded storage) and the nginx sample
#   make test  - install what the tests need, then run every test
#   make lab   - run a cluster of $(NODES) nodes on this host, each in a network namespace (make lab-down removes it)
GO ?= go
BIN := bin
NODES ?= 3

.PHONY: up test deps build unit e2e bench vet fmt clean lab lab-down

build:
	$(GO) build -o $(BIN)/ ./cmd/...

up: build
	scripts/up.sh

lab: build
	$(BIN)/nodelet-lab up --nodes $(NODES)

lab-down:
	$(BIN)/nodelet-lab down

deps:
	scripts/deps.sh

test: deps vet unit e2e

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 -timeout 15m $$($(GO) list ./... | grep -v /test/e2e)

e2e: build
	$(GO) test -count=1 -timeout 20m ./test/e2e/...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./controlplane/storage/bolt/ ./controlplane/apiserver/ ./controlplane/scheduler/
	$(GO) test -run '^$$' -bench 'PodStartup|DebugCommands|ProbeOverhead|Lab' -benchtime 1x -timeout 30m ./test/e2e/

clean:
	rm -rf $(BIN) _output
