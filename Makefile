# The Makefile is the interface for humans and CI. Every tool it needs is
# pinned and built into a cache outside the repository (see scripts/cluster).
SHELL := /usr/bin/env bash
export GOTOOLCHAIN := local
# The janitor's binaries are static (CGO off): build sets it, as the scripts
# that build the control plane, the tools and the release do. Tests run with
# Go's default; make race turns cgo on, which the race detector needs.

JANITOR_CLUSTER_DIR ?= $(CURDIR)/.cluster
export JANITOR_CLUSTER_DIR
# NODE=1 (or JANITOR_CLUSTER_NODE=1) gives cluster-up and demo the opt-in
# node: kubelet, containerd, runc, CNI; pods run (docs/node.md). Root only.
ifeq ($(NODE),1)
export JANITOR_CLUSTER_NODE := 1
endif
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X github.com/pvc-janitor/pvc-janitor/internal/version.Version=$(VERSION) \
	-X github.com/pvc-janitor/pvc-janitor/internal/version.Commit=$(COMMIT) \
	-X github.com/pvc-janitor/pvc-janitor/internal/version.Date=$(DATE)
TEST_TIMEOUT ?= 40m
# Tests that need the local cluster (or the pinned tools) carry the build tag
# `integration`, as test/testenv itself does: without the tag they do not
# compile, with it ./... is the whole suite (docs/testing.md).
INTEGRATION := -tags integration
# go test through scripts/testsum: go test's own lines, then every skipped
# test with its reason and a closing "N passed, N failed, N skipped".
GOTEST := go run ./scripts/testsum
# The control plane of make test's second run: kube-controller-manager
# without the Unused condition (KEP-5541 gate off), where the janitor's own
# marks are its only clock.
GATED_FEATURE_GATES ?= PersistentVolumeClaimUnusedSinceTime=false
# Feature gates of make chaos's control plane ("" for the defaults), e.g.
# CHAOS_FEATURE_GATES=$(GATED_FEATURE_GATES).
CHAOS_FEATURE_GATES ?=
# KUBE_VERSION=v1.35.4 on any target (cluster-up, demo, test, contract)
# picks the control plane's minor, as JANITOR_KUBE_VERSION does in the
# environment (scripts/cluster/versions.sh lists the supported ones).
ifdef KUBE_VERSION
export JANITOR_KUBE_VERSION := $(KUBE_VERSION)
endif

.PHONY: help build test unit race contract gated matrix lint fuzz sanity control-plane tools cluster-up cluster-down demo demo-seed chart-test release-check image bench chaos node-test

help: ## show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

build: ## build bin/janitor
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/janitor ./cmd/janitor

control-plane: ## build the pinned control-plane binaries and csi-sanity into the cache (cold: ~30 min on 2 busy cores; docs/development.md)
	bash scripts/cluster/build.sh all sanity

test: control-plane tools lint ## the whole suite: vet, gofmt, unit, integration, chart and chaos (short) tests, race detector, csi-sanity, fuzzing, release check; the contract suite on the oldest minor beside safety and chaos again without the Unused condition
	TEST_TIMEOUT=$(TEST_TIMEOUT) bash scripts/test-first-stage.sh
	$(MAKE) --no-print-directory race
	@echo "side by side: the contract suite on the oldest supported minor, $(OLDEST_KUBE_VERSION), and make gated"
	bash scripts/together.sh contract '$(MAKE) --no-print-directory contract KUBE_VERSION=$(OLDEST_KUBE_VERSION)' gated '$(MAKE) --no-print-directory gated'
	$(MAKE) --no-print-directory node-test
	$(MAKE) --no-print-directory sanity
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory mutants
	bash scripts/release/check.sh

gated: control-plane ## safety and chaos (short) on a control plane without the Unused condition (GATED_FEATURE_GATES; make test runs it beside the contract suite)
	JANITOR_CLUSTER_FEATURE_GATES='$(GATED_FEATURE_GATES)' $(GOTEST) $(INTEGRATION) -count=1 -timeout $(TEST_TIMEOUT) -run '^(TestRandomizedSafety|TestChaos)$$' ./test/e2e/

node-test: ## the chart's CronJob, real workspace pods and a cluster rotation with bytes through two nodes (root; kubelet, containerd, runc, CNI built into the cache on first use)
	bash scripts/cluster/build.sh node
	$(GOTEST) -tags 'integration node' -count=1 -timeout $(TEST_TIMEOUT) ./test/nodetest/
	$(GOTEST) -tags 'integration node' -count=1 -timeout $(TEST_TIMEOUT) -run '^TestRotateClusterThroughNodes$$' ./test/rotation/

sanity: ## csi-sanity (kubernetes-csi/csi-test) against the CSI driver: identity, controller, snapshot and node specs (node: root only, bind mounts)
	bash scripts/cluster/sanity.sh

FUZZTIME ?= 3s
FUZZ_TARGETS := internal/config:FuzzLoadFile internal/config:FuzzLoadFlags internal/config:FuzzLoadEnv \
	internal/config:FuzzSelector internal/rescue:FuzzName internal/rescue:FuzzNameDistinct internal/kube:FuzzWalkClaim \
	internal/kube/wire:FuzzWalkPod internal/kube/wire:FuzzWalkPV internal/kube/wire:FuzzReadProtoList internal/kube/wire:FuzzReadJSONList
fuzz: ## each fuzz target for $(FUZZTIME) (config loading of every command, flags, env, selector, snapshot naming, the scan's claim, pod and volume walks, the list envelopes of every kind it lists); a failure, or a name that matches no target, prints its output
	@for pt in $(FUZZ_TARGETS); do p="$${pt%%:*}"; t="$${pt#*:}"; \
		if out="$$(go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) "./$$p/" 2>&1)" && [[ "$$out" != *"no fuzz tests to fuzz"* ]]; then echo "fuzz $$t ok"; \
		else echo "$$out"; echo "fuzz $$t failed (output above; a failing input goes to $$p/testdata/fuzz/$$t)"; exit 1; fi; done

mutants: ## the mutation gate: each safety mutant of scripts/mutants/list.go, applied to a scratch copy of HEAD, must fail its package's pure tests (~2.5 min)
	go run ./scripts/mutants

# The supported Kubernetes minors, oldest first (scripts/cluster/versions.sh).
KUBE_VERSIONS := $(shell bash -c '. scripts/cluster/versions.sh && echo $$KUBE_VERSIONS')
OLDEST_KUBE_VERSION := $(firstword $(KUBE_VERSIONS))
# The contract suite: the cluster tests that hold on every supported minor,
# with or without the Unused condition (docs/compatibility.md): scan states
# and explain on the demo fleet, scan-mark-rescue-reap in one run, reap's
# preconditions and lost responses, guard, restore on real bytes, prune,
# supersession, issue 23's findings 2-5, issue 38's descent (TestDescent*),
# the preview with marks (TestMarksOnlyPreviewShowsWhatRunWouldDo),
# the randomized safety test and the short chaos profile, bad input and
# workload templates. The tests that simulate or pause the controller
# manager's condition run on v1.37 only.
CONTRACT_TESTS ?= ^(TestRandomizedSafety|TestChaos|TestBadInputExitsTwoAndWritesNothing|TestBehaviourWorkloadTemplatesMakeInUse|TestExplainEachStateOfTheDemoFleet|TestRunScansSnapshotsAndReaps|TestReapSettlesALostDeleteResponse|TestReapRetriesAfterFinalizerChurn|TestGuardPassesOnlyWhenNothingIsLost|TestRestoreRoundTrip|TestPruneCommand|TestBehaviourSupersededDiscardReapsWithDurableNewerClaim|TestRestoredClaimInUseDoesNotSupersede|TestRestoredOlderCopyIsNotNewerData|TestArchiveNeverShieldsItselfOverARescue|TestForeignDeleteSnapshotKeepsGateShut|TestRescueDeletedBeforeReapStopsTheReap|TestDescent.*|TestMarksOnlyPreviewShowsWhatRunWouldDo)$$

contract: control-plane ## the contract suite on one minor: make contract KUBE_VERSION=v1.35.4 (default: versions.sh's)
	@start=$$SECONDS; v="$${JANITOR_KUBE_VERSION:-}"; \
	JANITOR_KUBE_VERSION="$$v" bash scripts/cluster/build.sh kube && \
	JANITOR_KUBE_VERSION="$$v" $(GOTEST) $(INTEGRATION) -count=1 -timeout $(TEST_TIMEOUT) -run '$(CONTRACT_TESTS)' ./test/e2e/ && \
	echo "contract suite passed on Kubernetes $${v:-(default)} in $$((SECONDS - start)) s"

matrix: control-plane ## the contract suite and the node tests on every supported minor (KUBE_VERSIONS in scripts/cluster/versions.sh), with the wall time of each
	@for v in $(KUBE_VERSIONS); do $(MAKE) --no-print-directory contract KUBE_VERSION=$$v && \
		$(MAKE) --no-print-directory node-test KUBE_VERSION=$$v || exit 1; done

chaos: control-plane ## the long chaos profile (500 janitor runs under faults, kills and churn; CHAOS_FEATURE_GATES=… for other gates, CHAOS_ARGS=… for more flags); figures in docs/reliability.md
	CHAOS_FEATURE_GATES='$(CHAOS_FEATURE_GATES)' CHAOS_ARGS='$(CHAOS_ARGS)' bash scripts/chaos/run.sh 500

BENCH_FLAGS ?= --sizes 10000,50000 --reps 3 --snapshot-throughput 10000 --snapshot-pods 10000
bench: control-plane ## scan at N=10k,50k vs the serving floor + rescue and reap of 10,000 claims beside 10,000 pods vs their floors; writes docs/benchmarks.md (~75 min; 100k: BENCH_FLAGS='--sizes 10000,50000,100000 --snapshot-throughput 10000 --snapshot-pods 10000')
	go run $(INTEGRATION) ./scripts/bench $(BENCH_FLAGS)

tools: ## build the pinned helm, goreleaser and actionlint into the cache, apt-get install shellcheck if missing (cold: ~4 min)
	bash scripts/chart/build-helm.sh >/dev/null
	bash scripts/release/build-goreleaser.sh >/dev/null
	bash scripts/cluster/lint-tools.sh >/dev/null

chart-test: control-plane tools ## helm lint/template, server-side dry run, RBAC check and RBAC proof
	bash scripts/chart/test.sh

release-check: tools ## goreleaser check + snapshot build of this platform, its image checked, + kubectl janitor, + the README's install steps against a release built for its tag (no docker, nothing published)
	bash scripts/release/check.sh

image: ## the janitor's OCI image archive + SBOM under dist/, in pure Go (no Docker, nothing pulled); IMAGE_ARCH=arm64 for another
	bash scripts/image/build.sh $(if $(IMAGE_ARCH),--arch $(IMAGE_ARCH))

unit: ## every test that needs no cluster (the files without the integration tag), in seconds, through testsum (skips listed with their reasons)
	$(GOTEST) -count=1 ./...

# The model checker (internal/model, docs/testing.md#the-model-checker):
# make unit runs 10,000 histories; this runs MODEL_CHECKS histories,
# MODEL_SEED=N to repeat one. Every invariant counts in both.
MODEL_CHECKS ?= 1000000
model: ## the model checker: 1,000,000 random histories (MODEL_CHECKS) of one namespace against ground truth, every invariant (~4 min)
	go test -count=1 -timeout 0 -run '^TestModel$$' ./internal/model/ -rapid.checks=$(MODEL_CHECKS) $(if $(MODEL_SEED),-rapid.seed=$(MODEL_SEED))

# The cluster tests make race runs besides every unit test: the rescue, reap,
# lease and fleet scenarios, where the janitor's concurrent paths (workers,
# lease renewal, one session per cluster) run against a real API server, and
# one short scenario of the randomized safety test (its churn runs beside
# the janitor; the whole test runs in make test).
RACE_CLUSTER_TESTS ?= ^(TestSnapshotRescuesOrphanOnceAndRerunCreatesNothing|TestSnapshotWaitsForSlowDriverAndSurvivesTransientErrors|TestReap.*|TestLease.*|TestRunStopsWhenItsLeaseCannotBeRenewed|TestFleetTwoClusters|TestRandomizedSafety)$$
RACE_SAFETY_ENV := PVC_JANITOR_SAFETY_SCENARIOS=1 PVC_JANITOR_SAFETY_RUNS=3

race: control-plane ## the race detector (cgo on) over every unit test and the rescue, reap, lease and fleet cluster tests
	CGO_ENABLED=1 $(GOTEST) -race -count=1 ./...
	$(RACE_SAFETY_ENV) CGO_ENABLED=1 $(GOTEST) $(INTEGRATION) -race -count=1 -timeout $(TEST_TIMEOUT) -run '$(RACE_CLUSTER_TESTS)' ./test/e2e/

lint: ## repocheck (no tracked binaries, every relative link resolves), go vet (with and without the integration tag), gofmt and the pinned staticcheck (built into the cache on first use)
	go run ./scripts/lint/repocheck
	go vet ./...
	go vet $(INTEGRATION) ./...
	go vet -tags 'integration node' ./test/nodetest/ ./test/rotation/
	@out="$$(gofmt -l cmd internal scripts test)"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	"$$(bash scripts/lint/build-staticcheck.sh)" $(INTEGRATION) ./...
	"$$(bash scripts/lint/build-staticcheck.sh)" -tags 'integration node' ./test/nodetest/ ./test/rotation/

cluster-up: control-plane ## start the local cluster in the background (NODE=1 adds a node: docs/node.md; KUBE_VERSION=v1.35.4 for another minor, JANITOR_CLUSTER_FEATURE_GATES=… for --feature-gates); prints export KUBECONFIG=…
	@go run $(INTEGRATION) ./test/cmd/localcluster up

cluster-down: ## stop the local cluster's processes and remove its folder
	@go run $(INTEGRATION) ./test/cmd/localcluster down

DEMO_NS := pvc-janitor-demo
DEMO_FLAGS := --kubeconfig $(JANITOR_CLUSTER_DIR)/kubeconfig -n $(DEMO_NS) \
	-l app.kubernetes.io/part-of=demo-workspaces --workspace-label workspace --min-age 5s --grace-period 10s

# The demo's price table (per GiB-month): reports show what orphans cost.
DEMO_PRICES := --price csi-hostpath=0.10 --price '*=0.08' --snapshot-price 0.05
DEMO_EXPLAIN_FLAGS := --kubeconfig $(JANITOR_CLUSTER_DIR)/kubeconfig --workspace-label workspace --min-age 5s --grace-period 10s

# Short waits so the demo's broken and never-ready volumes fail in seconds.
DEMO_SNAP_FLAGS := --snapshot-timeout 15s --snapshot-error-grace 2s --snapshot-attempts 2

demo-seed: cluster-up ## (re)seed the demo fleet of ~20 workspace claims
	@go run $(INTEGRATION) ./test/cmd/localcluster seed-demo

demo: build demo-seed ## local cluster + demo fleet, then janitor scan, snapshot, reap, guard, explain and restore (the way back) on it; NODE=1 adds the chart's CronJob and real workspace pods on a node
	@echo; echo "$$ janitor scan $(DEMO_FLAGS) $(DEMO_PRICES)"
	@bin/janitor scan $(DEMO_FLAGS) $(DEMO_PRICES) --log-level warn
	@echo; echo "$$ janitor snapshot $(DEMO_FLAGS) $(DEMO_SNAP_FLAGS)"
	@bin/janitor snapshot $(DEMO_FLAGS) $(DEMO_SNAP_FLAGS) --log-level warn; echo "snapshot exit code: $$? (4: some rescues failed, as the demo's broken and slow volumes must)"
	@echo; echo "$$ janitor reap $(DEMO_FLAGS) $(DEMO_PRICES) --yes"
	@bin/janitor reap $(DEMO_FLAGS) $(DEMO_PRICES) --yes --log-level warn; echo "reap exit code: $$?"
	@echo; echo "$$ janitor guard $(DEMO_FLAGS)"
	@bin/janitor guard $(DEMO_FLAGS) --log-level warn -o table; echo "guard exit code: $$? (3: a teardown would lose data)"
	@echo; echo "$$ janitor explain $(DEMO_NS)/ws-alice-monday $(DEMO_EXPLAIN_FLAGS)"
	@bin/janitor explain $(DEMO_NS)/ws-alice-monday $(DEMO_EXPLAIN_FLAGS) --log-level warn
	@echo; echo "The way back: ws-olivia was reaped; its user's file comes back from the rescue."
	@echo "$$ janitor restore $(DEMO_NS)/ws-olivia --as ws-olivia-restored $(DEMO_EXPLAIN_FLAGS)"
	@bin/janitor restore $(DEMO_NS)/ws-olivia --as ws-olivia-restored $(DEMO_EXPLAIN_FLAGS) --log-level warn -o table
	@echo; echo "$$ cat notes.md   # in the restored volume (localcluster read-volume stands in for a pod)"
	@go run $(INTEGRATION) ./test/cmd/localcluster read-volume $(DEMO_NS) ws-olivia-restored notes.md
	@if [[ "$$JANITOR_CLUSTER_NODE" == 1 ]]; then bash scripts/cluster/node-demo.sh; fi
	@echo; echo "The cluster keeps running: export KUBECONFIG=$(JANITOR_CLUSTER_DIR)/kubeconfig; make cluster-down stops it."
