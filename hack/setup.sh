#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need: patch (hack/tools/build.sh
# patches a tool dependency), redis-server and redis-tools (they stand in for Redis pods),
# nftables (tests/netcut stages network partitions between those pods with nft).
# Idempotent: does nothing when they are already there.
set -euo pipefail
missing=()
command -v patch >/dev/null 2>&1 || missing+=(patch)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing ${missing[*]} with apt-get" >&2
apt_failed() {
  echo "hack/setup.sh: apt-get could not $1 (${missing[*]})." >&2
  echo "  Run 'make setup' as root or with a sudo that works, check that the machine reaches its Debian mirror" >&2
  echo "  (apt-get update), or install these packages yourself: the build and the tests need them." >&2
  exit 1
}
$SUDO apt-get update -qq || apt_failed "update its package lists"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || apt_failed "install"
# The tests start their own servers; the packaged service is not needed.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
  $SUDO systemctl stop redis-server || true
fi
