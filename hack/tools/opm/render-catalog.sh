#!/usr/bin/env bash
# Renders the File-Based Catalog of the middleware-operator package with opm:
#
#   <out>/middleware-operator/package.yaml         olm.package (default channel, icon)
#   <out>/middleware-operator/channel-<name>.yaml  olm.channel: one entry per bundle, with the
#                                                  `replaces` of its CSV (the upgrade edges)
#   <out>/middleware-operator/bundle-v<ver>.yaml   olm.bundle rendered by `opm render <dir>`
#
# Bundles are rendered from their directories, so their manifests are inlined as
# olm.bundle.object properties and the olm.bundle has no image: OLM installs them straight
# from the catalog, with no bundle image to pull and no unpack Job.
#
# usage: render-catalog.sh <out dir> <channel> <bundle dir>...   (oldest bundle first)
set -euo pipefail

root="$(cd "$(dirname "$0")/../../.." && pwd)"
opm="$root/bin/opm"
out=$1 channel=$2
shift 2
pkg=middleware-operator
dir="$out/$pkg"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$opm" init "$pkg" --default-channel="$channel" --icon="$root/config/manifests/icon.svg" -o yaml >"$tmp/package.yaml"
{
  echo "schema: olm.channel"
  echo "package: $pkg"
  echo "name: $channel"
  echo "entries:"
} >"$tmp/channel-$channel.yaml"
for b in "$@"; do
  csv=$(ls "$b"/manifests/*.clusterserviceversion.yaml)
  name=$(awk '/^metadata:/{m=1; next} m && /^  name: /{print $2; exit}' "$csv")
  replaces=$(awk '/^spec:/{s=1; next} s && /^  replaces: /{print $2; exit}' "$csv")
  version=${name#"$pkg".v}
  echo "- name: $name" >>"$tmp/channel-$channel.yaml"
  if [ -n "$replaces" ]; then echo "  replaces: $replaces" >>"$tmp/channel-$channel.yaml"; fi
  "$opm" render "$b" -o yaml >"$tmp/bundle-v$version.yaml"
done
rm -rf "$dir"
mkdir -p "$out"
mv "$tmp" "$dir"
chmod 755 "$dir"
trap - EXIT
