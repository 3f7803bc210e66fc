#!/usr/bin/env bash
# Runs `operator-sdk generate kustomize manifests`, which writes the spec and status
# descriptors of the API markers (+operator-sdk:csv:customresourcedefinitions) into the CSV
# base config/manifests/bases/middleware-operator.clusterserviceversion.yaml.
#
# Operator SDK v1.33.0 (the newest the module proxy serves) parses the API packages with
# controller-tools v0.12, whose +kubebuilder:validation:XValidation marker predates the
# fieldPath and reason arguments (controller-tools v0.16), so it fails on our APIs with
# "unknown argument fieldPath". Those arguments only shape CRD validation errors, which
# controller-gen writes; operator-sdk reads the CRDs from config/crd and takes only the
# descriptors from the Go types. So operator-sdk reads a copy of api/ in a scratch module
# with those two arguments removed; everything else (types, docs, markers) is the same.
set -euo pipefail

root="$(cd "$(dirname "$0")/../../.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

cp "$root/go.mod" "$root/go.sum" "$root/PROJECT" "$scratch/"
cp -r "$root/api" "$scratch/api"
find "$scratch/api" -name '*.go' -exec sed -i -E \
  '/\+kubebuilder:validation:XValidation/ s/,(fieldPath="[^"]*"|reason=[A-Za-z]+)//g' {} +
mkdir -p "$scratch/config"
ln -s "$root/config/manifests" "$scratch/config/manifests"
cd "$scratch"
"$root/bin/operator-sdk" generate kustomize manifests -q --apis-dir api "$@"
