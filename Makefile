# The two entry points users start from (see README.md):
#   make up    - run a single-node cluster on this host (embedded storage) and the nginx sample
#   make test  - install what the tests need, then run every test
GO ?= go
BIN := bin

.PHONY: up test deps build unit e2e bench vet fmt clean

build:
	$(GO) build -o $(BIN)/ ./cmd/...

up: build
	scripts/up.sh

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
	$(GO) test -run '^$$' -bench 'PodStartup|DebugCommands|ProbeOverhead' -benchtime 1x -timeout 30m ./test/e2e/

clean:
	rm -rf $(BIN) _output
