# The entry points users start from (see README.md):
#   make up    - run a single-node cluster on this host (embedded storage) and the nginx sample
#   make test  - install what the tests need, then run every test
#   make lab   - run a cluster of $(NODES) nodes on this host, each in a network namespace (make lab-down removes it)
GO ?= go
BIN := bin
# grpcnotrace keeps grpc (linked through upstream's webhook client and
# tracing) from importing golang.org/x/net/trace, whose html/template use
# makes the linker keep every exported method: 125.7 MB of controlplane
# instead of 90.8 MB (docs/benchmarks.md). scripts/up.sh, the e2e
# harness and packaging/deb/build.sh build with the same tag.
BUILDTAGS := grpcnotrace
NODES ?= 3

.PHONY: up test deps build unit fuzz e2e bench vet fmt clean lab lab-down

build:
	$(GO) build -tags $(BUILDTAGS) -o $(BIN)/ ./cmd/...

# up installs what it needs (scripts/deps.sh up) and builds by itself, and
# says so phase by phase.
up:
	scripts/up.sh

lab: build
	$(BIN)/nodelet-lab up --nodes $(NODES)

lab-down:
	$(BIN)/nodelet-lab down

# The VM lab (packaging/lab, as root): Debian 12 guests under QEMU (cp,
# node1, node2) running the .deb of the working tree under systemd; the
# image is built once and cached in /var/cache/nodelet-vm-lab.
.PHONY: vm-lab vm-lab-up vm-lab-down vm-lab-test
vm-lab: vm-lab-up
	KUBECONFIG=_output/vm-lab/kubeconfig packaging/smoke.sh --node-exec packaging/lab/ssh.sh

vm-lab-up: build deb
	packaging/lab/up.sh

vm-lab-down:
	packaging/lab/down.sh

vm-lab-test: build deb
	packaging/lab/test.sh

# The .deb: _output/deb/nodelet_$(VERSION)_amd64.deb, built with nfpm
# (packaging/nfpm.yaml); `make deb VERSION=0.1.1` sets the version.
# packaging-check builds it and checks it, the install scripts and the
# Vagrantfile without installing anything on this host.
# Evaluated once per make run (a commit during a run must not rename the .deb
# between deb and packaging-check).
ifndef VERSION
VERSION := $(shell packaging/deb/version.sh)
endif
.PHONY: deb packaging-check
deb:
	VERSION='$(VERSION)' GO='$(GO)' packaging/deb/build.sh

packaging-check: deb
	GO='$(GO)' packaging/deb/check.sh _output/deb/nodelet_$(VERSION)_amd64.deb

deps:
	scripts/deps.sh

test: deps vet unit fuzz e2e packaging-check vm-lab-test

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 -timeout 15m $$($(GO) list ./... | grep -v /test/e2e)

# Each fuzz target runs for FUZZTIME beyond its seeds (which unit runs);
# a crash fails the target and leaves its input in the package's testdata.
# FuzzPatch's bombs take a tenth of a second each: minimizing a new input
# near them for the default minute would leave no time to fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRequests$$' -fuzztime $(FUZZTIME) ./controlplane/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzPatch$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./controlplane/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzSelectors$$' -fuzztime $(FUZZTIME) ./controlplane/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./controlplane/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzListQuery$$' -fuzztime $(FUZZTIME) ./controlplane/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzAuthorizationAttributes$$' -fuzztime $(FUZZTIME) ./controlplane/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzAuthenticateToken$$' -fuzztime $(FUZZTIME) ./controlplane/satoken/
	$(GO) test -run '^$$' -fuzz '^FuzzAuthenticate$$' -fuzztime $(FUZZTIME) ./controlplane/bootstraptoken/
	$(GO) test -run '^$$' -fuzz '^FuzzRecognise$$' -fuzztime $(FUZZTIME) ./controlplane/controllers/servingcsr/

e2e: build
	$(GO) test -count=1 -timeout 35m ./test/e2e/...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./controlplane/storage/bolt/ ./controlplane/apiserver/ ./controlplane/scheduler/
	$(GO) test -run '^$$' -bench . -benchtime 200x ./gc/ ./eviction/
	$(GO) test -run '^$$' -bench . -benchtime 30x ./proxy/
	$(GO) test -run '^$$' -bench . -benchtime 2s ./clusterdns/
	$(GO) test -run '^$$' -bench 'PodStartup|DebugCommands|KubectlDebug|HelmInstall|LocalPathClaim|ExternalProvisionerClaim|NodeletRestartWithVolumes|ControlPlaneCreates|CustomResourceCreates|MemoryWithCRDs|ProbeOverhead|Lab|NodeMemory|Workloads' -benchtime 1x -timeout 45m ./test/e2e/

clean:
	rm -rf $(BIN) _output
