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

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build every pinned tool (Kubernetes, etcd, kwok, controller-gen, kustomize, golangci-lint) into the cache and link them into bin/.
	@hack/tools/build.sh

.PHONY: setup
setup: ## Install the Debian packages the tests need (redis-server, redis-tools).
	@hack/setup.sh

.PHONY: manifests
manifests: tools ## Generate the CRDs and the RBAC role from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: tools ## Generate the DeepCopy methods.
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

.PHONY: test
test: tools setup verify-generated vet lint ## Build the tools, then run unit, integration and e2e tests against the local cluster.
	go test ./... -count=1 -timeout 80m

.PHONY: bench
bench: tools setup ## Run the benchmarks.
	go test ./... -run '^$$' -bench . -benchmem -timeout 60m

##@ Build

.PHONY: build
build: manifests generate ## Build the operator binary.
	go build -o $(BIN)/manager .

.PHONY: run
run: tools manifests ## Run the operator against the configured cluster, or start the local cluster first when none is reachable.
	@hack/run.sh

.PHONY: cluster
cluster: tools ## Run the local cluster in the foreground and print the KUBECONFIG line.
	go run ./hack/localcluster $(CLUSTER_ARGS)

.PHONY: docker-build
docker-build: ## Build the operator image.
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster in KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests ## Remove the CRDs from the cluster in KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests ## Deploy the operator to the cluster in KUBECONFIG.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the operator from the cluster in KUBECONFIG.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -
