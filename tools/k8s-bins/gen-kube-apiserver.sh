#!/usr/bin/env bash
# Regenerate tools/k8s-bins/kube-apiserver/go.mod + go.sum for a Kubernetes release.
# usage: tools/k8s-bins/gen-kube-apiserver.sh 1.36.3
# Recipe: docs/test-control-plane.md section 2.3. Uses only the Go module proxy.
set -euo pipefail
V=$1; S="v0.${V#1.}"
D="$(cd "$(dirname "$0")" && pwd)/kube-apiserver"
cd "$D"
rm -f go.mod go.sum
go mod init example.invalid/k8sbins/kube-apiserver
KGOMOD=$(go mod download -json "k8s.io/kubernetes@v$V" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
go mod edit -go="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$KGOMOD")" -require="k8s.io/kubernetes@v$V"
for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/src/.*|\1|p' "$KGOMOD"); do
  go mod edit -replace="$m=$m@$S"
done
go mod tidy
