# middleware-operator: targets as an Operator SDK (go/v4) project has them, plus tools and cluster.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= quay.io/middleware-operator/middleware-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
CONTAINER_TOOL ?= docker
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
# Tests find the control-plane binaries here.
export MWO_BIN_DIR := $(BIN)

CONTROLLER_GEN := $(BIN)/controller-gen
KUSTOMIZE := $(BIN)/kustomize
GOLANGCI_LINT := $(BIN)/golangci-lint
KUBECTL := $(BIN)/kubectl
OPERATOR_SDK := $(BIN)/operator-sdk
OPM := $(BIN)/opm

# OLM packaging, as the Operator SDK's Makefile has it. The bundle is in the channel stable,
# which is also the package's default channel.
CHANNELS ?= stable
DEFAULT_CHANNEL ?= stable
BUNDLE_CHANNELS := --channels=$(CHANNELS)
BUNDLE_DEFAULT_CHANNEL := --default-channel=$(DEFAULT_CHANNEL)
BUNDLE_METADATA_OPTS ?= $(BUNDLE_CHANNELS) $(BUNDLE_DEFAULT_CHANNEL)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
BUNDLE_GEN_FLAGS ?= -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS)
USE_IMAGE_DIGESTS ?= false
ifeq ($(USE_IMAGE_DIGESTS), true)
	BUNDLE_GEN_FLAGS += --use-image-digests
endif
# The CSV's createdAt annotation: the release date of VERSION, so `make bundle` writes the
# same bytes every time (operator-sdk would stamp the current time).
BUNDLE_CREATED_AT ?= 2026-11-22T00:00:00Z
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: setup ## Build every pinned tool (Kubernetes, etcd, kwok, the versitygw object store, controller-gen, kustomize, golangci-lint, promtool, operator-sdk, opm, OLM, imagetar, grpc_health_probe, cert-manager's controllers) into the cache and link them into bin/.
	@hack/tools/build.sh

# RUN_TOOLS are the tools `make run` and `make cluster` need: the local cluster with its object
# store, kubectl, and what renders the CRDs. The OLM tools and the linters are left for `make tools`.
RUN_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok versitygw controller-gen kustomize

.PHONY: run-tools
run-tools: setup ## Build only the tools make run and make cluster need.
	@hack/tools/build.sh $(RUN_TOOLS)

.PHONY: controller-gen-tool
controller-gen-tool: setup
	@hack/tools/build.sh controller-gen

.PHONY: setup
setup: ## Install the Debian packages the build and tests need (patch, redis-server, redis-tools).
	@hack/setup.sh

.PHONY: manifests
manifests: controller-gen-tool ## Generate the CRDs and the RBAC role from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="{./api/...,./controllers/...,./internal/...}" output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen-tool ## Generate the DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: tools ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify-generated
verify-generated: manifests generate ## Fail when generated files are out of date with the sources.
	@git diff --exit-code -- api config || { echo "generated files are out of date: run 'make manifests generate' and commit"; exit 1; }

.PHONY: verify-bundle
verify-bundle: bundle catalog ## Fail when bundle/ or catalog/ is out of date with config/ and the API markers.
	@test -z "$$(git status --porcelain -- bundle bundle.Dockerfile catalog config/manifests config/manager)" || { git status --short -- bundle bundle.Dockerfile catalog config/manifests config/manager; git diff --stat -- bundle catalog config; echo "bundle/ or catalog/ is out of date: run 'make bundle catalog' and commit"; exit 1; }

# HEAVY_SUITE runs alone before every other package: its tests run six at a time, each on
# real Redis processes, and beside three other packages' clusters on 2 cores its slot moves,
# restores and rotations timed out (docs/development/README.md#make-test).
HEAVY_SUITE := ./controllers/redis

.PHONY: test
test: tools setup verify-generated verify-bundle vet lint fuzz ## Build the tools, then run unit, integration and e2e tests against the local cluster, after a short fuzz run.
	@status=0; go test $(HEAVY_SUITE) -count=1 -timeout 40m || status=1; \
	go test $$(go list ./... | grep -v '/controllers/redis$$') -p 3 -count=1 -timeout 60m || status=1; \
	exit $$status

.PHONY: test-unit
test-unit: ## Unit tests only, no local cluster: the API, internal packages (some start redis-server processes) and the controllers' white-box tests (go test -short skips their cluster tests and does not start one).
	go test -short ./api/... ./internal/... ./controllers/... -count=1

# FUZZTIME is how long `make fuzz` fuzzes each target (go test -fuzz takes one at a time).
FUZZTIME ?= 15s

.PHONY: fuzz
fuzz: ## Fuzz the RDB reader (rdbload.FuzzReader) and the replication-stream reader (rdbstream.FuzzFetch) for FUZZTIME each (15s), from their seed corpora in testdata/fuzz; a failing input is written there.
	go test ./internal/rdbload -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME)
	go test ./internal/rdbstream -run '^$$' -fuzz '^FuzzFetch$$' -fuzztime $(FUZZTIME)

.PHONY: bench
bench: tools setup ## Run the benchmarks: slot migration against redis-cli (MWO_BENCH_KEYS=1000000 for the issue's size), RedisCluster backup and restore against redis-cli --rdb and --pipe (MWO_BENCH_BACKUP_KEYS=1000000), RDB restore (rdbload.Load) alone against redis-cli --pipe (MWO_BENCH_RDB_LOAD_KEYS=100000,1000000) and into 3 shards side by side (MWO_BENCH_RDB_SHARD_KEYS=1000000), AppServices at scale against a client-go floor (MWO_BENCH_N=1000,5000; MWO_BENCH_STEADY=2m), every RedisCluster step kind's longest time under a writer (MWO_BENCH_STEP_KEYS), RedisClusters created at once until Ready against as many plain StatefulSets of the same pods (BenchmarkCreateRedisClusters: MWO_BENCH_CREATE=20, MWO_BENCH_CREATE_NODES=3; the issue's 100, and 6), idle RedisClusters' operator CPU and memory and a frozen master's detection (BenchmarkIdleRedisClusters: MWO_BENCH_IDLE=20,50, MWO_BENCH_IDLE_NODES=6; the issue's 100 with 3), a new RedisCluster's forming seen from outside, stage by stage (BenchmarkFormingTimeline: MWO_BENCH_FORM_RUNS=3; MWO_BENCH_FORM_LOGS=1 adds the nodes' state changes).
	go test ./internal/... ./tests/bench/ -run '^$$' -bench . -benchtime 1x -benchmem -timeout 120m

##@ Build

.PHONY: build
build: manifests generate plugin ## Build the operator binary and the kubectl plugin.
	go build -o $(BIN)/manager .

.PHONY: plugin
plugin: ## Build the kubectl plugin bin/kubectl-middleware (copy it onto PATH: kubectl middleware status|backup|restore|report).
	go build -o $(BIN)/kubectl-middleware ./cmd/kubectl-middleware

.PHONY: run
run: run-tools manifests ## Run the operator against the configured cluster, or start the local cluster first when none is reachable.
	@hack/run.sh

.PHONY: cluster
cluster: run-tools ## Run the local cluster in the foreground and print the KUBECONFIG line.
	go run ./hack/localcluster $(CLUSTER_ARGS)

.PHONY: docker-build
docker-build: ## Build the operator image.
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

.PHONY: install
install: run-tools manifests ## Install the CRDs into the cluster in KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: run-tools manifests ## Remove the CRDs from the cluster in KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy-tools
deploy-tools: setup
	@hack/tools/build.sh kustomize kubectl

# deploy renders DEPLOY_CONFIG with IMG in a temporary copy of config/, so the working tree
# keeps the image the bundle names (make verify-bundle checks config/manager), and applies it
# with the admission guard on the operator's token (config/guard). The default is the
# operator confined to its own namespace; DEPLOY_CONFIG=config/default watches and may write
# in every namespace (docs/installation.md).
DEPLOY_CONFIG ?= config/overlays/namespaced

.PHONY: deploy
deploy: deploy-tools manifests ## Deploy the operator with image IMG to the cluster in KUBECONFIG, confined to its namespace (DEPLOY_CONFIG=config/default: cluster-wide), with the admission guard of config/guard (config/ is left unchanged).
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp -R config "$$tmp/" && \
	  (cd "$$tmp/config/manager" && $(KUSTOMIZE) edit set image controller=$(IMG)) && \
	  $(KUSTOMIZE) build "$$tmp/$(DEPLOY_CONFIG)" > "$$tmp/deploy.yaml" && \
	  echo --- >> "$$tmp/deploy.yaml" && $(KUSTOMIZE) build "$$tmp/config/guard" >> "$$tmp/deploy.yaml" && \
	  $(KUBECTL) apply --server-side -f "$$tmp/deploy.yaml"

# RELEASE_CONFIG is what dist/install.yaml installs: config/default, the operator watching
# every namespace (config/overlays/namespaced: confined to its own). DIST is where the files go.
RELEASE_CONFIG ?= config/default
DIST ?= dist

# release-manifests renders like deploy, in a temporary copy of config/, without applying.
# The admission guard is a file of its own: it is one per cluster whatever the install mode
# (OLM, this file, several installs) and a ValidatingAdmissionPolicy that Kubernetes 1.29, which
# the operator supports, does not serve as admissionregistration.k8s.io/v1.
.PHONY: release-manifests
release-manifests: deploy-tools manifests ## Write DIST/install.yaml (namespace, CRDs, RBAC, the operator Deployment with image IMG, its metrics Service; RELEASE_CONFIG=config/default) and DIST/guard.yaml (the admission guard), for kubectl apply -f.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp -R config "$$tmp/" && \
	  (cd "$$tmp/config/manager" && $(KUSTOMIZE) edit set image controller=$(IMG)) && \
	  mkdir -p $(DIST) && \
	  { echo "# middleware-operator $(VERSION), image $(IMG): kubectl apply --server-side -f install.yaml (from $(RELEASE_CONFIG))"; \
	    $(KUSTOMIZE) build "$$tmp/$(RELEASE_CONFIG)"; } > $(DIST)/install.yaml && \
	  { echo "# The admission guard on the operator's token (config/guard/guard.yaml): kubectl apply --server-side -f guard.yaml"; \
	    $(KUSTOMIZE) build "$$tmp/config/guard"; } > $(DIST)/guard.yaml && \
	  echo "wrote $(DIST)/install.yaml and $(DIST)/guard.yaml for $(IMG)"

.PHONY: undeploy
undeploy: deploy-tools ## Remove the operator, its RBAC, the admission guard and the CRDs (with every resource of them) from the cluster in KUBECONFIG.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(KUSTOMIZE) build $(DEPLOY_CONFIG) > "$$tmp/deploy.yaml" && \
	  echo --- >> "$$tmp/deploy.yaml" && $(KUSTOMIZE) build config/guard >> "$$tmp/deploy.yaml" && \
	  $(KUBECTL) delete --ignore-not-found -f "$$tmp/deploy.yaml"

##@ OLM (bundle, scorecard, catalog)

.PHONY: bundle
bundle: manifests ## Generate bundle/ (CSV, CRDs, RBAC, metrics Service, metadata, scorecard config) from config/ and the API markers, then validate it.
	hack/tools/operator-sdk/generate-kustomize-manifests.sh
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	sed -i 's|^\(    containerImage: \).*|\1$(IMG)|' config/manifests/bases/middleware-operator.clusterserviceversion.yaml
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle $(BUNDLE_GEN_FLAGS)
	sed -i 's|^\(    createdAt: \).*|\1"$(BUNDLE_CREATED_AT)"|' bundle/manifests/middleware-operator.clusterserviceversion.yaml
	$(OPERATOR_SDK) bundle validate ./bundle

.PHONY: bundle-validate
bundle-validate: tools ## Validate bundle/ with the operatorframework suite (OperatorHub, good practices, deprecated APIs).
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

.PHONY: scorecard
scorecard: tools ## Run the bundle's scorecard tests (basic and OLM) with the scorecard-test program, no cluster or image needed.
	$(BIN)/scorecard -o text ./bundle

.PHONY: bundle-build
bundle-build: ## Build the bundle image.
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(MAKE) docker-push IMG=$(BUNDLE_IMG)

# The bundles of the stable channel, oldest first: the released ones kept in bundle-history/
# (see its README) and the current one.
CATALOG_BUNDLES ?= bundle-history/0.0.9 bundle

.PHONY: catalog
catalog: tools ## Render catalog/ (File-Based Catalog: package, stable channel with its upgrade edges, bundles inlined by opm render) and validate it with opm.
	hack/tools/opm/render-catalog.sh catalog $(DEFAULT_CHANNEL) $(CATALOG_BUNDLES)
	$(OPM) validate catalog

.PHONY: catalog-build
catalog-build: ## Build the catalog image (opm serving catalog/).
	$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image.
	$(MAKE) docker-push IMG=$(CATALOG_IMG)

##@ Images without a container engine

# The three images as image tarballs (the `docker save` format), built by imagetar
# (hack/tools/images, on go-containerregistry) from the same Dockerfiles, each base image
# replaced by a stand-in built from scratch: docs/development/images.md says what differs.
# `make images` writes operator.tar, bundle.tar and catalog.tar, tagged IMG, BUNDLE_IMG and
# CATALOG_IMG, for `kind load image-archive`, `crane push` or `skopeo copy docker-archive:`.
IMAGES_DIR ?= $(BIN)/images
IMAGE_ARCH ?= $(shell go env GOARCH)
IMAGETAR := $(BIN)/imagetar

.PHONY: images-tools
images-tools: ## Build only the tools make images needs (imagetar, opm, grpc_health_probe).
	@hack/tools/build.sh imagetar opm grpc_health_probe

.PHONY: images
images: image-tar bundle-image-tar catalog-image-tar ## Build the operator, bundle and catalog images as tarballs under IMAGES_DIR (bin/images/), no container engine needed.

# The manager as Dockerfile's builder stage builds it; -buildvcs=false because that stage has
# no .git to stamp from.
.PHONY: image-tar
image-tar: images-tools ## Build the operator image (Dockerfile) as IMAGES_DIR/operator.tar, tagged IMG (IMAGE_ARCH=arm64 for another architecture).
	@mkdir -p $(IMAGES_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -buildvcs=false -ldflags="-s -w" -o $(IMAGES_DIR)/manager .
	$(IMAGETAR) build -dockerfile Dockerfile -platform linux/$(IMAGE_ARCH) -tag $(IMG) \
	  -from builder:/workspace/manager=$(IMAGES_DIR)/manager -out $(IMAGES_DIR)/operator.tar

.PHONY: bundle-image-tar
bundle-image-tar: images-tools ## Build the bundle image (bundle.Dockerfile, its labels included) as IMAGES_DIR/bundle.tar, tagged BUNDLE_IMG.
	$(IMAGETAR) build -dockerfile bundle.Dockerfile -platform linux/$(IMAGE_ARCH) -tag $(BUNDLE_IMG) -out $(IMAGES_DIR)/bundle.tar

# catalog.Dockerfile's builder stage runs `opm serve /configs --cache-dir=/tmp/cache
# --cache-only`: here the project's opm does it on catalog/ (the cache does not depend on
# where the catalog is), without its profiling endpoint and termination log.
.PHONY: catalog-image-tar
catalog-image-tar: images-tools ## Build the catalog image (catalog.Dockerfile: opm serving catalog/, its cache pre-built) as IMAGES_DIR/catalog.tar, tagged CATALOG_IMG.
	@test "$(IMAGE_ARCH)" = "$$(go env GOARCH)" || { echo "catalog-image-tar: opm and grpc_health_probe are built for $$(go env GOARCH) only, not IMAGE_ARCH=$(IMAGE_ARCH)"; exit 1; }
	@rm -rf $(IMAGES_DIR)/catalog-cache && mkdir -p $(IMAGES_DIR)
	$(OPM) serve catalog --cache-dir=$(IMAGES_DIR)/catalog-cache --cache-only --pprof-addr= -t /dev/null
	$(IMAGETAR) build -dockerfile catalog.Dockerfile -platform linux/$(IMAGE_ARCH) -tag $(CATALOG_IMG) \
	  -base-file /bin/opm=$(OPM) -base-file /bin/grpc_health_probe=$(BIN)/grpc_health_probe \
	  -from builder:/configs=catalog -from builder:/tmp/cache=$(IMAGES_DIR)/catalog-cache \
	  -out $(IMAGES_DIR)/catalog.tar
