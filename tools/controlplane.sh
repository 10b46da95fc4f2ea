#!/usr/bin/env bash
# gkq test control plane: etcd + kube-apiserver + Kueue manager as plain processes on 127.0.0.1.
#
#   tools/controlplane.sh build        build/cache etcd, kube-apiserver and the Kueue manager
#   tools/controlplane.sh up [DIR]     start a control plane in DIR (default: $GKQ_CP_DIR or a new
#                                      temp dir); prints DIR on stdout when ready
#   tools/controlplane.sh down DIR     stop the processes recorded in DIR/pids and remove DIR
#   tools/controlplane.sh env DIR      print `export KUBECONFIG=...` lines (eval "$(... env DIR)")
#   tools/controlplane.sh restart-apiserver DIR
#                                      stop kube-apiserver (if running) and start it again
#   tools/controlplane.sh versions     print the pinned versions and binary paths
#
# Recipe and background: docs/test-control-plane.md. Every listener binds 127.0.0.1 only.
#
# Environment:
#   GKQ_BIN_CACHE      binary cache (default $HOME/.cache/gkq/k8s-bins)
#   GKQ_FIXTURES_DIR   upstream CRDs and Kueue webhooks (default: tests/fixtures/upstream)
#   GKQ_CP_DIR         default run directory for `up`
#   GKQ_CP_WATCH_PID   `up` starts a watchdog that runs `down` once this PID has exited
#   GKQ_CP_TIMEOUT     readiness timeout per component in seconds (default 90)
#   GKQ_CP_AUDIT       if set, `up` writes an audit log of every request to DIR/logs/audit.log
#   GKQ_CP_NO_JOBSET   if set, `up` installs no JobSet CRD (a cluster JobSet was never installed
#                      in; Kueue still lists JobSet in its frameworks and sets up its JobSet
#                      controller once the CRD is served)
set -euo pipefail

SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
TOOLS="$(dirname "$SCRIPT")"
REPO="$(dirname "$TOOLS")"
BINS_SRC="$TOOLS/k8s-bins"
BIN_CACHE="${GKQ_BIN_CACHE:-$HOME/.cache/gkq/k8s-bins}"
FIXTURES="${GKQ_FIXTURES_DIR:-$REPO/tests/fixtures/upstream}"
TIMEOUT="${GKQ_CP_TIMEOUT:-90}"

log() { printf '[controlplane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- pinned versions: read from our own committed go.mod files ------------------------------
mod_version() { # go.mod module-path
	sed -n "s|^[[:space:]]*$2 \(v[^[:space:]]*\).*|\1|p" "$1" | head -n1
}
K8S_VERSION="$(mod_version "$BINS_SRC/kube-apiserver/go.mod" k8s.io/kubernetes)"
KUEUE_VERSION="$(mod_version "$BINS_SRC/kueue/go.mod" sigs.k8s.io/kueue)"
ETCD_VERSION="$(mod_version "$BINS_SRC/etcd/go.mod" go.etcd.io/etcd/server/v3)"
[ -n "$K8S_VERSION" ] || die "cannot read k8s.io/kubernetes version from $BINS_SRC/kube-apiserver/go.mod"
[ -n "$KUEUE_VERSION" ] || die "cannot read sigs.k8s.io/kueue version from $BINS_SRC/kueue/go.mod"
[ -n "$ETCD_VERSION" ] || die "cannot read go.etcd.io/etcd/server/v3 version from $BINS_SRC/etcd/go.mod"
APISERVER_BIN="$BIN_CACHE/$K8S_VERSION/kube-apiserver"
KUEUE_BIN="$BIN_CACHE/kueue-$KUEUE_VERSION/kueue"
ETCD_BIN="$BIN_CACHE/etcd-$ETCD_VERSION/etcd"

ensure_go() {
	if ! command -v go >/dev/null 2>&1; then
		[ -x /usr/local/go/bin/go ] || die "no Go toolchain (go) on PATH"
		PATH="/usr/local/go/bin:$PATH"
	fi
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Origin commit of a module version as the Go proxy reports it (empty if unknown).
origin_hash() {
	go mod download -json "$1" 2>/dev/null | sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -n1
}

build_apiserver() {
	[ -x "$APISERVER_BIN" ] && { log "kube-apiserver $K8S_VERSION cached: $APISERVER_BIN"; return 0; }
	ensure_go
	local v=${K8S_VERSION#v} minor ld p start
	minor=$(echo "$v" | cut -d. -f2)
	ld="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	mkdir -p "$(dirname "$APISERVER_BIN")"
	log "building kube-apiserver $K8S_VERSION (5-10 min on 2 cores)"
	start=$(date +%s)
	(cd "$BINS_SRC/kube-apiserver" &&
		CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ld" -o "$APISERVER_BIN.tmp.$$" .)
	mv -f "$APISERVER_BIN.tmp.$$" "$APISERVER_BIN"
	log "kube-apiserver built in $(($(date +%s) - start)) s: $("$APISERVER_BIN" --version)"
}

build_kueue() {
	[ -x "$KUEUE_BIN" ] && { log "kueue $KUEUE_VERSION cached: $KUEUE_BIN"; return 0; }
	ensure_go
	local commit ld start
	mkdir -p "$(dirname "$KUEUE_BIN")"
	commit=$(cd "$BINS_SRC/kueue" && origin_hash "sigs.k8s.io/kueue@$KUEUE_VERSION")
	ld="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.GitCommit=${commit:-unknown}"
	log "building kueue $KUEUE_VERSION (4-7 min on 2 cores)"
	start=$(date +%s)
	(cd "$BINS_SRC/kueue" &&
		CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ld" -o "$KUEUE_BIN.tmp.$$" sigs.k8s.io/kueue/cmd/kueue)
	mv -f "$KUEUE_BIN.tmp.$$" "$KUEUE_BIN"
	log "kueue built in $(($(date +%s) - start)) s"
}

# etcd from the Go module proxy, not Debian's 3.4.23: a 1.36 API server serves consistent lists
# from its watch cache only with etcd >= 3.4.31 or >= 3.5.13 (as GKE's control planes do), and
# reads every list from etcd otherwise (docs/test-control-plane.md, section 3).
build_etcd() {
	[ -x "$ETCD_BIN" ] && { log "etcd $ETCD_VERSION cached: $ETCD_BIN"; return 0; }
	ensure_go
	local start
	mkdir -p "$(dirname "$ETCD_BIN")"
	log "building etcd $ETCD_VERSION (1-2 min on 2 cores)"
	start=$(date +%s)
	(cd "$BINS_SRC/etcd" &&
		CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$ETCD_BIN.tmp.$$" go.etcd.io/etcd/server/v3)
	mv -f "$ETCD_BIN.tmp.$$" "$ETCD_BIN"
	log "etcd built in $(($(date +%s) - start)) s: $("$ETCD_BIN" --version | head -n1)"
}

cmd_build() {
	local start; start=$(date +%s)
	mkdir -p "$BIN_CACHE"
	# one builder at a time per cache
	exec 9>"$BIN_CACHE/.build.lock"
	flock 9
	build_etcd
	build_apiserver
	build_kueue
	command -v kubectl >/dev/null 2>&1 || die "kubectl not found (the machine image ships /usr/bin/kubectl)"
	command -v openssl >/dev/null 2>&1 || die "openssl not found"
	command -v curl >/dev/null 2>&1 || die "curl not found"
	command -v python3 >/dev/null 2>&1 || die "python3 not found"
	log "control-plane dependencies ready in $(($(date +%s) - start)) s"
}

cmd_versions() {
	echo "kubernetes $K8S_VERSION $APISERVER_BIN"
	echo "kueue $KUEUE_VERSION $KUEUE_BIN"
	echo "etcd $ETCD_VERSION $ETCD_BIN"
}

# --- up ------------------------------------------------------------------------------------

free_ports() { # N -> N distinct free ports on 127.0.0.1
	python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# starttime (field 22 of /proc/PID/stat) guards `down` against PID reuse
proc_start() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

record_pid() { # name pid
	echo "$1 $2 $(proc_start "$2")" >>"$RUN/pids"
}

start_bg() { # name cmd... ; own session, no inherited stdio
	local name=$1; shift
	setsid "$@" </dev/null >>"$RUN/logs/$name.log" 2>&1 &
	local pid=$!
	# If `down` already removed RUN (the watchdog saw the owner die mid-`up`), nobody else
	# would ever stop this process.
	record_pid "$name" "$pid" 2>/dev/null || { kill -KILL "$pid" 2>/dev/null; die "$RUN vanished during up"; }
}

wait_for() { # description command...
	local what=$1 deadline=$((SECONDS + TIMEOUT)); shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { log "timed out after ${TIMEOUT}s waiting for $what"; return 1; }
		sleep 0.2
	done
}

alive() { # name
	local pid; pid=$(awk -v n="$1" '$1 == n {print $2}' "$RUN/pids" | tail -n1)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

wait_proc() { # name description command...  (fails fast when the process died)
	local name=$1 what=$2 deadline=$((SECONDS + TIMEOUT)); shift 2
	until "$@" >/dev/null 2>&1; do
		alive "$name" || { log "$name exited while waiting for $what"; return 1; }
		[ $SECONDS -lt $deadline ] || { log "timed out after ${TIMEOUT}s waiting for $what"; return 1; }
		sleep 0.2
	done
}

on_up_failure() {
	local rc=$?
	[ $rc -eq 0 ] && return 0
	log "control plane failed to start (exit $rc); last log lines:"
	for f in "$RUN"/logs/*.log; do
		[ -f "$f" ] || continue
		echo "----- $f" >&2
		tail -n 25 "$f" >&2
	done
	log "stopping what was started; logs kept in $RUN/logs"
	stop_processes "$RUN"
	exit $rc
}

mk_cert() { # name CN  -> $PKI/name.{key,crt}, server cert for 127.0.0.1/localhost signed by the test CA
	openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "/CN=$2" 2>/dev/null
	openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-out "$PKI/$1.crt" -days 3650 -extfile "$PKI/san.ext" 2>/dev/null
}

kc() { kubectl --kubeconfig "$RUN/kubeconfig" --request-timeout=30s "$@"; }

# The webhooks are live once the mutating one adds its finalizer to a (dry-run) ResourceFlavor.
probe_webhooks() {
	printf '%s\n' 'apiVersion: kueue.x-k8s.io/v1beta2' 'kind: ResourceFlavor' 'metadata: {name: gkq-webhook-probe}' |
		kc create --dry-run=server -o 'jsonpath={.metadata.finalizers}' -f - | grep -q resource-in-use
}

cmd_up() {
	RUN="${1:-${GKQ_CP_DIR:-}}"
	[ -x "$APISERVER_BIN" ] && [ -x "$KUEUE_BIN" ] && [ -x "$ETCD_BIN" ] ||
		die "control-plane binaries missing (want $APISERVER_BIN, $KUEUE_BIN and $ETCD_BIN); run: tools/controlplane.sh build"
	local crds="$FIXTURES/crds" webhooks="$FIXTURES/kueue-release/webhooks-$KUEUE_VERSION.yaml"
	[ -d "$crds/kueue" ] || die "CRD fixtures not found at $crds (set GKQ_FIXTURES_DIR)"
	[ -f "$webhooks" ] || die "Kueue webhook manifest not found: $webhooks"
	[ -n "$RUN" ] || RUN=$(mktemp -d "${TMPDIR:-/tmp}/gkq-cp.XXXXXX")
	mkdir -p "$RUN"
	RUN="$(cd "$RUN" && pwd)"
	[ ! -e "$RUN/pids" ] || die "$RUN already holds a control plane (pids file exists); use another dir or run down"

	local t0=$SECONDS
	mkdir -p "$RUN/logs" "$RUN/pki" "$RUN/kueue-certs"
	: >"$RUN/pids"
	trap on_up_failure EXIT

	if [ -n "${GKQ_CP_WATCH_PID:-}" ]; then
		# Tear down once the owner (e.g. a cargo test binary) exits, however it exits.
		# shellcheck disable=SC2016 # expanded by the inner bash
		setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" down "$3"' \
			gkq-cp-watchdog "$GKQ_CP_WATCH_PID" "$SCRIPT" "$RUN" </dev/null >>"$RUN/logs/watchdog.log" 2>&1 &
		record_pid watchdog $!
	fi

	local ports EP EP2 KP WP HP
	ports=$(free_ports 5)
	read -r EP EP2 KP WP HP <<<"$ports"
	echo "etcd=$EP etcd-peer=$EP2 apiserver=$KP kueue-webhook=$WP kueue-health=$HP" >"$RUN/ports"

	# --- throwaway PKI
	PKI="$RUN/pki"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
		-subj "/CN=gkq-test-ca" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$PKI/san.ext"
	mk_cert apiserver kube-apiserver
	mk_cert kueue-webhook kueue-webhook
	cp "$PKI/kueue-webhook.crt" "$RUN/kueue-certs/tls.crt"
	cp "$PKI/kueue-webhook.key" "$RUN/kueue-certs/tls.key"
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	local token; token="gkq-$(openssl rand -hex 16)"
	echo "$token,gkq-test-admin,gkq-test-admin-uid,\"system:masters\"" >"$PKI/tokens.csv"

	# Kueue (with internalCertManagement off) insists on a metrics key pair at this fixed path,
	# even with the metrics server disabled. Any pair will do; install one if none is there.
	if [ ! -s /etc/kueue/metrics/certs/tls.crt ] || [ ! -s /etc/kueue/metrics/certs/tls.key ]; then
		as_root mkdir -p /etc/kueue/metrics/certs
		as_root cp "$PKI/kueue-webhook.key" "/etc/kueue/metrics/certs/.tls.key.$$"
		as_root cp "$PKI/kueue-webhook.crt" "/etc/kueue/metrics/certs/.tls.crt.$$"
		as_root mv -f "/etc/kueue/metrics/certs/.tls.key.$$" /etc/kueue/metrics/certs/tls.key
		as_root mv -f "/etc/kueue/metrics/certs/.tls.crt.$$" /etc/kueue/metrics/certs/tls.crt
	fi

	# --- etcd (data on tmpfs when available, and no fsync: a test's etcd outlives nothing)
	local etcd_data="$RUN/etcd"
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then
		etcd_data=$(mktemp -d /dev/shm/gkq-etcd.XXXXXX)
		echo "$etcd_data" >"$RUN/etcd-data-dir"
	fi
	start_bg etcd "$ETCD_BIN" --name gkq-test --data-dir "$etcd_data" \
		--listen-client-urls "http://127.0.0.1:$EP" --advertise-client-urls "http://127.0.0.1:$EP" \
		--listen-peer-urls "http://127.0.0.1:$EP2" --initial-advertise-peer-urls "http://127.0.0.1:$EP2" \
		--initial-cluster "gkq-test=http://127.0.0.1:$EP2" --unsafe-no-fsync
	wait_proc etcd "etcd /health" curl -sf "http://127.0.0.1:$EP/health"
	log "etcd ready on 127.0.0.1:$EP ($((SECONDS - t0)) s)"

	# --- kube-apiserver
	if [ -n "${GKQ_CP_AUDIT:-}" ]; then
		# every request, metadata only (verb, resource, user agent, dryRun in requestURI)
		printf '%s\n' 'apiVersion: audit.k8s.io/v1' 'kind: Policy' 'omitStages: [RequestReceived]' \
			'rules:' '- level: Metadata' >"$RUN/audit-policy.yaml"
	fi
	start_apiserver
	cat >"$RUN/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gkq-test
  cluster:
    server: https://127.0.0.1:$KP
    certificate-authority: $PKI/ca.crt
users:
- name: gkq-test-admin
  user:
    token: $token
contexts:
- name: gkq-test
  context: {cluster: gkq-test, user: gkq-test-admin, namespace: default}
current-context: gkq-test
EOF
	chmod 600 "$RUN/kubeconfig"
	wait_proc kube-apiserver "kube-apiserver /readyz" \
		curl -sf --cacert "$PKI/ca.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$KP/readyz"
	log "kube-apiserver $K8S_VERSION ready on 127.0.0.1:$KP ($((SECONDS - t0)) s)"

	# --- CRDs: Kueue, KubeRay (RayJob/RayCluster), ProvisioningRequest, JobSet (v0.12.0, the
	# version Kueue v0.19.2 builds against). Only the CRDs: no JobSet or KubeRay controller runs.
	# GKQ_CP_NO_JOBSET leaves JobSet's out, for a test that installs JobSet itself.
	local jobset_crds=(-f "$crds/jobset/")
	if [ -n "${GKQ_CP_NO_JOBSET:-}" ]; then
		jobset_crds=()
		log "no JobSet CRD (GKQ_CP_NO_JOBSET)"
	fi
	kc apply --server-side --field-manager=gkq-controlplane \
		-f "$crds/kueue/" -f "$crds/kuberay/" -f "$crds/autoscaling/" "${jobset_crds[@]}" >"$RUN/logs/crds.log"
	# As in Kueue's release manifests: v1beta1<->v1beta2 conversion through Kueue's /convert.
	local cab; cab=$(base64 -w0 <"$PKI/ca.crt")
	local crd
	for crd in clusterqueues cohorts localqueues workloads multikueueclusters; do
		kc patch crd "$crd.kueue.x-k8s.io" --type=merge -p "{\"spec\":{\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{\"url\":\"https://127.0.0.1:$WP/convert\",\"caBundle\":\"$cab\"}}}}}" >>"$RUN/logs/crds.log"
	done
	kc wait --for=condition=Established crd --all --timeout="${TIMEOUT}s" >>"$RUN/logs/crds.log"
	log "CRDs established ($((SECONDS - t0)) s)"

	# --- Kueue manager, out of cluster
	kc create namespace kueue-system >/dev/null
	cat >"$RUN/kueue-config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: 127.0.0.1:$HP
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: $WP
  certDir: $RUN/kueue-certs
internalCertManagement:
  enable: false
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks:
  - batch/job
  - ray.io/rayjob
  - ray.io/raycluster
  - jobset.x-k8s.io/jobset
EOF
	# ProvisioningRequest support has no feature gate in Kueue v0.19: the admission-check
	# controller starts when autoscaling.x-k8s.io/v1 ProvisioningRequest is served at startup.
	KUBECONFIG="$RUN/kubeconfig" start_bg kueue "$KUEUE_BIN" --config="$RUN/kueue-config.yaml" \
		--kubeconfig="$RUN/kubeconfig" --zap-log-level=info
	wait_proc kueue "kueue /readyz" curl -sf "http://127.0.0.1:$HP/readyz"
	log "kueue $KUEUE_VERSION ready, webhooks on 127.0.0.1:$WP ($((SECONDS - t0)) s)"

	# --- Kueue's webhooks, called by URL with the test CA (named as kustomize would)
	kc create --dry-run=client -o json -f "$webhooks" |
		python3 -c '
import json, sys
base, cab = sys.argv[1], sys.argv[2]
# kubectl prints one JSON document per object (or a List); accept both
text, dec, pos, items = sys.stdin.read(), json.JSONDecoder(), 0, []
while True:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos == len(text):
        break
    doc, pos = dec.raw_decode(text, pos)
    items += doc["items"] if doc.get("kind") == "List" else [doc]
for d in items:
    d["metadata"] = {"name": "kueue-" + d["metadata"]["name"]}
    for w in d["webhooks"]:
        w["clientConfig"] = {"url": base + w["clientConfig"]["service"]["path"], "caBundle": cab}
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
' "https://127.0.0.1:$WP" "$cab" >"$RUN/kueue-webhooks.json"
	kc apply --server-side --field-manager=gkq-controlplane -f "$RUN/kueue-webhooks.json" >"$RUN/logs/webhooks.log"
	# The webhooks are live once the mutating one adds its finalizer to a (dry-run) ResourceFlavor.
	wait_for "Kueue mutating webhook to answer" probe_webhooks
	log "Kueue webhooks wired ($((SECONDS - t0)) s)"

	cat >"$RUN/env" <<EOF
export KUBECONFIG=$RUN/kubeconfig
export GKQ_KUBECONFIG=$RUN/kubeconfig
export GKQ_CP_DIR=$RUN
EOF
	trap - EXIT
	log "control plane up in $((SECONDS - t0)) s: $RUN (eval \"\$(tools/controlplane.sh env $RUN)\")"
	echo "$RUN"
}

# kube-apiserver of the control plane in $RUN, with the ports and PKI `up` made there.
start_apiserver() {
	local EP KP PKI="$RUN/pki" audit=()
	EP=$(sed -n 's/.*\betcd=\([0-9]*\).*/\1/p' "$RUN/ports")
	KP=$(sed -n 's/.*apiserver=\([0-9]*\).*/\1/p' "$RUN/ports")
	[ -f "$RUN/audit-policy.yaml" ] &&
		audit=(--audit-policy-file="$RUN/audit-policy.yaml" --audit-log-path="$RUN/logs/audit.log"
			--audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=0)
	start_bg kube-apiserver "$APISERVER_BIN" \
		--etcd-servers="http://127.0.0.1:$EP" \
		--advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port="$KP" \
		--cert-dir="$PKI" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--token-auth-file="$PKI/tokens.csv" \
		--authorization-mode=RBAC \
		--service-account-issuer="https://127.0.0.1:$KP" \
		--service-account-key-file="$PKI/sa.pub" \
		--service-account-signing-key-file="$PKI/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 \
		--disable-admission-plugins=ServiceAccount \
		--allow-privileged=true "${audit[@]}"
}

# restart-apiserver DIR: stop kube-apiserver (if it still runs) and start it again with the same
# flags, for tests of an API server that goes away mid-apply. etcd and Kueue keep running.
cmd_restart_apiserver() {
	RUN=${1:-${GKQ_CP_DIR:-}}
	[ -n "$RUN" ] && [ -f "$RUN/pids" ] && [ -f "$RUN/ports" ] || die "usage: $0 restart-apiserver DIR (a directory made by up)"
	RUN="$(cd "$RUN" && pwd)"
	local pid st token KP t0=$SECONDS
	read -r _ pid st < <(awk '$1 == "kube-apiserver"' "$RUN/pids" | tail -n1)  || true
	if [ -n "${pid:-}" ] && [ "$(proc_start "$pid")" = "$st" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	start_apiserver
	token=$(cut -d, -f1 "$RUN/pki/tokens.csv")
	KP=$(sed -n 's/.*apiserver=\([0-9]*\).*/\1/p' "$RUN/ports")
	wait_proc kube-apiserver "kube-apiserver /readyz" \
		curl -sf --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$KP/readyz"
	log "kube-apiserver restarted in $((SECONDS - t0)) s"
}

# --- down ----------------------------------------------------------------------------------

stop_processes() { # RUN
	local run=$1 name pid st pids=()
	[ -f "$run/pids" ] || return 0
	while read -r name pid st; do
		[ -n "$pid" ] || continue
		[ "$pid" != "$$" ] || continue # the watchdog execs `down`: do not kill ourselves
		[ "$(proc_start "$pid")" = "$st" ] || continue # gone, or the PID was reused
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done < <(tac "$run/pids")
	local _
	for _ in $(seq 1 50); do
		local left=0
		for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
		[ $left -eq 1 ] || break
		sleep 0.1
	done
	for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
	if [ -f "$run/etcd-data-dir" ]; then
		local d; d=$(cat "$run/etcd-data-dir")
		case "$d" in /dev/shm/gkq-etcd.*) rm -rf "$d" ;; esac
	fi
}

cmd_down() {
	local run=${1:-${GKQ_CP_DIR:-}}
	[ -n "$run" ] || die "usage: $0 down DIR"
	[ -d "$run" ] || { log "$run does not exist; nothing to stop"; return 0; }
	[ -f "$run/pids" ] || die "$run has no pids file; refusing to remove a directory this script did not create"
	stop_processes "$run"
	rm -rf "$run"
	log "control plane in $run stopped and removed"
}

cmd_env() {
	local run=${1:-${GKQ_CP_DIR:-}}
	[ -n "$run" ] && [ -f "$run/env" ] || die "usage: $0 env DIR (a directory made by up)"
	cat "$run/env"
}

main() {
	case "${1:-}" in
	build) shift; cmd_build "$@" ;;
	up) shift; cmd_up "$@" ;;
	down) shift; cmd_down "$@" ;;
	env) shift; cmd_env "$@" ;;
	restart-apiserver) shift; cmd_restart_apiserver "$@" ;;
	versions) cmd_versions ;;
	*)
		sed -n '2,21p' "$SCRIPT" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
}

# One line, so bash has read all of it before running: editing this file (git checkout, rebase)
# while a long `build` runs cannot make the running script read shifted text.
main "$@"; exit $?
