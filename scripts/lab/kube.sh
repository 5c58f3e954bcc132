#!/usr/bin/env bash
# shellcheck disable=SC2016 # sh snippets in single quotes
# kube.sh: a small Kubernetes for the lab, on this machine (127.0.0.1): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and, for each of its nodes (1 to 4), a containerd and a kubelet, each
# with its own files under DIR. Root only. See LAB.md (shared notes), "Kubernetes", for the measured facts behind
# the choices made here; those for several nodes, sshd and Open MPI are below.
#
#   kube.sh build                     build (once) and cache the Kubernetes binaries; prints their directory
#   kube.sh up     [--dir DIR] [--node NAME] [--gpus N] [--nodes K]
#                                     build if needed, start everything, import the pod image, advertise N
#                                     nvidia.com/gpu on each node (default 4); returns once the nodes are Ready.
#                                     K (1-4, default 1) nodes: NAME, NAME-2 ... NAME-K, one kubelet and one
#                                     containerd each, all on this machine
#   kube.sh gpus   [--dir DIR] [--node NAME] N
#                                     advertise N nvidia.com/gpu on the first node, or on NAME (capacity and
#                                     allocatable)
#   kube.sh down   [--dir DIR]        stop everything of every node, unmount what the kubelets mounted, remove DIR
#   kube.sh status [--dir DIR]        which daemons run
#
# Binaries: kube-apiserver, kubelet, kube-controller-manager and kube-scheduler v1.31.4 are built from the Go
# module proxy (k8s.io/kubernetes@v1.31.4; vendor/ and go.work removed, the staging replaces dropped and the
# staging modules required at v0.31.4) with nice -n 19, into KUBE_CACHE (default
# /var/cache/gpuaccept/kube-v1.31.4/bin). A fresh machine pays ~6-7 minutes on 2 cores (and ~1.5 GB of module
# and build cache); later runs find the binaries and go on in well under a second. Debian packages (deps.sh):
# etcd-server, containerd, containernetworking-plugins, podman, busybox-static, and for the image openssh-server,
# openssh-client and openmpi-bin (kubectl only for humans).
#
# up writes, for the tests: DIR/kubeconfig (a token user, context "lab", namespace default), DIR/env (KUBE_DIR
# KUBECONFIG KUBE_NODE KUBE_API KUBE_IMAGE KUBE_IMAGE_ID KUBE_GPUS KUBE_BIN KUBE_NODES KUBE_NODE_IPS KUBE_IMAGE_REF,
# sh-sourceable; KUBE_IMAGE_REF is the image pinned by its manifest's digest, which the nodes hold under that name
# too (an inventory's image.reference with kubernetes.image_pull_policy Never);
# KUBE_NODE is the first node, KUBE_NODES and KUBE_NODE_IPS all of them, space separated; KUBE_GPUS is the first
# node's count), DIR/nodes and DIR/logs/*.log. The first node is NAME (--node, default gpuaccept-kube-n1) at
# 10.244.252.1, node I is NAME-I at 10.244.252.I: addresses of this machine's own, /32 on the bridge gakube-node (no
# ports); the API server reaches each kubelet at that InternalIP (exec, logs), names need not resolve. The pod image
# (KUBE_IMAGE, localhost/gpuaccept-kube:1) is FROM scratch: a static busybox with its applets (sh sleep mkfifo
# mktemp setsid ps sha256sum ...), the system's bash, GNU head and mktemp and the libraries they link (the guard
# needs bash and a head -c that reads no further than it is told, uploads a mktemp that takes a suffix), OpenSSH
# and Open MPI (below); /lib and /lib64 link to usr/ as on the host. Built once, imported into each node's
# containerd (k8s.io namespace); pods use imagePullPolicy: Never. Its sandbox (pause) image is the same image.
# Defaults: DIR /tmp/gpuaccept-kube; on 127.0.0.1 ports 23790/23800 (etcd), 16443 (API), 10357/10359
# (controller-manager, scheduler) and 10348+10(I-1) (node I's kubelet healthz); node I's kubelet listens on its
# address, port 10350+10(I-1). KUBE_WAIT: seconds to wait for the API and each node (default 90). The ports are
# fixed: one cluster on a machine at a time.
#
# Several nodes (measured, 2 nodes on 2 cores): up --nodes 2 takes 23-48 s with the binaries cached (one node 20
# s). Node I>1 has its own containerd (config, root, state, socket DIR/node-I/containerd/containerd.sock, CNI conf
# dir, bridge gakube-cniI, subnet 10.244.24I.0/24) and kubelet (root-dir, cert-dir, ports, podLogsDir). Two
# kubelets on cgroupfs with cgroupsPerQOS false do not fight: each talks to its own containerd only, the containers
# of both are in /sys/fs/cgroup/*/k8s.io/<id> (cgroup v1) and runc's state in /run/containerd/runc/k8s.io, ids
# unique; a pod on each node ran for minutes, no restart, no kubelet touching the other's. What was shared and did
# interfere: a kubelet's GC removes the directories in its pod log dir of pods it does not know (seen in
# /var/log/pods) and asks its runtime for their containers ("NotFound" errors): so node I>1 logs to
# DIR/node-I/pods (the field is podLogsDir; "podLogsDirectory" is ignored, "unknown field", lenient decoding).
# Still shared, harmless here: /var/lib/kubelet/device-plugins (kubelet.sock is hard-coded; each kubelet empties
# the directory at start; no device plugin runs, nvidia.com/gpu is patched into the node status) and
# /var/log/containers (links). hostNetwork pods of all nodes share this machine's network and UTS namespaces:
# hostname prints the machine's name in every pod (tell pods apart otherwise), and their servers need ports apart.
#
# OpenSSH and Open MPI 4.1 in the image (measured between two hostNetwork pods, one a node): the files of
# openssh-server openssh-client openssh-sftp-server openmpi-bin openmpi-common libopenmpi3 libpmix2 (dpkg -L, no
# docs, man pages or service glue), the ldd closure of every ELF file among them (the MCA components Open MPI
# dlopens from /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 included: no load warnings), /etc/openmpi (Debian's:
# btl ^uct,openib,ofi, pml ^ucx, ...), mpirun and mpiexec, root and sshd (privilege separation) in /etc/passwd,
# /run/sshd: the image is 46 MB. sshd runs as root in a pod as it is (without /run/sshd it stops: "Missing
# privilege separation directory"): ssh-keygen -q -t ed25519 -N '' -f KEY, then /usr/sbin/sshd -f CFG -E LOG with
# Port (one of its own: the network is shared), ListenAddress (the node's address), HostKey, AuthorizedKeysFile (an
# absolute path), PasswordAuthentication no, KbdInteractiveAuthentication no, UsePAM no, PidFile. No directory up
# to / of the keys' path may be group or world writable (StrictModes): under /var/tmp or /tmp sshd refuses the key
# ("bad ownership or modes for directory /var/tmp"); under /root (700) it takes it. The client: ssh -F CFG with,
# per host, Port, IdentityFile, UserKnownHostsFile (lines "[IP]:PORT KEY"), StrictHostKeyChecking yes, BatchMode
# yes. mpirun --allow-run-as-root (or OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; without, it
# refuses) -H IP1,IP2 --mca plm_rsh_args "-F CFG": orted is found on sshd's PATH (no --prefix needed), tree spawn
# does not matter with 2 hosts (plm_rsh_no_tree_spawn 1 works too), nothing is left running after. But Open MPI
# takes 10.244.252.1 for an address of every pod (it lists gakube-node twice, both times as .1, and never sees
# the other nodes' addresses): from node 1's pod IP1 runs there and IP2 over ssh, as it should; from another
# node's pod IP1 is taken for local too and its ranks run in the launching pod. --mca if_base_do_not_resolve 1
# makes every -H host remote: mpirun sshes to each, its own pod's sshd too (whose authorized_keys and known_hosts
# must then hold the launcher's key and that host key), right from any pod. An MPI program (4 ranks, 2 a pod;
# MPI_Allreduce, a 4 MiB MPI_Sendrecv ring) runs with Debian's defaults and with --mca btl tcp,self,vader --mca
# btl_tcp_if_include 10.244.252.0/24 --mca oob_tcp_if_include 10.244.252.0/24 (the ranks of both pods then
# advertise 10.244.252.1, which works on the shared network); without oob_tcp_if_include the orteds called back
# on eth0's address, which works as well.
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

DIR=/tmp/gpuaccept-kube NODE="" GPUS=4 NODES=1 CMD="" ARGS=()
parse_args() {
	while (($#)); do
		case $1 in
		--dir) (($# >= 2)) || usage_die "--dir needs a value"; DIR=$2; shift 2 ;;
		--dir=*) DIR=${1#*=}; shift ;;
		--node) (($# >= 2)) || usage_die "--node needs a value"; NODE=$2; shift 2 ;;
		--node=*) NODE=${1#*=}; shift ;;
		--gpus) (($# >= 2)) || usage_die "--gpus needs a value"; GPUS=$2; shift 2 ;;
		--gpus=*) GPUS=${1#*=}; shift ;;
		--nodes) (($# >= 2)) || usage_die "--nodes needs a value"; NODES=$2; shift 2 ;;
		--nodes=*) NODES=${1#*=}; shift ;;
		-h | --help) CMD=help; shift ;;
		-*) usage_die "unknown option $1" ;;
		*) if [[ -z $CMD ]]; then CMD=$1; else ARGS+=("$1"); fi; shift ;;
		esac
	done
	[[ $DIR == /* && $DIR =~ ^/[A-Za-z0-9._/+-]+$ ]] || usage_die "bad --dir '$DIR': absolute, no special characters"
	DIR=${DIR%/}
	[[ $GPUS =~ ^[0-9]+$ ]] || usage_die "bad --gpus '$GPUS'"
	[[ $NODES =~ ^[1-4]$ ]] || usage_die "bad --nodes '$NODES': 1 to 4"
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
	# up takes --nodes; the other commands find the nodes up made in DIR/nodes (one node where it is missing)
	if [[ $CMD != up ]]; then
		NODES=1
		if [[ -f $DIR/nodes ]]; then
			local names
			read -ra names <"$DIR/nodes"
			((${#names[@]})) && NODES=${#names[@]}
		fi
	fi
	((NODES == 1 || ${#NODE} <= 61)) || usage_die "bad --node '$NODE': at most 61 characters with --nodes"
}

# node_vars I: the Ith node's (1-based) name, address, kubelet ports, directories, CNI bridge/subnet and the suffix
# of its daemons' names. Node 1 keeps the one-node layout (NAME, DIR/containerd, DIR/kubelet, DIR/cni, daemons
# containerd and kubelet); node I>1 is NAME-I with everything under DIR/node-I (daemons containerd-I, kubelet-I)
# and its pods' logs there too (podLogsDir), not in /var/log/pods: a kubelet's GC removes the log
# directories there of pods it does not know, i.e. the other kubelets'.
node_vars() {
	local i=$1
	if ((i == 1)); then
		N_NAME=$NODE N_DIR=$DIR N_SFX="" N_BR=gakube-cni N_NET=gpuaccept-kube N_SUBNET=10.244.250.0/24
	else
		N_NAME=$NODE-$i N_DIR=$DIR/node-$i N_SFX=-$i N_BR=gakube-cni$i N_NET=gpuaccept-kube-$i
		N_SUBNET=10.244.24$i.0/24
	fi
	N_IP=${NODE_IP%.*}.$i N_PORT=$((KUBELET_PORT + 10 * (i - 1))) N_HEALTHZ=$((KUBELET_HEALTHZ + 10 * (i - 1)))
	N_CTRD=$N_DIR/containerd N_SOCK=$N_DIR/containerd/containerd.sock N_KDIR=$N_DIR/kubelet N_CNI=$N_DIR/cni/net.d
}

# node_list FIELD: the nodes' names (FIELD N_NAME) or addresses (N_IP), space separated
node_list() {
	local i out=""
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		out+="${out:+ }${!1}"
	done
	echo "$out"
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

node_ready() { api "/api/v1/nodes/$1" | tr -d ' \n\t' | grep -q '"type":"Ready","status":"True"'; } # node_ready NAME
default_sa() { api /api/v1/namespaces/default/serviceaccounts/default; }
has_gpus() { api "/api/v1/nodes/$1" | tr -d ' \n\t' | grep -q "\"allocatable\":{[^}]*\"nvidia.com/gpu\":\"$GPUS\""; }

write_files() {
	mkdir -p "$PIDS" "$LOGS" "$PKI" "$DIR/etcd" "$DIR/tmp"
	chmod 700 "$DIR" "$PKI" "$DIR/etcd"
	echo "$NODE" >"$DIR/node"
	node_list N_NAME >"$DIR/nodes"
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
	local i
	for ((i = 1; i <= NODES; i++)); do write_node_files "$i"; done
}

# write_node_files I: the Ith node's containerd, CNI and kubelet configuration
write_node_files() {
	node_vars "$1"
	mkdir -p "$N_CTRD/root" "$N_CTRD/state" "$N_KDIR/root" "$N_KDIR/pki" "$N_CNI"
	cat >"$N_CTRD/config.toml" <<EOF
version = 2
root = "$N_CTRD/root"
state = "$N_CTRD/state"
[grpc]
  address = "$N_SOCK"
[ttrpc]
  address = "$N_SOCK.ttrpc"
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
    conf_dir = "$N_CNI"
EOF
	# the runtime reports its network ready only with a CNI config; the window's pods use the host network
	cat >"$N_CNI/10-gpuaccept.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "$N_NET", "plugins": [
  {"type": "bridge", "bridge": "$N_BR", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$N_SUBNET"}]]}},
  {"type": "loopback"}]}
EOF
	cat >"$N_KDIR/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $N_IP
port: $N_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $N_HEALTHZ
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$N_SOCK
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
	((${1} == 1)) || echo "podLogsDir: $N_DIR/pods" >>"$N_KDIR/config.yaml"
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
		"$R/usr/lib" "$R/usr/lib64" "$st/root" "$st/run" "$st/tmp"
	# merged /usr as on the host: one copy of each library, whichever of /lib and /usr/lib ldd or dpkg names
	ln -s usr/lib "$R/lib"
	ln -s usr/lib64 "$R/lib64"
	# /var/tmp as every distribution's image has it: the window's private directories go there
	chmod 1777 "$R/tmp" "$R/var/tmp"
	cp "$bb" "$R/bin/busybox"
	for a in $("$bb" --list); do [[ $a == busybox || -e $R/bin/$a ]] || ln -s busybox "$R/bin/$a"; done
	# bash for the guard, and GNU head: the guard reads each stdin frame with head -c N, which must read exactly N
	# bytes of its pipe; busybox's reads ahead and swallows the frames after it (the command never sees EOF)
	cp /bin/bash "$R/bin/bash"
	# and GNU mktemp: uploads name their part file TARGET.XXXXXX.gpuaccept-part, a template busybox refuses
	cp /usr/bin/head /usr/bin/mktemp "$R/usr/bin/"
	image_libs "$R" /bin/bash /usr/bin/head /usr/bin/mktemp
	image_ssh_mpi "$R" "$st"
	# root for the guard and ssh; sshd (privilege separation, chroot /run/sshd) for sshd
	printf 'root:x:0:0:root:/root:/bin/bash\nsshd:x:100:65534:sshd privsep:/run/sshd:/usr/sbin/nologin\n' >"$R/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
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
	local i digest
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		ctr --address "$N_SOCK" -n k8s.io images import "$st/image.tar" >>"$LOGS/image.log" 2>&1 ||
			die "ctr images import into $N_SOCK failed (log $LOGS/image.log):"$'\n'"$(log_tail image)"
		# Also by its manifest's digest, as a pull by a pinned reference leaves an image: an inventory pins it
		# (KUBE_IMAGE_REF) with kubernetes.image_pull_policy Never, and the pod's imageID is that digest
		digest=$(ctr --address "$N_SOCK" -n k8s.io images ls "name==$IMAGE" | awk 'NR == 2 { print $3 }')
		[[ $digest == sha256:* ]] || die "no manifest digest for $IMAGE in $N_SOCK"
		IMAGE_REF=${IMAGE%:*}@$digest
		ctr --address "$N_SOCK" -n k8s.io images tag --force "$IMAGE" "$IMAGE_REF" >>"$LOGS/image.log" 2>&1 ||
			die "ctr images tag $IMAGE_REF failed (log $LOGS/image.log)"
	done
	rm -rf "$st/root" "$st/run" "$st/tmp" "$st/varlib" "$R"
}

# image_libs ROOT FILE...: the shared libraries the ELF FILEs load (ldd), and the loader, copied into ROOT where
# they are on this machine (not yet there: ROOT/lib is ROOT/usr/lib)
image_libs() {
	local R=$1 l
	shift
	for l in $(LC_ALL=C ldd "$@" 2>/dev/null |
		awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(/ {print $1}' | sort -u); do
		[[ -e $R$l ]] && continue
		mkdir -p "$R$(dirname "$l")"
		cp -L "$l" "$R$l"
	done
}

# the packages behind ssh, sshd and mpirun in the pod image: their files (but docs, man pages and service glue)
SSH_MPI_PKGS=(openssh-server openssh-client openssh-sftp-server openmpi-bin openmpi-common libopenmpi3 libpmix2)

need_ssh_mpi() {
	local p
	for p in "${SSH_MPI_PKGS[@]}"; do
		dpkg -s "$p" >/dev/null 2>&1 ||
			die "package $p missing for the pod image (apt-get install openssh-server openssh-client openmpi-bin)"
	done
}

# image_ssh_mpi ROOT WORKDIR: OpenSSH (sshd, ssh, ssh-keygen, scp, sftp-server) and Debian's Open MPI 4.1 (mpirun,
# orted, the MCA components it dlopens from /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3, help files in
# /usr/share/openmpi, /etc/openmpi; PMIx and its components), the ldd closure of every ELF file among them,
# mpirun/mpiexec (the host's are /etc/alternatives links) and sshd's privilege separation directory /run/sshd
image_ssh_mpi() {
	local R=$1 w=$2 p f
	dpkg -L "${SSH_MPI_PKGS[@]}" | grep '^/' |
		grep -Ev '^/(etc/(init\.d|default|pam\.d|sv|ufw)|usr/share/(doc|man|lintian|bug|apport|runit))(/|$)' |
		grep -Ev '^(/usr)?/lib/systemd/' |
		grep -Ev '\.a$|/pkgconfig/' | sort -u >"$w/pkgfiles"
	: >"$w/elves"
	while read -r f; do
		[[ -d $f ]] && continue
		[[ -f $f || -L $f ]] || continue
		mkdir -p "$R$(dirname "$f")"
		cp -a "$f" "$R$f"
		if [[ -f $f && ! -L $f && $(head -c 4 "$f" | od -An -c | tr -d ' ') == '177ELF' ]]; then
			echo "$f" >>"$w/elves"
		fi
	done <"$w/pkgfiles"
	mapfile -t p <"$w/elves"
	image_libs "$R" "${p[@]}"
	ln -sf mpirun.openmpi "$R/usr/bin/mpirun"
	ln -sf mpiexec.openmpi "$R/usr/bin/mpiexec"
	mkdir -p -m 755 "$R/run/sshd"
}

# node_address: each node's InternalIP, where the API server reaches the kubelet (exec): the kubelet refuses a
# loopback one, so it is an address of this machine's own on a bridge with no ports (traffic to it stays local,
# as to the lab's bridge); node I has 10.244.252.I
node_address() {
	local i
	ip link show "$NODE_BR" >/dev/null 2>&1 || ip link add "$NODE_BR" type bridge || die "ip link add $NODE_BR failed"
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		ip addr replace "$N_IP/32" dev "$NODE_BR" || die "the node address $N_IP failed"
	done
	ip link set "$NODE_BR" up || die "the node bridge $NODE_BR failed"
}

cmd_up() {
	need_root
	local c
	for c in etcd containerd ctr curl openssl setsid unshare runc podman; do
		command -v "$c" >/dev/null || die "missing $c (bash scripts/deps.sh: etcd-server containerd containernetworking-plugins podman runc curl)"
	done
	[[ -x /usr/lib/cni/bridge ]] || die "missing /usr/lib/cni (apt-get install containernetworking-plugins)"
	need_ssh_mpi
	cmd_build >/dev/null
	local t0=$SECONDS
	set_paths
	write_files
	start etcd etcd --name kube --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-cluster "kube=http://127.0.0.1:$ETCD_PEER"
	local i
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		start "containerd$N_SFX" containerd --config "$N_CTRD/config.toml"
	done
	wait_for "etcd health" etcd curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
	start kube-apiserver "$CACHE/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --cert-dir "$PKI" \
		--token-auth-file "$PKI/tokens.csv" --authorization-mode AlwaysAllow --allow-privileged=true \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.244.251.0/24 \
		--kubelet-preferred-address-types InternalIP,Hostname --enable-priority-and-fairness=false
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		wait_for "containerd's socket $N_SOCK" "containerd$N_SFX" ctr --address "$N_SOCK" version
	done
	build_image
	wait_for "the API server ready" kube-apiserver api /readyz
	start kube-controller-manager "$CACHE/kube-controller-manager" --kubeconfig "$KCFG" --bind-address 127.0.0.1 \
		--secure-port "$KCM_PORT" --leader-elect=false --service-account-private-key-file "$PKI/sa.key" \
		--use-service-account-credentials=false
	start kube-scheduler "$CACHE/kube-scheduler" --kubeconfig "$KCFG" --bind-address 127.0.0.1 \
		--secure-port "$SCHED_PORT" --leader-elect=false
	node_address
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		start "kubelet$N_SFX" "$CACHE/kubelet" --config "$N_KDIR/config.yaml" --kubeconfig "$KCFG" \
			--hostname-override "$N_NAME" --node-ip "$N_IP" --root-dir "$N_KDIR/root" --cert-dir "$N_KDIR/pki"
	done
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		wait_for "node $N_NAME Ready" "kubelet$N_SFX" node_ready "$N_NAME"
	done
	wait_for "the default service account" kube-controller-manager default_sa
	for ((i = 1; i <= NODES; i++)); do set_gpus "$i"; done
	{
		printf "KUBE_DIR='%s'\nKUBECONFIG='%s'\nKUBE_NODE='%s'\nKUBE_API='%s'\n" "$DIR" "$KCFG" "$NODE" "$API"
		printf "KUBE_IMAGE='%s'\nKUBE_IMAGE_ID='%s'\nKUBE_GPUS='%s'\nKUBE_BIN='%s'\n" "$IMAGE" "$IMAGE_ID" "$GPUS" "$CACHE"
		printf "KUBE_NODES='%s'\nKUBE_NODE_IPS='%s'\nKUBE_IMAGE_REF='%s'\n" "$(node_list N_NAME)" "$(node_list N_IP)" "$IMAGE_REF"
	} >"$DIR/env.new"
	mv -f "$DIR/env.new" "$DIR/env"
	if ((NODES == 1)); then
		echo "$PROG: node $NODE Ready with $GPUS nvidia.com/gpu in $((SECONDS - t0)) s; KUBECONFIG=$KCFG (env: $DIR/env)" >&2
	else
		echo "$PROG: nodes $(node_list N_NAME) Ready with $GPUS nvidia.com/gpu each in $((SECONDS - t0)) s;" \
			"KUBECONFIG=$KCFG (env: $DIR/env)" >&2
	fi
}

# set_gpus I: nvidia.com/gpu=GPUS in the Ith node's capacity (the kubelet derives allocatable), as a device plugin
# would
set_gpus() {
	node_vars "$1"
	api -X PATCH -H 'Content-Type: application/json-patch+json' \
		--data "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS\"}]" \
		"/api/v1/nodes/$N_NAME/status" >/dev/null || die "patching node $N_NAME's GPUs failed"
	wait_for "allocatable nvidia.com/gpu=$GPUS on $N_NAME" "kubelet$N_SFX" has_gpus "$N_NAME"
}

# gpus N [--node NAME]: the first node, or the one named; KUBE_GPUS in DIR/env follows the first node's count
cmd_gpus() {
	need_root
	((${#ARGS[@]} == 1)) && [[ ${ARGS[0]} =~ ^[0-9]+$ ]] || usage_die "gpus takes one count"
	GPUS=${ARGS[0]}
	local want=$NODE i
	NODE=""
	set_paths
	read -r TOKEN <"$PKI/token" || die "not up ($PKI/token missing)"
	want=${want:-$NODE}
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		[[ $N_NAME == "$want" ]] && break
	done
	((i <= NODES)) || usage_die "no node '$want' (nodes: $(node_list N_NAME))"
	set_gpus "$i"
	if ((i == 1)); then sed -i "s/^KUBE_GPUS=.*/KUBE_GPUS='$GPUS'/" "$DIR/env"; fi
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

# sweep: every process whose command line names a file under DIR (a kubelet, containerd, a shim, etcd, the API
# server) killed, whatever the pid files say: a kubelet left by a run whose DIR went first held its port, and the
# next cluster's kubelet on that address died at start (seen in the lab)
sweep() {
	local pid
	for pid in $(pgrep -f -- "$DIR/" 2>/dev/null); do
		[[ $pid == "$$" ]] || kill -KILL "$pid" 2>/dev/null || true
	done
}

cmd_down() {
	need_root
	set_paths
	[[ -d $DIR ]] || { sweep; return 0; }
	local i id pid
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		stop "kubelet$N_SFX"
	done
	# the pods' processes outlive the kubelet and containerd (their shims hold them): every task goes first
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		alive "containerd$N_SFX" || continue
		for id in $(ctr --address "$N_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$N_SOCK" -n k8s.io tasks kill -a -s KILL "$id" >/dev/null 2>&1 || true
		done
		sleep 0.5
		for id in $(ctr --address "$N_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$N_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
		done
	done
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		stop "containerd$N_SFX"
		for pid in $(pgrep -f "containerd-shim.*-address $N_SOCK" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null || true
		done
	done
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop etcd
	# what the kubelet and containerd mounted (pod volumes, rootfs, shm), deepest first
	awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		ip link del "$N_BR" 2>/dev/null || true
	done
	ip link del "$NODE_BR" 2>/dev/null || true
	sweep
	rm -rf "$DIR"
}

cmd_status() {
	set_paths
	local n i names=(etcd kube-apiserver kube-controller-manager kube-scheduler)
	for ((i = 1; i <= NODES; i++)); do
		node_vars "$i"
		names+=("containerd$N_SFX" "kubelet$N_SFX")
	done
	for n in "${names[@]}"; do
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
