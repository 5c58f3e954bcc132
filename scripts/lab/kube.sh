#!/usr/bin/env bash
# shellcheck disable=SC2016 # sh snippets in single quotes
# kube.sh: a one-node Kubernetes for the lab, on this machine (127.0.0.1): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd and a kubelet, each with its own files under DIR. Root only.
# See LAB.md (shared notes), "Kubernetes", for the measured facts behind the choices made here.
#
#   kube.sh build                     build (once) and cache the Kubernetes binaries; prints their directory
#   kube.sh up     [--dir DIR] [--node NAME] [--gpus N]
#                                     build if needed, start everything, import the pod image, advertise N
#                                     nvidia.com/gpu on the node (default 4); returns once the node is Ready
#   kube.sh gpus   [--dir DIR] N      advertise N nvidia.com/gpu on the node (capacity and allocatable)
#   kube.sh down   [--dir DIR]        stop everything, unmount what the kubelet mounted, remove DIR
#   kube.sh status [--dir DIR]        which daemons run
#
# Binaries: kube-apiserver, kubelet, kube-controller-manager and kube-scheduler v1.31.4 are built from the Go
# module proxy (k8s.io/kubernetes@v1.31.4; vendor/ and go.work removed, the staging replaces dropped and the
# staging modules required at v0.31.4) with nice -n 19, into KUBE_CACHE (default
# /var/cache/gpuaccept/kube-v1.31.4/bin). A fresh machine pays ~6-7 minutes on 2 cores (and ~1.5 GB of module
# and build cache); later runs find the binaries and go on in well under a second. Debian packages (deps.sh):
# etcd-server, containerd, containernetworking-plugins, podman, busybox-static (kubectl only for humans).
#
# up writes, for the tests: DIR/kubeconfig (a token user, context "lab", namespace default), DIR/env
# (KUBE_DIR KUBECONFIG KUBE_NODE KUBE_IMAGE KUBE_IMAGE_ID KUBE_GPUS, sh-sourceable) and DIR/logs/*.log. The node
# is NAME (default the machine's hostname; it must resolve to an address of this machine, the API server reaches
# the kubelet by it for exec). The pod image (KUBE_IMAGE, localhost/gpuaccept-kube:1) is FROM scratch: a static
# busybox with its applets (sh sleep mkfifo mktemp setsid ps sha256sum ...), the system's bash, GNU head and mktemp
# and the libraries they link (the guard needs bash and a head -c that reads no further than it is told, uploads
# a mktemp that takes a suffix), imported into containerd's k8s.io namespace; pods use imagePullPolicy: Never.
# Its sandbox (pause) image is the same image. Defaults: DIR /tmp/gpuaccept-kube, ports 2379/2380 (etcd), 6443
# (API), 10250 (kubelet), 10257/10259 (controller-manager, scheduler) on 127.0.0.1. KUBE_WAIT: seconds to wait
# for the API and the node (default 90). The ports are fixed: one cluster on a machine at a time.
set -euo pipefail

PROG=kube.sh
VERSION=v1.31.4
STAGING=v0.31.4
CACHE=${KUBE_CACHE:-/var/cache/gpuaccept/kube-$VERSION/bin}
WAIT=${KUBE_WAIT:-90}
BINS=(kube-apiserver kubelet kube-controller-manager kube-scheduler)
IMAGE=localhost/gpuaccept-kube:1
# the image's CMD (also the pod sandbox's): sleeps until TERM, which as PID 1 it must handle to end at once
SLEEPER='["sh", "-c", "trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"]'

die() {
	echo "$PROG: $*" >&2
	exit 1
}
usage_die() {
	echo "$PROG: $*" >&2
	echo "run '$PROG help' for usage" >&2
	exit 2
}
usage() { sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

DIR=/tmp/gpuaccept-kube NODE="" GPUS=4 CMD="" ARGS=()
parse_args() {
	while (($#)); do
		case $1 in
		--dir) (($# >= 2)) || usage_die "--dir needs a value"; DIR=$2; shift 2 ;;
		--dir=*) DIR=${1#*=}; shift ;;
		--node) (($# >= 2)) || usage_die "--node needs a value"; NODE=$2; shift 2 ;;
		--node=*) NODE=${1#*=}; shift ;;
		--gpus) (($# >= 2)) || usage_die "--gpus needs a value"; GPUS=$2; shift 2 ;;
		--gpus=*) GPUS=${1#*=}; shift ;;
		-h | --help) CMD=help; shift ;;
		-*) usage_die "unknown option $1" ;;
		*) if [[ -z $CMD ]]; then CMD=$1; else ARGS+=("$1"); fi; shift ;;
		esac
	done
	[[ $DIR == /* && $DIR =~ ^/[A-Za-z0-9._/+-]+$ ]] || usage_die "bad --dir '$DIR': absolute, no special characters"
	DIR=${DIR%/}
	[[ $GPUS =~ ^[0-9]+$ ]] || usage_die "bad --gpus '$GPUS'"
}

need_root() {
	[[ $EUID == 0 ]] || die "must run as root (containerd, the kubelet and its mounts need it); uid is $EUID"
}

# ---------------------------------------------------------------- build
have_bins() {
	local b
	for b in "${BINS[@]}"; do [[ -x $CACHE/$b ]] || return 1; done
}

cmd_build() {
	if have_bins; then
		echo "$CACHE"
		return
	fi
	command -v go >/dev/null || die "go is needed to build the Kubernetes binaries (none cached in $CACHE)"
	mkdir -p "$(dirname "$CACHE")"
	exec 8>"$(dirname "$CACHE")/build.lock"
	flock -w 1800 8 || die "another build holds $(dirname "$CACHE")/build.lock"
	if have_bins; then
		echo "$CACHE"
		return
	fi
	local t0=$SECONDS src tmp mod
	echo "$PROG: building Kubernetes $VERSION (${BINS[*]}) into $CACHE, once: ~6-7 minutes on 2 cores" >&2
	mod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n $mod && -d $mod ]] || die "go mod download k8s.io/kubernetes@$VERSION failed (module proxy reachable?)"
	tmp=$(dirname "$CACHE")/build.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	src=$tmp/src
	cp -r "$mod" "$src"
	chmod -R u+w "$src"
	rm -rf "$src/vendor" "$src/go.work" "$src/go.work.sum"
	# the module zip has no staging/ (nested modules): require the published staging modules instead
	sed -i -e '/=> \.\/staging\/src\//d' \
		-e "s#^\(\tk8s\.io/[a-z0-9-]*\) v0\.0\.0\$#\1 $STAGING#" "$src/go.mod"
	local ld="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/component-base/version.gitMajor=1"
	ld+=" -X k8s.io/component-base/version.gitMinor=31 -X k8s.io/component-base/version.gitTreeState=clean"
	ld+=" -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
	ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$VERSION -X k8s.io/client-go/pkg/version.gitMajor=1"
	ld+=" -X k8s.io/client-go/pkg/version.gitMinor=31"
	(cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags "$ld" -o "$tmp/bin/" \
		./cmd/kube-apiserver ./cmd/kubelet ./cmd/kube-controller-manager ./cmd/kube-scheduler) >&2 ||
		die "building Kubernetes $VERSION failed (sources in $src)"
	rm -rf "$CACHE"
	mv "$tmp/bin" "$CACHE"
	rm -rf "$tmp"
	echo "$PROG: built in $((SECONDS - t0)) s" >&2
	echo "$CACHE"
}

# ---------------------------------------------------------------- up
NODE_IP=10.244.252.1 NODE_BR=gakube-node ETCD_PORT=23790 ETCD_PEER=23800 API_PORT=16443 KUBELET_PORT=10350 KUBELET_HEALTHZ=10348 KCM_PORT=10357 SCHED_PORT=10359
API=https://127.0.0.1:$API_PORT

set_paths() {
	PIDS=$DIR/pids LOGS=$DIR/logs PKI=$DIR/pki CTRD=$DIR/containerd SOCK=$DIR/containerd/containerd.sock
	KCFG=$DIR/kubeconfig
	[[ -z $NODE && -f $DIR/node ]] && read -r NODE <"$DIR/node"
	NODE=${NODE:-gpuaccept-kube-n1}
	[[ $NODE =~ ^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$ ]] || usage_die "bad --node '$NODE': a lower-case DNS name"
}

# alive NAME: the daemon's pid file names a live process whose command line holds DIR (ours, not a reused pid)
alive() {
	local pid
	[[ -f $PIDS/$1.pid ]] || return 1
	read -r pid <"$PIDS/$1.pid" || return 1
	[[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$DIR/"
}

# start NAME CMD...: the daemon in a session of its own, its output in DIR/logs/NAME.log
start() {
	local name=$1
	shift
	alive "$name" && return 0
	setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 &
	echo $! >"$PIDS/$name.pid"
}

log_tail() { tail -n 5 "$LOGS/$1.log" 2>/dev/null | sed 's/^/    /'; }

# wait_for WHAT NAME CMD...: CMD succeeds within WAIT seconds, else die with the daemon NAME's log
wait_for() {
	local what=$1 name=$2 i
	shift 2
	for ((i = 0; i < WAIT * 5; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		if [[ -n $name ]] && ! alive "$name"; then
			die "$name exited while waiting for $what (log $LOGS/$name.log):"$'\n'"$(log_tail "$name")"
		fi
		sleep 0.2
	done
	die "$what: not within $WAIT s${name:+ (log $LOGS/$name.log):}"$'\n'"$(log_tail "$name")"
}

api() { # api CURL-ARGS... PATH: the API as the lab's admin (curl gets pretty JSON: the node's checks squeeze it)
	local path=${*: -1}
	curl -sfk --max-time 10 -H "Authorization: Bearer $TOKEN" "${@:1:$#-1}" "$API$path"
}

node_ready() { api "/api/v1/nodes/$NODE" | tr -d ' \n\t' | grep -q '"type":"Ready","status":"True"'; }
default_sa() { api /api/v1/namespaces/default/serviceaccounts/default; }
has_gpus() { api "/api/v1/nodes/$NODE" | tr -d ' \n\t' | grep -q "\"allocatable\":{[^}]*\"nvidia.com/gpu\":\"$GPUS\""; }

write_files() {
	mkdir -p "$PIDS" "$LOGS" "$PKI" "$CTRD/root" "$CTRD/state" "$DIR/etcd" "$DIR/kubelet/root" "$DIR/kubelet/pki" \
		"$DIR/cni/net.d" "$DIR/tmp"
	chmod 700 "$DIR" "$PKI" "$DIR/etcd"
	echo "$NODE" >"$DIR/node"
	if [[ ! -f $PKI/token ]]; then
		head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$PKI/token"
		echo >>"$PKI/token"
	fi
	read -r TOKEN <"$PKI/token"
	printf '%s,admin,admin,system:masters\n' "$TOKEN" >"$PKI/tokens.csv"
	[[ -f $PKI/sa.key ]] || openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	cat >"$KCFG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: $API
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: lab
  context:
    cluster: lab
    user: admin
    namespace: default
current-context: lab
EOF
	chmod 600 "$KCFG"
	cat >"$CTRD/config.toml" <<EOF
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
	# the runtime reports its network ready only with a CNI config; the window's pods use the host network
	cat >"$DIR/cni/net.d/10-gpuaccept.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "gpuaccept-kube", "plugins": [
  {"type": "bridge", "bridge": "gakube-cni", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.250.0/24"}]]}},
  {"type": "loopback"}]}
EOF
	cat >"$DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
registerNode: true
EOF
}

# the pod image: FROM scratch, a static busybox with every applet, bash and the libraries it links; its CMD sleeps
# until TERM (it is the sandbox image too). Built with a throwaway podman store, imported into containerd.
build_image() {
	local st=$DIR/image R bb="" a l
	for a in /bin/busybox /usr/bin/busybox; do
		if [[ -x $a ]] && ! LC_ALL=C ldd "$a" >/dev/null 2>&1; then bb=$a && break; fi
	done
	[[ -n $bb ]] || die "no static busybox (apt-get install busybox-static)"
	command -v podman >/dev/null || die "podman missing (apt-get install podman)"
	rm -rf "$st"
	R=$st/rootfs
	mkdir -p "$R/bin" "$R/usr/bin" "$R/usr/local/bin" "$R/etc" "$R/tmp" "$R/var/tmp" "$R/root" "$R/proc" "$R/dev" "$R/sys" \
		"$st/root" "$st/run" "$st/tmp"
	# /var/tmp as every distribution's image has it: the window's private directories go there
	chmod 1777 "$R/tmp" "$R/var/tmp"
	cp "$bb" "$R/bin/busybox"
	for a in $("$bb" --list); do [[ $a == busybox || -e $R/bin/$a ]] || ln -s busybox "$R/bin/$a"; done
	# bash for the guard, and GNU head: the guard reads each stdin frame with head -c N, which must read exactly N
	# bytes of its pipe; busybox's reads ahead and swallows the frames after it (the command never sees EOF)
	cp /bin/bash "$R/bin/bash"
	# and GNU mktemp: uploads name their part file TARGET.XXXXXX.gpuaccept-part, a template busybox refuses
	cp /usr/bin/head /usr/bin/mktemp "$R/usr/bin/"
	for l in $(LC_ALL=C ldd /bin/bash /usr/bin/head /usr/bin/mktemp | grep -o '/[^ ]*lib[^ ]*\.so[^ ]*' | sort -u); do
		mkdir -p "$R$(dirname "$l")"
		cp -L "$l" "$R$l"
	done
	printf 'root:x:0:0:root:/root:/bin/bash\n' >"$R/etc/passwd"
	printf 'root:x:0:\n' >"$R/etc/group"
	cat >"$R/usr/bin/nvidia-smi" <<'EOF'
#!/bin/sh
# gpuaccept lab stand-in for nvidia-smi: the lab has no GPU
echo "GPU 0: gpuaccept lab pod (UUID: GPU-00000000-0000-0000-0000-000000000000)"
EOF
	chmod 755 "$R/usr/bin/nvidia-smi"
	tar -C "$R" --owner=0 --group=0 --numeric-owner --sort=name -cf "$st/rootfs.tar" .
	cat >"$st/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$st/root"
runroot = "$st/run"
EOF
	cat >"$st/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
lock_type = "file"
tmp_dir = "$st/tmp"
image_copy_tmp_dir = "$st/tmp"
EOF
	local run=$st/run
	((${#run} <= 50)) || die "the image store's runroot $run is longer than podman allows: a shorter --dir"
	CONTAINERS_CONF=$st/containers.conf CONTAINERS_STORAGE_CONF=$st/storage.conf ST=$st IMG=$IMAGE CMDJSON=$SLEEPER \
		unshare --mount --propagation private bash -c '
		set -euo pipefail
		mkdir -p "$ST/varlib" && mount --bind "$ST/varlib" /var/lib/containers 2>/dev/null || true
		P=(podman --root "$ST/root" --runroot "$ST/run" --tmpdir "$ST/tmp")
		"${P[@]}" import -q --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
			--change "CMD $CMDJSON" --message "gpuaccept lab pod image" "$ST/rootfs.tar" "$IMG" >"$ST/id"
		"${P[@]}" save -q --format docker-archive -o "$ST/image.tar" "$IMG"' >"$LOGS/image.log" 2>&1 ||
		die "building the pod image failed (log $LOGS/image.log):"$'\n'"$(log_tail image)"
	read -r IMAGE_ID <"$st/id"
	IMAGE_ID=sha256:${IMAGE_ID#sha256:}
	ctr --address "$SOCK" -n k8s.io images import "$st/image.tar" >>"$LOGS/image.log" 2>&1 ||
		die "ctr images import failed (log $LOGS/image.log):"$'\n'"$(log_tail image)"
	rm -rf "$st/root" "$st/run" "$st/tmp" "$st/varlib" "$R"
}

# node_address: the node's InternalIP, where the API server reaches the kubelet (exec): the kubelet refuses a
# loopback one, so it is an address of this machine's own on a bridge with no ports (traffic to it stays local,
# as to the lab's bridge)
node_address() {
	ip link show "$NODE_BR" >/dev/null 2>&1 || ip link add "$NODE_BR" type bridge || die "ip link add $NODE_BR failed"
	ip addr replace "$NODE_IP/32" dev "$NODE_BR" && ip link set "$NODE_BR" up || die "the node address $NODE_IP failed"
}

cmd_up() {
	need_root
	local c
	for c in etcd containerd ctr curl openssl setsid unshare runc podman; do
		command -v "$c" >/dev/null || die "missing $c (bash scripts/deps.sh: etcd-server containerd containernetworking-plugins podman runc curl)"
	done
	[[ -x /usr/lib/cni/bridge ]] || die "missing /usr/lib/cni (apt-get install containernetworking-plugins)"
	cmd_build >/dev/null
	local t0=$SECONDS
	set_paths
	write_files
	start etcd etcd --name kube --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-cluster "kube=http://127.0.0.1:$ETCD_PEER"
	start containerd containerd --config "$CTRD/config.toml"
	wait_for "etcd health" etcd curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
	start kube-apiserver "$CACHE/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --cert-dir "$PKI" \
		--token-auth-file "$PKI/tokens.csv" --authorization-mode AlwaysAllow --allow-privileged=true \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.244.251.0/24 \
		--kubelet-preferred-address-types InternalIP,Hostname --enable-priority-and-fairness=false
	wait_for "containerd's socket" containerd ctr --address "$SOCK" version
	build_image
	wait_for "the API server ready" kube-apiserver api /readyz
	start kube-controller-manager "$CACHE/kube-controller-manager" --kubeconfig "$KCFG" --bind-address 127.0.0.1 \
		--secure-port "$KCM_PORT" --leader-elect=false --service-account-private-key-file "$PKI/sa.key" \
		--use-service-account-credentials=false
	start kube-scheduler "$CACHE/kube-scheduler" --kubeconfig "$KCFG" --bind-address 127.0.0.1 \
		--secure-port "$SCHED_PORT" --leader-elect=false
	node_address
	start kubelet "$CACHE/kubelet" --config "$DIR/kubelet/config.yaml" --kubeconfig "$KCFG" \
		--hostname-override "$NODE" --node-ip "$NODE_IP" --root-dir "$DIR/kubelet/root" --cert-dir "$DIR/kubelet/pki"
	wait_for "node $NODE Ready" kubelet node_ready
	wait_for "the default service account" kube-controller-manager default_sa
	set_gpus
	{
		printf "KUBE_DIR='%s'\nKUBECONFIG='%s'\nKUBE_NODE='%s'\nKUBE_API='%s'\n" "$DIR" "$KCFG" "$NODE" "$API"
		printf "KUBE_IMAGE='%s'\nKUBE_IMAGE_ID='%s'\nKUBE_GPUS='%s'\nKUBE_BIN='%s'\n" "$IMAGE" "$IMAGE_ID" "$GPUS" "$CACHE"
	} >"$DIR/env.new"
	mv -f "$DIR/env.new" "$DIR/env"
	echo "$PROG: node $NODE Ready with $GPUS nvidia.com/gpu in $((SECONDS - t0)) s; KUBECONFIG=$KCFG (env: $DIR/env)" >&2
}

# set_gpus: nvidia.com/gpu=GPUS in the node's capacity (the kubelet derives allocatable), as a device plugin would
set_gpus() {
	api -X PATCH -H 'Content-Type: application/json-patch+json' \
		--data "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS\"}]" \
		"/api/v1/nodes/$NODE/status" >/dev/null || die "patching the node's GPUs failed"
	wait_for "allocatable nvidia.com/gpu=$GPUS" kubelet has_gpus
}

cmd_gpus() {
	need_root
	((${#ARGS[@]} == 1)) && [[ ${ARGS[0]} =~ ^[0-9]+$ ]] || usage_die "gpus takes one count"
	GPUS=${ARGS[0]}
	set_paths
	read -r TOKEN <"$PKI/token" || die "not up ($PKI/token missing)"
	set_gpus
	sed -i "s/^KUBE_GPUS=.*/KUBE_GPUS='$GPUS'/" "$DIR/env"
}

# ---------------------------------------------------------------- down
stop() { # stop NAME: TERM, KILL after 5 s
	local pid i
	alive "$1" || { rm -f "$PIDS/$1.pid"; return 0; }
	read -r pid <"$PIDS/$1.pid"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		alive "$1" || break
		sleep 0.1
	done
	alive "$1" && kill -KILL "$pid" 2>/dev/null
	rm -f "$PIDS/$1.pid"
}

cmd_down() {
	need_root
	set_paths
	[[ -d $DIR ]] || return 0
	stop kubelet
	# the pods' processes outlive the kubelet and containerd (their shims hold them): every task goes first
	if alive containerd; then
		local id
		for id in $(ctr --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$SOCK" -n k8s.io tasks kill -a -s KILL "$id" >/dev/null 2>&1 || true
		done
		sleep 0.5
		for id in $(ctr --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
		done
	fi
	stop containerd
	local pid
	for pid in $(pgrep -f "containerd-shim.*-address $SOCK" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop etcd
	# what the kubelet and containerd mounted (pod volumes, rootfs, shm), deepest first
	awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	ip link del gakube-cni 2>/dev/null || true
	ip link del "$NODE_BR" 2>/dev/null || true
	rm -rf "$DIR"
}

cmd_status() {
	set_paths
	local n
	for n in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		if alive "$n"; then echo "$n running (pid $(cat "$PIDS/$n.pid"))"; else echo "$n not running"; fi
	done
}

main() {
	parse_args "$@"
	case $CMD in
	help) usage; exit 0 ;;
	"") usage; exit 2 ;;
	build | up | down | status | gpus) ;;
	*) usage_die "unknown command '$CMD'" ;;
	esac
	"cmd_${CMD//-/_}"
}

main "$@"
