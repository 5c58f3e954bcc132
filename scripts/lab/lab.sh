#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2016,SC2119 # A && B || die; sh snippets in single quotes; teardown's optional arg
# lab.sh: a local multi-host test lab. Each host is a Linux network namespace on a private bridge running a
# real OpenSSH sshd, with its own hostname, host key, /srv and sshd.log, and a lab-wide /etc/hosts and /root
# (so hosts can ssh each other by name, as mpirun needs). Root only. See LAB.md (shared notes) for the
# measured facts behind the choices made here.
#
#   lab.sh up      [--name NAME] [--hosts N] [--subnet A.B.C] [--cap RATE] [--neigh static] [--dir DIR]
#   lab.sh down    [--name NAME]
#   lab.sh status  [--name NAME]
#   lab.sh kill    [--name NAME] HOST        kill -9 every process of the host (it "lost power")
#   lab.sh start   [--name NAME] HOST        (re)start the host's sshd
#   lab.sh cut     [--name NAME] HOST        link down (bridge side of the host's veth)
#   lab.sh restore [--name NAME] HOST        link up
#   lab.sh cap     [--name NAME] HOST RATE   shape both directions with tbf (e.g. 200mbit)
#   lab.sh cap-to  [--name NAME] HOST RATE PEER...
#                                            shape what HOST sends to the PEER hosts at RATE (htb; the rest at the
#                                            host's cap, if any): a slow link is cap-to on both of its ends, a slow
#                                            leaf uplink cap-to from each member to every host outside the leaf and
#                                            back. Again on the same host: more peers, at the same RATE.
#   lab.sh uncap   [--name NAME] HOST
#   lab.sh ps      [--name NAME] HOST        processes of the host: PID PPID PGID ARGS, header first
#   lab.sh rekey   [--name NAME] HOST        new host key, restart sshd, rewrite both known_hosts files
#   lab.sh exec    [--name NAME] HOST CMD... run CMD on the host (its network, mounts and hostname)
#   lab.sh slurm   [--name NAME] [--adopt] [--gres gpu:N] [--gres-on HOST=gpu:N]... [--pyxis [--pyxis-src FILE]]
#                                            start a Slurm cluster on the lab: munged on every host, slurmctld on
#                                            h1, slurmd on every host; returns once sinfo shows every host idle in
#                                            partition lab (the default). Starts only what is not running, so it
#                                            also revives the daemons of a killed and restarted host. --adopt:
#                                            the compute hosts (h2..hN) admit SSH only from a user who holds a
#                                            job on them (pam_slurm_adopt, below); slurm without it turns that off.
#                                            --gres: every host's node has N GPUs in Slurm's eyes (gpu:TYPE:N too),
#                                            --gres-on that host's (0: none); slurm without them, no GRES (below).
#                                            --pyxis: srun takes --container-image (a Pyxis stand-in, below);
#                                            slurm without it turns that off.
#   lab.sh storage [--name NAME] [--port PORT] DIR
#                                            serve DIR over HTTP from the storage host (namespace NAME-st at
#                                            SUBNET.2, "storage" in /etc/hosts; port 8080 by default):
#                                            http://SUBNET.2:PORT/PATH is DIR/PATH, from every host and the
#                                            coordinator. Again with another DIR or port: restarts the server.
#
# --neigh static gives every host a permanent neighbour (ARP) entry for every other host (default: arp, the
# kernel's own). All namespaces share the host's one neighbour table (net.ipv4.neigh.default.gc_thresh3, 1024 by
# default); past ~31 hosts an all-to-all overflows it and connects fail. up warns when that will happen.
#
# HOST is h3 or 3; kill, cut, restore, cap, uncap and ps also take "storage" once it runs. Defaults: NAME lab,
# N 4 (max 128), subnet 10.231.0, DIR /tmp/gpuaccept-lab-NAME. Host i is SUBNET.(10+i); the bridge (the
# coordinator's side) is SUBNET.1/24; bridge br-NAME, veths NAMEv<i> (NAME shortened to 6 characters plus a 4-hex
# hash when longer than 10), the storage host's NAMEvs.
#
# Files written by up, for the coordinator: DIR/client_ed25519(.pub), DIR/known_hosts, DIR/hosts.tsv
# (name TAB addr TAB netns TAB veth), DIR/env (LAB_NAME LAB_DIR LAB_HOSTS LAB_SUBNET LAB_KEY LAB_KNOWN_HOSTS ...;
# storage adds LAB_STORAGE_{ADDR,PORT,URL,DIR}). Per host: DIR/hosts/hI/{sshd_config,ssh_host_ed25519_key,
# sshd.log,sshd.pid,srv/,bin/}; bin/ is the host's own /usr/local/bin (where tests install GPU tool stand-ins per
# host); DIR/home is every host's /root, DIR/etc_hosts every host's /etc/hosts, DIR/shared every host's /shared
# (LAB_SHARED: a shared filesystem, for checkpoints). Containers: where podman is installed, every host has its
# own image store: plain `podman load/images/run` over ssh use the host's /srv/node/containers/storage, with the
# host's own /etc/containers (DIR/hosts/hI/containers/etc: cgroupfs, runc, file events and locks, host network;
# LAB_CONTAINERS names the storage driver, empty without podman). Test image: testimage.sh beside this script.
# Written by slurm: DIR/slurm/etc/slurm.conf and, with --gres, gres.conf (every host's /etc/slurm, so slurm
# commands on the hosts need no SLURM_CONF), DIR/slurm/gres/ (--gres's stand-in devices),
# DIR/slurm/{munge.key,state/,slurmctld.log}, per host DIR/hosts/hI/{munge/ (its /run/munge),slurmd/,tmp/,
# slurmd.log}. MPI jobs: srun --mpi=pmix. Environment: LAB_WAIT (seconds to wait for sshd, for slurm nodes
# to be idle or for the storage server, default 20), LAB_SSHD (the sshd binary,
# default /usr/sbin/sshd; an absolute path, sshd re-executes itself).
#
# slurm --adopt (libpam-slurm-adopt): every host's sshd runs with UsePAM yes; h2..hN get a PAM stack whose account
# phase ends in pam_slurm_adopt (PrologFlags=Contain makes the extern step it adopts into), h1 (the login host,
# slurmctld's) the same stack without it. pam_slurm_adopt exempts root whatever its options say (22.05 resets
# ignore_root=0 to 1 unless action_no_jobs=allow, which it cannot parse), and lab.sh exec and the tests log in as
# root, so root stays admitted everywhere and the rule holds a lab user instead: LAB_ADOPT_USER (labuser, uid
# 4242, group users), in a lab-owned /etc/passwd bind-mounted on every host, home /srv/home/labuser (each host's
# own, with the lab's client key in .ssh/authorized_keys). Refusals show in the host's sshd.log ("Access denied
# for user labuser by PAM account configuration"); pam_slurm_adopt itself logs to syslog, and the hosts have no
# /dev/log. An admitted session is adopted into the job's extern step as far as slurmstepd says (the module logs
# "Process N adopted into job J"), but proctrack/linuxproc does not track it: it is not in scontrol listpids and
# outlives the job. Files: DIR/adopt/{passwd,pam.d/sshd-login,pam.d/sshd-compute}, DIR/slurm/adopt (mode on).
#
# slurm --pyxis (gcc, libslurm-dev): a stand-in for NVIDIA's Pyxis, a real SPANK plugin (pyxis/spank_pyxis.c beside
# this script, or --pyxis-src FILE) built into DIR/slurm/pyxis/spank_pyxis.so and named in DIR/slurm/etc/plugstack.conf
# (every host's /etc/slurm/plugstack.conf, Slurm's default place, read afresh by each srun and slurmstepd, so no
# daemon restarts): srun --help lists --container-image, --container-mounts and --container-name under "Options
# provided by plugins:" as Pyxis's, and a step with --container-image=[REGISTRY#]IMAGE[:TAG] (enroot's URI; a TAG
# sha256:<hex> is the manifest's digest) has the host's podman pull the image (the lab's registry), exports its
# filesystem under the host's /srv/pyxis and runs each task chrooted into it, printing Pyxis's lines ("pyxis:
# imported docker image: REF"; on failure "pyxis: failed to import docker image" and the importer's log). A
# --container-name=NAME container is kept (/srv/pyxis/UID/pyxis_NAME) and reused by later steps, import skipped, as
# Pyxis keeps it; pyxis/enroot is the stand-in's enroot (list, remove -f) for removing it, which a test installs in
# the hosts' bin (Lab.InstallEnroot). What it does not do as Pyxis: no enroot underneath, no user namespace, no
# squashfs. slurm without --pyxis removes plugstack.conf.
#
# slurm --gres gpu:8 --gres-on h3=gpu:4: GPU GRES without GPUs, for a node whose GRES says fewer GPUs than it has.
# slurm.conf gets GresTypes=gpu and Gres=gpu:N on a NodeName line per run of hosts with the same count; gres.conf
# (DIR/slurm/etc/gres.conf, every host's /etc/slurm/gres.conf) AutoDetect=off and per run Name=gpu Count=N
# File=DIR/slurm/gres/gpu[0-(N-1)]: stand-in character devices 1,3 (what /dev/null is), since Slurm 22.05's
# gres/gpu counts no GPU without File (Count alone, or Flags=CountOnly, registers 0: the node goes INVAL, "gres/gpu
# count reported lower than configured") and takes only a device as one. So Slurm schedules and counts them and
# sets CUDA_VISIBLE_DEVICES in a step that asks for them; nothing opens them. A change of GRES (on, off, other
# counts) restarts slurmctld and every slurmd (slurmd reads gres.conf only when it starts; reconfigure is not
# enough), then waits until each slurmd registered again and every node is idle; a node drained by the lab's own
# change ("gres/gpu count reported lower ...", kept in the state dir) is resumed once. The same GRES again restarts
# nothing. Jobs running across a change lose their daemons' state: change GRES on a quiet lab.
set -euo pipefail

PROG=lab.sh
RUNROOT=/run/gpuaccept-lab
SSHD=${LAB_SSHD:-/usr/sbin/sshd}
WAIT=${LAB_WAIT:-20}
MAXHOSTS=128

usage() {
	sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" 2>/dev/null | sed -e '$d' -e 's/^# \{0,1\}//' >&2 ||
		echo "usage: $PROG up|down|status|kill|start|cut|restore|cap|uncap|ps|rekey|exec|slurm|storage [--name NAME] ..." >&2
}
die() { # die MSG: a lab-level failure
	echo "$PROG: lab $NAME: $*" >&2
	exit 1
}
hdie() { # hdie HOST OP MSG: a host-level failure, host named first
	echo "$PROG: lab $NAME host $1: $2: $3" >&2
	exit 1
}
usage_die() {
	echo "$PROG: $*" >&2
	echo "run '$PROG help' for usage" >&2
	exit 2
}
now_ms() { NOW=$((${EPOCHREALTIME/[.,]/} / 1000)); }

# ---------------------------------------------------------------- arguments
NAME=lab NHOSTS=4 SUBNET=10.231.0 CAP="" NEIGH=arp DIR="" DIR_SET=0 PORT=8080 ADOPT=0 PYXIS=0 PYXIS_SRC=""
GRES="" GRES_ON=() # slurm --gres SPEC, --gres-on HOST=SPEC (repeatable)
CMD="" ARGS=()
parse_args() {
	local raw=0
	while (($#)); do
		if ((raw)); then
			ARGS+=("$1")
			shift
			continue
		fi
		case $1 in
		--name) (($# >= 2)) || usage_die "--name needs a value"; NAME=$2; shift 2 ;;
		--name=*) NAME=${1#*=}; shift ;;
		--hosts) (($# >= 2)) || usage_die "--hosts needs a value"; NHOSTS=$2; shift 2 ;;
		--hosts=*) NHOSTS=${1#*=}; shift ;;
		--subnet) (($# >= 2)) || usage_die "--subnet needs a value"; SUBNET=$2; shift 2 ;;
		--subnet=*) SUBNET=${1#*=}; shift ;;
		--cap) (($# >= 2)) || usage_die "--cap needs a value"; CAP=$2; shift 2 ;;
		--cap=*) CAP=${1#*=}; shift ;;
		--neigh) (($# >= 2)) || usage_die "--neigh needs a value"; NEIGH=$2; shift 2 ;;
		--neigh=*) NEIGH=${1#*=}; shift ;;
		--dir) (($# >= 2)) || usage_die "--dir needs a value"; DIR=$2; DIR_SET=1; shift 2 ;;
		--dir=*) DIR=${1#*=}; DIR_SET=1; shift ;;
		--port) (($# >= 2)) || usage_die "--port needs a value"; PORT=$2; shift 2 ;;
		--port=*) PORT=${1#*=}; shift ;;
		--adopt) ADOPT=1; shift ;;
		--pyxis) PYXIS=1; shift ;;
		--pyxis-src) (($# >= 2)) || usage_die "--pyxis-src needs a file"; PYXIS=1; PYXIS_SRC=$2; shift 2 ;;
		--pyxis-src=*) PYXIS=1; PYXIS_SRC=${1#*=}; shift ;;
		--gres) (($# >= 2)) || usage_die "--gres needs a value"; GRES=$2; shift 2 ;;
		--gres=*) GRES=${1#*=}; shift ;;
		--gres-on) (($# >= 2)) || usage_die "--gres-on needs a value"; GRES_ON+=("$2"); shift 2 ;;
		--gres-on=*) GRES_ON+=("${1#*=}"); shift ;;
		-h | --help) CMD=help; shift ;;
		--) shift; raw=1 ;;
		-*) usage_die "unknown option $1" ;;
		*)
			if [[ -z $CMD ]]; then CMD=$1; else ARGS+=("$1"); fi
			shift
			# exec HOST CMD...: everything after HOST belongs to CMD, options included
			if [[ $CMD == exec && ${#ARGS[@]} -ge 1 ]]; then raw=1; fi
			;;
		esac
	done
}

valid_rate() { [[ ${1,,} =~ ^[0-9]+(\.[0-9]+)?[kmgt]?(bit|bps)$ ]]; }

check_common() {
	[[ $NAME =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$ ]] ||
		usage_die "bad --name '$NAME': 1-32 characters from [A-Za-z0-9_-], starting with a letter or digit"
	# interface names must fit 15 characters: the bridge is br-TAG, host i's veth TAGv<i> (i <= 128)
	if ((${#NAME} <= 10)); then
		TAG=$NAME
	else
		TAG=${NAME:0:6}$(printf %s "$NAME" | md5sum | cut -c1-4)
	fi
	BR=br-$TAG
	if ((DIR_SET)); then
		[[ $DIR == /* ]] || usage_die "--dir must be absolute: $DIR"
	elif [[ -f $RUNROOT/$NAME.dir ]]; then
		read -r DIR <"$RUNROOT/$NAME.dir" || true
	fi
	[[ -n $DIR ]] || DIR=/tmp/gpuaccept-lab-$NAME
	DIR=${DIR%/}
	[[ $DIR =~ ^/[A-Za-z0-9._/+-]+$ && $DIR != */.. && $DIR != */../* && $DIR != */./* ]] ||
		usage_die "bad lab dir '$DIR': absolute, without spaces or special characters"
}

need_root() {
	[[ $(uname -s) == Linux ]] || { echo "$PROG: Linux only (network namespaces)" >&2; exit 1; }
	[[ $EUID == 0 ]] || {
		echo "$PROG: must run as root (network namespaces, bridges and mounts need it); uid is $EUID" >&2
		exit 1
	}
}

need_cmds() {
	local c missing=()
	for c in "$@"; do
		if [[ $c == /* ]]; then [[ -x $c ]] || missing+=("$c"); else command -v "$c" >/dev/null || missing+=("$c"); fi
	done
	((${#missing[@]} == 0)) ||
		die "missing commands: ${missing[*]} (apt-get install openssh-server openssh-client iproute2 util-linux)"
}

lock() { # serialize the commands that change a lab (not exec, ps, status)
	local try
	for ((try = 0; try < 5; try++)); do # another lab's down may rmdir RUNROOT in between
		mkdir -p "$RUNROOT"
		if { exec 9>"$RUNROOT/$NAME.lock"; } 2>/dev/null; then break; fi
	done
	((try < 5)) || die "cannot create $RUNROOT/$NAME.lock"
	flock -w 120 9 || die "another $PROG holds $RUNROOT/$NAME.lock for more than 120 s"
}

# ---------------------------------------------------------------- lab and host lookup
require_lab() {
	local name addr rest
	[[ -f $DIR/hosts.tsv ]] || die "not up ($DIR/hosts.tsv missing; run '$PROG up --name $NAME')"
	IFS=$'\t' read -r name addr rest <"$DIR/hosts.tsv" || die "$DIR/hosts.tsv is empty"
	SUBNET=${addr%.*}
	NHOSTS=0
	while read -r _; do NHOSTS=$((NHOSTS + 1)); done <"$DIR/hosts.tsv"
}

set_host() { # set_host I: the variables naming host I
	I=$1 H=h$1 NS=$NAME-h$1 VETH=${TAG}v$1 ADDR=$SUBNET.$((10 + $1)) HD=$DIR/hosts/h$1
}

set_storage() { # the same for the storage host (see cmd_storage)
	I=0 H=storage NS=$NAME-st VETH=${TAG}vs ADDR=$SUBNET.2 HD=$DIR/storage
}

host_arg() { # host_arg ARG: set_host for h3 or 3, checked against the lab (set_storage for "storage")
	local a=${1:-}
	[[ -n $a ]] || usage_die "$CMD: which host? (h1..h$NHOSTS)"
	if [[ $a == storage ]]; then
		case $CMD in
		kill | cut | restore | cap | uncap | ps) ;;
		*) usage_die "$CMD: not for the storage host (kill, cut, restore, cap, uncap and ps are)" ;;
		esac
		set_storage
		[[ -e /run/netns/$NS ]] || hdie "$H" "$CMD" "not started (run '$PROG storage --name $NAME DIR' first)"
		return 0
	fi
	a=${a#h}
	[[ $a =~ ^[1-9][0-9]*$ ]] && ((a <= NHOSTS)) || hdie "$1" "$CMD" "no such host (the lab has h1..h$NHOSTS)"
	set_host "$a"
	[[ -e /run/netns/$NS ]] ||
		hdie "$H" "$CMD" "network namespace $NS is missing (lab half torn down? run '$PROG up --name $NAME')"
}

# sshd_pid: SPID = pid of host $I's listening sshd, if it is alive and in the host's network namespace
sshd_pid() {
	local pid="" comm=""
	SPID=
	[[ -s $HD/sshd.pid ]] || return 1
	read -r pid <"$HD/sshd.pid" || [[ -n $pid ]] || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ /proc/$pid/ns/net -ef /run/netns/$NS ]] || return 1 # a zombie has no namespace links
	{ read -r comm <"/proc/$pid/comm"; } 2>/dev/null || return 1
	[[ $comm == sshd ]] || return 1
	SPID=$pid
}

alive() { # alive PID: the process exists and is no zombie (a slow init may reap late)
	local st
	{ read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
	st=${st##*) }
	[[ ${st:0:1} != Z ]]
}

# ns_pids NSFILE...: PIDS = the processes whose network namespace is one of these (no forks: [[ -ef ]])
ns_pids() {
	local p f
	PIDS=()
	for p in /proc/[0-9]*; do
		[[ $p/ns/net -ef /proc/$$/ns/net ]] && continue # the common case: the root namespace
		for f in "$@"; do
			if [[ $p/ns/net -ef $f ]]; then
				PIDS+=("${p#/proc/}")
				break
			fi
		done
	done
}

# kill_ns NSFILE...: kill -9 every process in these namespaces until none is left
kill_ns() {
	local try
	(($#)) || return 0
	for ((try = 0; try < 100; try++)); do
		ns_pids "$@"
		((${#PIDS[@]})) || return 0
		kill -9 "${PIDS[@]}" 2>/dev/null || true
		sleep 0.02
	done
	echo "$PROG: lab $NAME: processes survive kill -9 in ${*##*/}: ${PIDS[*]}" >&2
	return 1
}

# ---------------------------------------------------------------- the host's view: hostname and mounts
# sh snippet that builds a host's private mount and UTS view, then runs the rest of the script;
# positional args: HOST HOSTDIR LABDIR SHADOW, then the rest's own. Once `slurm` ran, the host also gets the
# lab's Slurm config dir as /etc/slurm and its own munged socket dir as /run/munge (see cmd_slurm). Every host
# gets the lab-wide DIR/shared as /shared. Where podman is installed (see write_containers_etc), the host gets its
# own /etc/containers (HOSTDIR/containers/etc), a fresh tmpfs per boot at /srv/node/containers/run (runroot and
# podman's tmp_dir: a killed and restarted host comes up as after a reboot; its runc/ is the host's /run/runc,
# runc's state) and /srv/node/containers/lib as /var/lib/containers (podman's blob-info cache); the image store
# itself is /srv/node/containers/storage.
HOSTVIEW='set -e
hostname "$1"
mount --bind "$2/srv" /srv
mount --bind "$2/bin" /usr/local/bin
mount --bind "$3/etc_hosts" /etc/hosts
mount --bind "$3/home" /root
if [ -n "$4" ]; then mount --bind "$4" /etc/shadow; fi
if [ -d "$3/slurm/etc" ]; then mkdir -p /etc/slurm && mount --bind "$3/slurm/etc" /etc/slurm; fi
if [ -d "$2/munge" ]; then mkdir -p /run/munge && mount --bind "$2/munge" /run/munge; fi
if [ -d "$3/shared" ]; then mkdir -p /shared && mount --bind "$3/shared" /shared; fi
if [ -f "$3/slurm/adopt" ]; then
	mount --bind "$3/adopt/passwd" /etc/passwd
	if [ "$1" = h1 ]; then mount --bind "$3/adopt/pam.d/sshd-login" /etc/pam.d/sshd
	else mount --bind "$3/adopt/pam.d/sshd-compute" /etc/pam.d/sshd; fi
fi
if [ -d "$2/containers/etc" ]; then
	mkdir -p "$2/srv/node/containers/run" "$2/srv/node/containers/lib" /etc/containers /var/lib/containers
	mount --bind "$2/containers/etc" /etc/containers
	mount -t tmpfs -o mode=0700,size=256m tmpfs /srv/node/containers/run
	mount --bind /srv/node/containers/lib /var/lib/containers
	mkdir -p /run/runc /srv/node/containers/run/runc && mount --bind /srv/node/containers/run/runc /run/runc
fi
shift 4
'
SHADOW=""

LOGMARK='=== lab.sh: starting sshd'

# launch_sshd: stop host $I's sshd if it runs and start a new one in the background (LPID = the launcher);
# collect with launched
launch_sshd() {
	local try
	if sshd_pid; then
		kill -TERM "$SPID" 2>/dev/null || true
		for ((try = 0; try < 100; try++)); do
			alive "$SPID" || break
			sleep 0.02
		done
		kill -9 "$SPID" 2>/dev/null || true
	fi
	rm -f "$HD/sshd.pid" "$HD/start.err"
	printf '%s %(%F %T)T ===\n' "$LOGMARK" -1 >>"$HD/sshd.log"
	nsenter --net="/run/netns/$NS" unshare --mount --uts --propagation private \
		/bin/sh -c "$HOSTVIEW"'exec "$1" -f "$2/sshd_config" -E "$2/sshd.log"' \
		sh "$H" "$HD" "$DIR" "$SHADOW" "$SSHD" "$HD" </dev/null >/dev/null 2>"$HD/start.err" 9>&- &
	LPID=$!
}

launched() { # launched LPID: the launcher's result (sshd daemonizes, so this is quick)
	local err="" rc=0
	wait "$1" || rc=$?
	((rc)) || return 0
	if [[ -s $HD/start.err ]]; then err=$(<"$HD/start.err"); fi
	hdie "$H" "start sshd" "$SSHD exited with status $rc${err:+: ${err//$'\n'/ }}$(sshd_log_tail)"
}

sshd_log_tail() { # the last log lines since the latest start, and where the log is
	local line lines=() n
	if [[ -f $HD/sshd.log ]]; then
		while IFS= read -r line; do
			if [[ $line == "$LOGMARK"* ]]; then lines=(); else lines+=("$line"); fi
		done <"$HD/sshd.log"
		n=$((${#lines[@]} > 3 ? ${#lines[@]} - 3 : 0))
		((${#lines[@]} == 0)) || printf '; sshd.log says: %s' "${lines[*]:n}"
	fi
	printf ' (log: %s)' "$HD/sshd.log"
}

sshd_failed() { # sshd logged a fatal error since the latest start
	local line bad=1
	[[ -f $HD/sshd.log ]] || return 1
	while IFS= read -r line; do
		if [[ $line == "$LOGMARK"* ]]; then
			bad=1
		elif [[ ${line,,} == *fatal* || ${line,,} == *"cannot bind"* ]]; then
			bad=0
		fi
	done <"$HD/sshd.log"
	return $bad
}

# wait_sshd MODE IDX...: wait until each host's sshd wrote its pid file (it does so after listening) and
# accepts TCP on port 22. MODE bridge: connect over the bridge from the root namespace (no forks); MODE local:
# from inside the host (works while its link is cut).
wait_sshd() {
	local mode=$1 i deadline start pending left checked=0 conns c fd banner rt
	shift
	pending=("$@")
	WHY=()
	now_ms
	start=$NOW deadline=$((NOW + WAIT * 1000))
	while ((${#pending[@]})); do
		left=() conns=()
		now_ms
		for i in "${pending[@]}"; do
			set_host "$i"
			if sshd_pid; then
				if [[ $mode == bridge ]]; then
					# connect to all first, read the banners after: the sshds answer in parallel
					if { exec {fd}<>"/dev/tcp/$ADDR/22"; } 2>/dev/null; then
						conns+=("$i:$fd")
						continue
					fi
				else
					nsenter --net="/run/netns/$NS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/22; read -r -t 5 l <&3; [[ $l == SSH-* ]]' 2>/dev/null && continue
				fi
			elif ((NOW - start > 1000 + checked * 500)) && sshd_failed; then
				hdie "$H" "start sshd" "sshd exited$(sshd_log_tail)"
			fi
			left+=("$i")
		done
		rt=2 # seconds for a banner; after one silent port the others get less (they had the time already)
		for c in "${conns[@]}"; do
			i=${c%%:*} fd=${c#*:} banner=""
			{ read -r -t "$rt" banner <&"$fd"; } 2>/dev/null || rt=0.2
			exec {fd}>&-
			if [[ $banner != SSH-* ]]; then # not yet, or something else holds port 22
				left+=("$i")
				WHY[i]="port 22 accepts TCP but sends no SSH banner"
			fi
		done
		if ((NOW - start > 1000 + checked * 500)); then checked=$((checked + 1)); fi
		pending=("${left[@]}")
		((${#pending[@]})) || break
		if ((NOW > deadline)); then
			set_host "${pending[0]}"
			hdie "$H" "wait for sshd" "${WHY[${pending[0]}]:-$ADDR:22 does not accept TCP} after ${WAIT}s (pending: $(printf 'h%s ' "${pending[@]}"))$(sshd_log_tail)"
		fi
		sleep 0.03
	done
}

# ---------------------------------------------------------------- shaping
tbf_burst() { # bytes: 100000 (as measured in LAB.md up to 1gbit), more above 1gbit so tbf can reach the rate
	awk -v r="${1,,}" 'BEGIN {
		n = r + 0; u = substr(r, 1, length(r) - 3); m = (r ~ /bps$/) ? 1 : 1 / 8
		p = substr(u, length(u), 1)
		if (p == "k") m *= 1e3; else if (p == "m") m *= 1e6; else if (p == "g") m *= 1e9; else if (p == "t") m *= 1e12
		b = n * m / 1250; if (b < 100000) b = 100000
		printf "%d\n", b }'
}

veth_rate() { # veth_rate VETH: the rate of the tbf on the bridge side of a host's link (what cap set), if any
	tc qdisc show dev "$1" root 2>/dev/null | awk '$2 == "tbf" { for (i = 1; i < NF; i++) if ($i == "rate") print $(i + 1) }'
}

shape_host() { # shape_host RATE: tbf on both directions of host $I
	local rate=$1 burst err
	valid_rate "$rate" || hdie "$H" cap "bad rate '$rate' (examples: 100mbit, 1gbit, 500kbit)"
	burst=$(tbf_burst "$rate")
	rm -f "$HD/cap-to" # the tbf replaces cap-to's htb
	err=$(nsenter --net="/run/netns/$NS" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms 2>&1) ||
		hdie "$H" cap "tc on eth0 in $NS (host transmit): $err"
	err=$(tc qdisc replace dev "$VETH" root tbf rate "$rate" burst "$burst" latency 20ms 2>&1) ||
		hdie "$H" cap "tc on $VETH (host receive): $err"
}

# shape_peers RATE PEER_ADDR...: what host $I sends to the peers at RATE, the rest at the host's cap (its
# receive side's tbf, which stays) or unshaped. The peers are kept in HD/cap-to (RATE, then one address a line)
# so that a second call adds to them: the qdisc is built again whole.
shape_peers() {
	local rate=$1 base err old a
	shift
	valid_rate "$rate" || hdie "$H" cap-to "bad rate '$rate' (examples: 100mbit, 1gbit, 500kbit)"
	if [[ -f $HD/cap-to ]]; then
		old=$(head -n 1 "$HD/cap-to")
		[[ ${old,,} == "${rate,,}" ]] || hdie "$H" cap-to "already shapes some peers at $old; one rate a host ('$PROG uncap' first)"
	fi
	base=$(veth_rate "$VETH")
	base=${base:-10gbit}
	{ [[ -f $HD/cap-to ]] && tail -n +2 "$HD/cap-to"; printf '%s\n' "$@"; } | sort -u >"$HD/cap-to.peers"
	in_ns() { nsenter --net="/run/netns/$NS" "$@"; }
	# Built again whole (htb has no change): the old root goes first.
	in_ns tc qdisc del dev eth0 root 2>/dev/null || true
	err=$(in_ns tc qdisc add dev eth0 root handle 1: htb default 10 2>&1 &&
		in_ns tc class add dev eth0 parent 1: classid 1:10 htb rate "$base" ceil "$base" 2>&1 &&
		in_ns tc class add dev eth0 parent 1: classid 1:20 htb rate "$rate" ceil "$rate" 2>&1) ||
		hdie "$H" cap-to "tc htb on eth0 in $NS: $err"
	while read -r a; do
		err=$(in_ns tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst "$a/32" flowid 1:20 2>&1) ||
			hdie "$H" cap-to "tc filter for $a on eth0 in $NS: $err"
	done <"$HD/cap-to.peers"
	# Recorded once it is in place.
	{ echo "$rate"; cat "$HD/cap-to.peers"; } >"$HD/cap-to.tmp" && mv "$HD/cap-to.tmp" "$HD/cap-to"
	rm -f "$HD/cap-to.peers"
}

unshape_host() {
	local err
	rm -f "$HD/cap-to"
	if nsenter --net="/run/netns/$NS" tc qdisc show dev eth0 root 2>/dev/null | grep -Eq '^qdisc (tbf|htb)'; then
		err=$(nsenter --net="/run/netns/$NS" tc qdisc del dev eth0 root 2>&1) || hdie "$H" uncap "tc on eth0 in $NS: $err"
	fi
	if tc qdisc show dev "$VETH" root 2>/dev/null | grep -q '^qdisc tbf'; then
		err=$(tc qdisc del dev "$VETH" root 2>&1) || hdie "$H" uncap "tc on $VETH: $err"
	fi
}

# ---------------------------------------------------------------- files
write_known_hosts() { # DIR/known_hosts and DIR/home/.ssh/known_hosts from every host's current key (atomic)
	local name addr rest typ key tmp=$DIR/.known_hosts.new
	while IFS=$'\t' read -r name addr rest; do
		read -r typ key rest <"$DIR/hosts/$name/ssh_host_ed25519_key.pub"
		printf '%s,%s %s %s\n%s %s %s\n' "$name" "$addr" "$typ" "$key" "$addr" "$typ" "$key"
	done <"$DIR/hosts.tsv" >"$tmp"
	chmod 644 "$tmp"
	cp "$tmp" "$DIR/home/.ssh/.known_hosts.new"
	mv -f "$DIR/home/.ssh/.known_hosts.new" "$DIR/home/.ssh/known_hosts"
	mv -f "$tmp" "$DIR/known_hosts"
}

write_sshd_config() {
	local pam=no
	if [[ -f $DIR/slurm/adopt ]]; then pam=yes; fi # slurm --adopt: pam_slurm_adopt in the account phase
	printf '%s\n' \
		"# gpuaccept lab $NAME, host $H ($ADDR)" \
		"Port 22" \
		"HostKey $HD/ssh_host_ed25519_key" \
		"PidFile $HD/sshd.pid" \
		"PermitRootLogin prohibit-password" \
		"PubkeyAuthentication yes" \
		"AuthorizedKeysFile .ssh/authorized_keys" \
		"PasswordAuthentication no" \
		"KbdInteractiveAuthentication no" \
		"UsePAM $pam" \
		"UseDNS no" \
		"MaxStartups 200:30:400" \
		"MaxSessions 100" \
		"ClientAliveInterval 0" \
		"AllowTcpForwarding yes" \
		"PrintMotd no" \
		"SetEnv GPUACCEPT_SYSFS_IB=/srv/gpuaccept-standin/sys/class/infiniband" \
		"LogLevel VERBOSE" \
		"Subsystem sftp internal-sftp" >"$HD/sshd_config"
}

# ---------------------------------------------------------------- containers
# Where podman is installed, up gives every host its own /etc/containers (HOSTDIR/containers/etc, mounted by
# HOSTVIEW), so that plain podman commands over ssh use the host's own store (/srv/node/containers/storage) with
# the settings LAB.md found to work in a namespace host: cgroupfs (no systemd), file events, runc (crun fails in
# this cgroup hybrid mode), file locks under the per-boot tmpfs (the default SHM lock segment
# /dev/shm/libpod_lock would be one for the whole machine, and a host's reboot refresh frees all of its locks),
# and the host network for containers (a container's processes then stay in the host's network namespace, so
# kill and down end them; no CNI bridge or iptables per host). The rest of /etc/containers (policy.json,
# registries.conf, ...) is copied from the machine's.
CONTAINERS_DRIVER="" # overlay, or vfs where overlay cannot work on the lab dir's filesystem (set by up)
# write_containers_etc DIR: the /etc/containers every host gets a copy of (the paths in it are the same on
# every host; each host's /srv is its own)
write_containers_etc() {
	local etc=$1 f
	mkdir -p "$etc"
	if [[ -d /etc/containers ]]; then
		for f in /etc/containers/*; do
			case ${f##*/} in
			containers.conf | storage.conf | libpod.conf | '*') ;;
			*) cp -a "$f" "$etc/" ;;
			esac
		done
	fi
	[[ -f $etc/policy.json ]] ||
		printf '{\n    "default": [\n        {\n            "type": "insecureAcceptAnything"\n        }\n    ]\n}\n' >"$etc/policy.json"
	printf '%s\n' \
		"# gpuaccept lab $NAME: written by $PROG up; the host's own image store (its /srv is its own)" \
		"[storage]" \
		"driver = \"$CONTAINERS_DRIVER\"" \
		"graphroot = \"/srv/node/containers/storage\"" \
		"runroot = \"/srv/node/containers/run/storage\"" >"$etc/storage.conf"
	printf '%s\n' \
		"# gpuaccept lab $NAME: written by $PROG up (see LAB.md, containers on lab hosts)" \
		"[containers]" \
		"default_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]" \
		"netns = \"host\"" \
		"" \
		"[engine]" \
		"cgroup_manager = \"cgroupfs\"" \
		"events_logger = \"file\"" \
		"lock_type = \"file\"" \
		"tmp_dir = \"/srv/node/containers/run/libpod\"" \
		"image_copy_tmp_dir = \"/srv/node/containers/tmp\"" >"$etc/containers.conf"
	if command -v runc >/dev/null; then echo 'runtime = "runc"' >>"$etc/containers.conf"; fi
	chmod 644 "$etc/storage.conf" "$etc/containers.conf"
}

containers_driver() { # CONTAINERS_DRIVER for the lab dir: overlay needs the module and a non-overlay upper fs
	CONTAINERS_DRIVER=vfs
	grep -qw overlay /proc/filesystems 2>/dev/null || modprobe overlay 2>/dev/null || true
	if grep -qw overlay /proc/filesystems 2>/dev/null && [[ $(stat -f -c %T "$DIR") != overlayfs ]]; then
		CONTAINERS_DRIVER=overlay
	fi
}

# ---------------------------------------------------------------- slurm
# The lab's Slurm cluster (cmd_slurm): a munged per host, slurmctld on h1, a slurmd per host, each started inside
# its host's live view (joined through the host's sshd, as exec does), so they die with the host (kill, down).
# Files: DIR/slurm/etc/slurm.conf (bind-mounted as every host's /etc/slurm, so slurm commands run over ssh or exec
# find it without SLURM_CONF), DIR/slurm/munge.key, DIR/slurm/state/, DIR/slurm/slurmctld.{log,pid}; per host
# DIR/hosts/hI/munge/ (bind-mounted as the host's /run/munge: its own munged's socket, munged.{log,pid,seed}),
# DIR/hosts/hI/slurmd/ (spool) and DIR/hosts/hI/slurmd.{log,pid}.
SPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SCONF="" CLUSTER="" # DIR/slurm/etc/slurm.conf and the cluster name, set by cmd_slurm
RESTARTED_AT=0 STOPPED=0 # when stop_slurm_daemons stopped them (epoch seconds, for wait_slurm_idle), how many

# the bind mounts of a live host's view, added once (sh snippet; args: SLURM_ETC MUNGE_DIR, then the rest's own)
SLURMVIEW='set -e
[ /etc/slurm -ef "$1" ] || mount --bind "$1" /etc/slurm
[ /run/munge -ef "$2" ] || mount --bind "$2" /run/munge
shift 2
'

# daemon_up PIDFILE COMM: the pid in PIDFILE is alive, named COMM and in host $I's network namespace
daemon_up() {
	local pid="" comm=""
	[[ -s $1 ]] || return 1
	read -r pid <"$1" || [[ -n $pid ]] || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ /proc/$pid/ns/net -ef /run/netns/$NS ]] || return 1
	{ read -r comm <"/proc/$pid/comm"; } 2>/dev/null || return 1
	[[ $comm == "$2" ]] || return 1
	alive "$pid"
}

# in_host CMD...: run CMD in host $I's live view (its sshd's network, mount and UTS namespaces), in /root, with a
# clean environment but SLURM_CONF; without the lock fd (daemons would hold the lab's lock forever)
in_host() {
	sshd_pid || hdie "$H" "$CMD" "sshd is down, so the host's view is gone (run '$PROG start --name $NAME $H' first)"
	nsenter --target "$SPID" --net --mount --uts -- env -i -C /root PATH="$SPATH" HOME=/root SLURM_CONF="$SCONF" \
		"$@" </dev/null 9>&-
}

log_tail() { # log_tail FILE: its last 3 lines and where it is, for an error message
	local lines=()
	if [[ -s $1 ]]; then
		mapfile -t lines < <(tail -n 3 "$1")
		printf '; %s says: %s' "${1##*/}" "${lines[*]}"
	fi
	printf ' (log: %s)' "$1"
}

write_slurm_conf() {
	local cpus tmp=$DIR/slurm/etc/.slurm.conf.new
	# what slurmd will report (every host has this machine's CPUs); config_overrides below keeps a node in
	# service should its count differ anyway
	cpus=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=.* CPUs=\([0-9][0-9]*\) .*/\1/p')
	[[ $cpus =~ ^[1-9][0-9]*$ ]] || cpus=$(nproc 2>/dev/null) || cpus=1
	local extra=()
	# --adopt: an extern step on every node of a job at allocation, the one pam_slurm_adopt adopts sessions into
	if ((ADOPT)); then extra+=("PrologFlags=Contain"); fi
	# --gres: GresTypes and each run of hosts with the same GRES on its own NodeName line
	local gres_types=() nodes=()
	if any_gres; then gres_types=("GresTypes=gpu"); fi
	local names addrs gres
	while read -r names addrs gres; do
		nodes+=("NodeName=$names NodeAddr=$addrs CPUs=$cpus${gres:+ Gres=$gres} State=UNKNOWN")
	done < <(gres_runs '%s %s %s\n')
	printf '%s\n' \
		"# gpuaccept lab $NAME: written by $PROG slurm; every host's /etc/slurm/slurm.conf" \
		"ClusterName=$CLUSTER" \
		"SlurmctldHost=h1($SUBNET.11)" \
		"SlurmUser=root" \
		"SlurmdUser=root" \
		"AuthType=auth/munge" \
		"CredType=cred/munge" \
		"StateSaveLocation=$DIR/slurm/state" \
		"SlurmctldPidFile=$DIR/slurm/slurmctld.pid" \
		"SlurmctldLogFile=$DIR/slurm/slurmctld.log" \
		"SlurmdSpoolDir=$DIR/hosts/%n/slurmd" \
		"SlurmdPidFile=$DIR/hosts/%n/slurmd.pid" \
		"SlurmdLogFile=$DIR/hosts/%n/slurmd.log" \
		"TmpFS=$DIR/hosts/%n/tmp" \
		"SlurmdParameters=config_overrides" \
		"${extra[@]}" \
		"ProctrackType=proctrack/linuxproc" \
		"TaskPlugin=task/none" \
		"JobAcctGatherType=jobacct_gather/none" \
		"AccountingStorageType=accounting_storage/none" \
		"SelectType=select/cons_tres" \
		"SelectTypeParameters=CR_CPU" \
		"SchedulerType=sched/backfill" \
		"MpiDefault=none" \
		"ReturnToService=2" \
		"SlurmdTimeout=30" \
		"KillWait=5" \
		"MailProg=/bin/true" \
		"${gres_types[@]}" \
		"${nodes[@]}" \
		"PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >"$tmp"
	chmod 644 "$tmp"
	mv -f "$tmp" "$SCONF"
	write_gres_conf
}

# ---------------------------------------------------------------- slurm --gres (see the header)
HOST_GRES=() # HOST_GRES[i]: host i's GPU GRES ("" none, else gpu:N or gpu:TYPE:N), set by gres_plan

valid_gres() { [[ $1 =~ ^gpu(:[A-Za-z][A-Za-z0-9_.-]{0,31})?:[0-9]{1,4}$ ]]; }

# gres_plan: HOST_GRES from --gres (every host) and --gres-on HOST=SPEC (that host); a count of 0 is no GRES
gres_plan() {
	local i spec g
	if [[ -n $GRES ]]; then valid_gres "$GRES" || usage_die "bad --gres '$GRES': gpu:N or gpu:TYPE:N"; fi
	for ((i = 1; i <= NHOSTS; i++)); do HOST_GRES[i]=$GRES; done
	for spec in "${GRES_ON[@]}"; do
		g=${spec#*=}
		[[ $spec == *=* ]] && valid_gres "$g" || usage_die "bad --gres-on '$spec': HOST=gpu:N or HOST=gpu:TYPE:N"
		host_arg "${spec%%=*}"
		HOST_GRES[I]=$g
	done
	for ((i = 1; i <= NHOSTS; i++)); do
		[[ ${HOST_GRES[i]} != *:0 ]] || HOST_GRES[i]=""
	done
}

any_gres() {
	local i
	for ((i = 1; i <= NHOSTS; i++)); do [[ -z ${HOST_GRES[i]} ]] || return 0; done
	return 1
}

# gres_runs FORMAT: one line per run of consecutive hosts with the same GRES, printf'd with FORMAT and the args
# NAMES ADDRS GRES (h[2-4] 10.x.y.[12-14] gpu:8; a lone host by its name)
gres_runs() {
	local i=1 j
	while ((i <= NHOSTS)); do
		j=$i
		while ((j < NHOSTS)) && [[ ${HOST_GRES[j + 1]} == "${HOST_GRES[i]}" ]]; do j=$((j + 1)); done
		if ((i == j && NHOSTS > 1)); then
			printf "$1" "h$i" "$SUBNET.$((10 + i))" "${HOST_GRES[i]}"
		else
			printf "$1" "h[$i-$j]" "$SUBNET.[$((10 + i))-$((10 + j))]" "${HOST_GRES[i]}"
		fi
		i=$((j + 1))
	done
}

gres_summary() { # h[1-2] gpu:8, h3 gpu:4, h4 none
	local names gres out=""
	while read -r names _ gres; do out+="${out:+, }$names ${gres:-none}"; done < <(gres_runs '%s %s %s\n')
	echo "$out"
}

# write_gres_conf: DIR/slurm/etc/gres.conf (the hosts' /etc/slurm/gres.conf), AutoDetect off, each host's GPUs as
# File=DIR/slurm/gres/gpu[0-N]: stand-in device nodes, character devices 1,3 (what /dev/null is). Slurm 22.05's
# gres/gpu counts no GPU without File (a Count-only line, or one with Flags=CountOnly, registers 0 and the node
# goes INVAL: "gres/gpu count reported lower than configured"), and takes only a character or block device as one.
# Removed when no host has GRES.
write_gres_conf() {
	local gconf=$DIR/slurm/etc/gres.conf tmp=$DIR/slurm/etc/.gres.conf.new dev=$DIR/slurm/gres names gres typ cnt i max=0
	if ! any_gres; then
		rm -f "$gconf"
		return
	fi
	for ((i = 1; i <= NHOSTS; i++)); do
		[[ -z ${HOST_GRES[i]} ]] || ((10#${HOST_GRES[i]##*:} <= max)) || max=$((10#${HOST_GRES[i]##*:}))
	done
	mkdir -p "$dev"
	for ((i = 0; i < max; i++)); do
		[[ -c $dev/gpu$i ]] || mknod -m 666 "$dev/gpu$i" c 1 3 || die "slurm --gres: cannot make the stand-in device $dev/gpu$i"
	done
	{
		echo "# gpuaccept lab $NAME: written by $PROG slurm --gres; every host's /etc/slurm/gres.conf"
		echo "# (no GPUs: the files are stand-in character devices 1,3, what /dev/null is)"
		echo "AutoDetect=off"
		while read -r names _ gres; do
			[[ -n $gres ]] || continue
			cnt=$((10#${gres##*:})) typ=${gres#gpu} typ=${typ%:*} typ=${typ#:}
			if ((cnt == 1)); then i=$dev/gpu0; else i="$dev/gpu[0-$((cnt - 1))]"; fi
			echo "NodeName=$names Name=gpu${typ:+ Type=$typ} Count=$cnt File=$i"
		done < <(gres_runs '%s %s %s\n')
	} >"$tmp"
	chmod 644 "$tmp"
	mv -f "$tmp" "$gconf"
}

# stop_slurm_daemons: TERM slurmctld and every slurmd (a GRES change needs both to start again: slurmd reads
# gres.conf and slurmctld GresTypes only when they start), then wait until each is gone (KILL after WAIT s)
stop_slurm_daemons() {
	local i pid pids=() try
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		if daemon_up "$HD/slurmd.pid" slurmd; then read -r pid <"$HD/slurmd.pid"; pids+=("$pid"); fi
	done
	set_host 1
	if daemon_up "$DIR/slurm/slurmctld.pid" slurmctld; then read -r pid <"$DIR/slurm/slurmctld.pid"; pids+=("$pid"); fi
	RESTARTED_AT=$(date +%s) STOPPED=${#pids[@]}
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do
		for ((try = 0; try < WAIT * 50; try++)); do
			alive "$pid" || break
			sleep 0.02
		done
		if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
	done
}

# wait_slurm_idle: until sinfo on h1 shows every host idle; a dead daemon or the deadline fails naming the host
wait_slurm_idle() {
	local i start deadline out node state reason pending
	declare -A st resumed=()
	now_ms
	start=$NOW deadline=$((NOW + WAIT * 1000))
	while :; do
		set_host 1
		st=()
		out=$(in_host sinfo -h -N -o '%N %T %E' 2>&1) || out=""
		while read -r node state reason; do
			if [[ -n $node ]]; then st[$node]=$state; fi
			# drained by the lab's own GRES change (registered before gres.conf said as much; the drain outlives
			# the daemons in the state dir): back into service once, the next registration decides
			if [[ $reason == "gres/"*" count reported lower than configured"* && -z ${resumed[$node]:-} ]]; then
				resumed[$node]=1
				in_host scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
			fi
		done <<<"$out"
		if ((RESTARTED_AT)); then # daemons restarted: idle once slurmd registered again, not as the state dir says
			out=$(in_host scontrol show node -o 2>&1) || out=""
			while read -r node state; do
				[[ -z $node || ${st[$node]:-} != idle ]] || ! [[ $state < $(date -u -d "@$RESTARTED_AT" +%Y-%m-%dT%H:%M:%S) ]] ||
					st[$node]="idle, slurmd not registered again"
			done < <(sed -n 's/^NodeName=\([^ ]*\) .*SlurmdStartTime=\([^ ]*\).*/\1 \2/p' <<<"$out")
		fi
		pending=()
		for ((i = 1; i <= NHOSTS; i++)); do
			# planned is idle, earmarked by the backfill scheduler for a pending job: a job cancelled before it
			# ran (a test's allocation that was not granted) leaves the mark until the next backfill cycle, 30 s
			[[ ${st[h$i]:-} == idle || ${st[h$i]:-} == planned ]] || pending+=("$i")
		done
		((${#pending[@]})) || return 0
		now_ms
		if ((NOW - start > 1000)); then # the daemons had time to write their pid files
			set_host 1
			daemon_up "$DIR/slurm/slurmctld.pid" slurmctld ||
				hdie h1 slurm "slurmctld is not running$(log_tail "$DIR/slurm/slurmctld.log")"
			for i in "${pending[@]}"; do
				set_host "$i"
				daemon_up "$HD/slurmd.pid" slurmd || hdie "$H" slurm "slurmd is not running$(log_tail "$HD/slurmd.log")"
			done
		fi
		if ((NOW > deadline)); then
			set_host "${pending[0]}"
			hdie "$H" slurm "node state is '${st[$H]:-not listed by sinfo}', not idle, after ${WAIT}s (pending: $(printf 'h%s ' "${pending[@]}"))$(log_tail "$HD/slurmd.log")$(log_tail "$DIR/slurm/slurmctld.log")"
		fi
		sleep 0.1
	done
}

# ---------------------------------------------------------------- storage
# The lab's storage host (cmd_storage): network namespace NAME-st at SUBNET.2 on the bridge (veth TAGvs), named
# "storage" in every host's /etc/hosts; no sshd, no private mounts, just a static HTTP server (busybox httpd:
# Range requests and sendfile; python3 -m http.server where busybox has no httpd). Made on first use; kill, cut,
# restore, cap, uncap and ps take "storage" as the host; down removes it. Files: DIR/storage/{httpd.log,httpd.conf}.
cmd_storage() {
	local src err bb py srv=() deadline lpid
	((${#ARGS[@]} == 1)) || usage_die "usage: $PROG storage [--name NAME] [--port PORT] DIR"
	[[ $PORT =~ ^[0-9]+$ ]] && ((10#$PORT >= 1 && 10#$PORT <= 65535)) || usage_die "bad --port '$PORT'"
	PORT=$((10#$PORT))
	src=${ARGS[0]}
	[[ -d $src ]] || usage_die "storage: $src is not a directory"
	src=$(cd "$src" && pwd -P)
	[[ $src =~ ^/[A-Za-z0-9._/+-]*$ ]] || usage_die "storage: '$src': no spaces or special characters, please"
	require_lab
	bb=$(command -v busybox || true)
	py=$(command -v /usr/bin/python3 || command -v python3 || true)
	if [[ -n $bb ]] && "$bb" httpd --help >/dev/null 2>&1; then
		srv=("$bb" httpd -f -v -p "0.0.0.0:$PORT" -h "$src" -c "$DIR/storage/httpd.conf")
	elif [[ -n $py ]]; then
		srv=("$py" -m http.server --bind 0.0.0.0 --directory "$src" "$PORT")
	else
		die "storage: no HTTP server (apt-get install busybox-static, or python3)"
	fi
	lock
	set_storage
	mkdir -p "$HD"
	: >"$HD/httpd.conf" # busybox httpd: an empty config serves everything (and no /etc/httpd.conf is read)
	if [[ ! -e /run/netns/$NS ]]; then
		err=$(printf '%s\n' "netns add $NS" "link add $VETH type veth peer name eth0 netns $NS" "link set $VETH master $BR up" |
			ip -batch - 2>&1) || hdie "$H" storage "creating its namespace failed: ${err//$'\n'/ }"
		err=$(printf 'addr add %s/24 dev eth0\nlink set lo up\nlink set eth0 up\n' "$ADDR" | ip -n "$NS" -batch - 2>&1) ||
			hdie "$H" storage "configuring eth0 in $NS failed: ${err//$'\n'/ }"
	fi
	kill_ns "/run/netns/$NS" || hdie "$H" storage "the previous server survives kill -9"
	printf '=== %s: serving %s on port %s %(%F %T)T ===\n' "$PROG" "$src" "$PORT" -1 >>"$HD/httpd.log"
	nsenter --net="/run/netns/$NS" setsid "${srv[@]}" </dev/null >>"$HD/httpd.log" 2>&1 9>&- &
	lpid=$! # nsenter and setsid exec, so this is the server
	# up once the port accepts, checked inside the namespace (works while the link is cut)
	now_ms
	deadline=$((NOW + WAIT * 1000))
	until nsenter --net="/run/netns/$NS" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' sh "$PORT" 2>/dev/null; do
		alive "$lpid" || hdie "$H" storage "${srv[0]##*/} exited$(log_tail "$HD/httpd.log")"
		now_ms
		((NOW < deadline)) || hdie "$H" storage "port $PORT does not accept TCP after ${WAIT}s$(log_tail "$HD/httpd.log")"
		sleep 0.03
	done
	# DIR/env: the LAB_STORAGE_ lines replaced
	{
		grep -v '^LAB_STORAGE_\|^export LAB_STORAGE_' "$DIR/env" || true
		printf "LAB_STORAGE_ADDR='%s'\nLAB_STORAGE_PORT='%s'\nLAB_STORAGE_URL='%s'\nLAB_STORAGE_DIR='%s'\n" \
			"$ADDR" "$PORT" "http://$ADDR:$PORT" "$src"
		printf 'export LAB_STORAGE_ADDR LAB_STORAGE_PORT LAB_STORAGE_URL LAB_STORAGE_DIR\n'
	} >"$DIR/.env.new"
	mv -f "$DIR/.env.new" "$DIR/env"
	echo "lab $NAME: storage serves $src at http://$ADDR:$PORT/ (host storage, $ADDR; ${srv[0]##*/}; log $HD/httpd.log)"
}

# ---------------------------------------------------------------- teardown
# shellcheck disable=SC2120 # keepdir is passed by up's EXIT trap
teardown() { # teardown [keepdir]: keepdir leaves DIR (its logs) for a post-mortem, down removes it later
	local keep=${1:-} f l m nsfiles=() batch=() rc=0 rest mnt mnts=()
	for f in /run/netns/"$NAME"-h* /run/netns/"$NAME"-st; do
		if [[ -e $f && ${f##*/} =~ ^${NAME}-(h[0-9]+|st)$ ]]; then nsfiles+=("$f"); fi
	done
	kill_ns "${nsfiles[@]}" || rc=1
	# the cgroups (cgroupfs: libpod_parent/libpod-ID in every hierarchy) of containers a kill left behind
	for f in "$DIR"/hosts/h*/srv/node/containers/storage/*-containers/*/; do
		f=${f%/} f=${f##*/}
		[[ $f =~ ^[0-9a-f]{64}$ ]] || continue
		for l in /sys/fs/cgroup/libpod_parent/libpod-"$f" /sys/fs/cgroup/*/libpod_parent/libpod-"$f"; do
			if [[ -d $l ]]; then rmdir "$l" 2>/dev/null || true; fi
		done
	done
	# veths first (this also removes their peers), then the bridge and the namespaces
	while read -r _ l rest; do
		l=${l%:} l=${l%@*}
		if [[ $l =~ ^${TAG}v([0-9]+|s)$ || $l == "$BR" ]]; then batch+=("link del $l"); fi
	done < <(ip -o link show 2>/dev/null)
	for f in "${nsfiles[@]}"; do batch+=("netns del ${f##*/}"); done
	if ((${#batch[@]})); then
		printf '%s\n' "${batch[@]}" | ip -force -batch - >/dev/null 2>&1 || true
	fi
	# leftovers: namespace files ip could not delete, interfaces, mounts under the lab dir in this namespace
	for f in "${nsfiles[@]}"; do
		if [[ -e $f ]]; then
			umount -l "$f" 2>/dev/null || true
			rm -f "$f" 2>/dev/null || { echo "$PROG: lab $NAME: cannot remove $f" >&2; rc=1; }
		fi
	done
	while read -r _ l rest; do
		l=${l%:} l=${l%@*}
		if [[ $l =~ ^${TAG}v([0-9]+|s)$ || $l == "$BR" ]]; then
			ip link del "$l" 2>/dev/null || { echo "$PROG: lab $NAME: cannot delete interface $l" >&2; rc=1; }
		fi
	done < <(ip -o link show 2>/dev/null)
	while read -r _ mnt rest; do
		if [[ $mnt == "$DIR" || $mnt == "$DIR"/* || $mnt =~ ^/run/netns/${NAME}-(h[0-9]+|st)$ ]]; then mnts=("$mnt" "${mnts[@]}"); fi
	done </proc/mounts
	for m in "${mnts[@]}"; do
		umount -l "$m" 2>/dev/null || { echo "$PROG: lab $NAME: cannot unmount $m" >&2; rc=1; }
	done
	[[ -z $keep ]] || return $rc
	if [[ -d $DIR ]]; then
		if [[ -f $DIR/.gpuaccept-lab ]] || [[ -z $(ls -A "$DIR") ]]; then
			rm -rf --one-file-system "$DIR" || rc=1
		else
			echo "$PROG: lab $NAME: not removing $DIR: no .gpuaccept-lab marker in it (not a lab dir?)" >&2
			rc=1
		fi
	fi
	rm -f "$RUNROOT/$NAME.dir"
	return $rc
}

# ---------------------------------------------------------------- commands
cmd_up() {
	local i o1 o2 o3 conflict p pids=() lpids=() batch=() err dirs=() newdir
	((${#ARGS[@]} == 0)) || usage_die "up takes no arguments (got: ${ARGS[*]})"
	[[ $NHOSTS =~ ^[0-9]+$ ]] && ((NHOSTS >= 1 && NHOSTS <= MAXHOSTS)) ||
		usage_die "--hosts must be 1..$MAXHOSTS, got '$NHOSTS'"
	IFS=. read -r o1 o2 o3 <<<"$SUBNET"
	[[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] && ((10#$o1 <= 255 && 10#$o2 <= 255 && 10#$o3 <= 255)) ||
		usage_die "--subnet must be three octets like 10.231.0, got '$SUBNET'"
	[[ -z $CAP ]] || valid_rate "$CAP" || usage_die "bad --cap '$CAP' (examples: 100mbit, 1gbit)"
	[[ $NEIGH == arp || $NEIGH == static ]] || usage_die "--neigh must be arp or static, got '$NEIGH'"
	need_cmds ip nsenter unshare flock ssh-keygen "$SSHD" ${CAP:+tc}
	warn_neigh_table
	lock
	# from here on a failure tears down what was built (teardown is idempotent and spares foreign dirs)
	trap 'rc=$?; if ((rc != 0)); then
		echo "$PROG: lab $NAME: up failed; tore it down, kept $DIR (logs) until $PROG down --name $NAME" >&2
		teardown keepdir >/dev/null 2>&1 || true
	fi' EXIT
	# tear down a previous lab of this name (also when it lived in another dir)
	if [[ -f $RUNROOT/$NAME.dir ]]; then
		newdir=$DIR
		read -r DIR <"$RUNROOT/$NAME.dir" || true
		if [[ -n $DIR && $DIR != "$newdir" ]]; then teardown || die "cannot tear down the previous lab (dir $DIR)"; fi
		DIR=$newdir
	fi
	teardown || die "cannot tear down the previous lab of this name"
	conflict=$(ip -o -4 addr show 2>/dev/null | awk -v p="$SUBNET." '{ split($4, a, "/"); if (index(a[1], p) == 1) print $2 }' | head -n 1)
	[[ -z $conflict ]] || die "subnet $SUBNET.0/24 is already used by interface $conflict (another lab? pick --subnet)"
	[[ -z $(ip -4 route show "$SUBNET.0/24" 2>/dev/null) ]] || die "a route to $SUBNET.0/24 exists already (pick --subnet)"
	if [[ -e $DIR ]] && [[ -n $(ls -A "$DIR" 2>/dev/null) ]]; then
		die "$DIR exists and is not empty; remove it or pick --dir"
	fi

	mkdir -p "$DIR" "$RUNROOT"
	: >"$DIR/.gpuaccept-lab"
	echo "$DIR" >"$RUNROOT/$NAME.dir"
	chmod 755 "$DIR"
	for ((i = 1; i <= NHOSTS; i++)); do dirs+=("$DIR/hosts/h$i/srv" "$DIR/hosts/h$i/bin"); done
	if command -v podman >/dev/null; then
		for ((i = 1; i <= NHOSTS; i++)); do
			p=$DIR/hosts/h$i/srv/node/containers
			dirs+=("$DIR/hosts/h$i/containers" "$p/storage" "$p/run" "$p/lib" "$p/tmp")
		done
		dirs+=(/etc/containers /var/lib/containers)
	fi
	mkdir -p /run/sshd /srv /shared "$DIR/home/.ssh" "$DIR/shared" "${dirs[@]}"
	chmod 700 "$DIR/home" "$DIR/home/.ssh"
	if command -v podman >/dev/null; then
		containers_driver
		write_containers_etc "$DIR/containers-etc"
		for ((i = 1; i <= NHOSTS; i++)); do cp -a "$DIR/containers-etc" "$DIR/hosts/h$i/containers/etc"; done
	fi

	# keys: the lab-wide identity (also the coordinator's) and one host key per host, made in parallel
	ssh-keygen -q -t ed25519 -N '' -C "gpuaccept-lab-$NAME" -f "$DIR/home/.ssh/id_ed25519" &
	pids+=($!)
	for ((i = 1; i <= NHOSTS; i++)); do
		ssh-keygen -q -t ed25519 -N '' -C "h$i.$NAME" -f "$DIR/hosts/h$i/ssh_host_ed25519_key" &
		pids+=($!)
	done

	# sshd without PAM refuses a locked root account ("!" in /etc/shadow): the hosts get an unlocked copy
	if awk -F: '$1 == "root" && $2 ~ /^!/ { found = 1 } END { exit !found }' /etc/shadow 2>/dev/null; then
		awk -F: -v OFS=: '$1 == "root" { $2 = "*" } { print }' /etc/shadow >"$DIR/shadow"
		chmod --reference=/etc/shadow "$DIR/shadow"
		chown --reference=/etc/shadow "$DIR/shadow"
		SHADOW=$DIR/shadow
	fi
	printf '%s\n' \
		"# gpuaccept lab $NAME: every host reaches every other host as root, by name or address" \
		"Host *" \
		"    User root" \
		"    IdentityFile ~/.ssh/id_ed25519" \
		"    IdentitiesOnly yes" \
		"    UserKnownHostsFile ~/.ssh/known_hosts" \
		"    GlobalKnownHostsFile /dev/null" \
		"    StrictHostKeyChecking yes" \
		"    BatchMode yes" \
		"    ConnectTimeout 10" \
		"    KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org" >"$DIR/home/.ssh/config"
	chmod 600 "$DIR/home/.ssh/config"
	: >"$DIR/home/.hushlogin"
	{
		printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
		for ((i = 1; i <= NHOSTS; i++)); do printf '%s\th%d\n' "$SUBNET.$((10 + i))" "$i"; done
		printf '%s\tstorage\n' "$SUBNET.2"
	} >"$DIR/etc_hosts"
	chmod 644 "$DIR/etc_hosts"

	# the network, in one ip batch: the bridge (the coordinator's address on it is SUBNET.1), namespaces, veths
	batch=("link add $BR type bridge" "addr add $SUBNET.1/24 dev $BR" "link set $BR up")
	: >"$DIR/hosts.tsv"
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		batch+=("netns add $NS" "link add $VETH type veth peer name eth0 netns $NS" "link set $VETH master $BR up")
		printf '%s\t%s\t%s\t%s\n' "$H" "$ADDR" "$NS" "$VETH" >>"$DIR/hosts.tsv"
		write_sshd_config
	done
	err=$(printf '%s\n' "${batch[@]}" | ip -batch - 2>&1) || die "creating the network failed: ${err//$'\n'/ }"
	local macs=()
	if [[ $NEIGH == static ]]; then read_macs; fi
	# inside each namespace, one ip batch per host, in parallel
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		{
			printf 'addr add %s/24 dev eth0\nlink set lo up\nlink set eth0 up\n' "$ADDR"
			if [[ $NEIGH == static ]]; then neighbour_lines "$i"; fi
		} | ip -n "$NS" -batch - 2>"$HD/start.err" &
		lpids+=($!)
	done
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		wait "${lpids[i - 1]}" || hdie "$H" up "configuring eth0 in $NS failed: $(<"$HD/start.err")"
	done
	for p in "${pids[@]}"; do wait "$p" || die "ssh-keygen failed"; done
	cp "$DIR/home/.ssh/id_ed25519.pub" "$DIR/home/.ssh/authorized_keys"
	chmod 600 "$DIR/home/.ssh/authorized_keys"
	cp -p "$DIR/home/.ssh/id_ed25519" "$DIR/client_ed25519"
	cp -p "$DIR/home/.ssh/id_ed25519.pub" "$DIR/client_ed25519.pub"
	write_known_hosts
	if [[ -n $CAP ]]; then
		for ((i = 1; i <= NHOSTS; i++)); do set_host "$i"; shape_host "$CAP"; done
	fi
	local names="" addrs=""
	for ((i = 1; i <= NHOSTS; i++)); do names+=" h$i" addrs+=" $SUBNET.$((10 + i))"; done
	{
		# values single-quoted and free of quotes: sourceable by sh and bash, easy to parse
		printf "LAB_NAME='%s'\nLAB_DIR='%s'\nLAB_HOSTS='%s'\nLAB_SUBNET='%s'\n" "$NAME" "$DIR" "$NHOSTS" "$SUBNET"
		printf "LAB_KEY='%s'\nLAB_KNOWN_HOSTS='%s'\n" "$DIR/client_ed25519" "$DIR/known_hosts"
		printf "LAB_HOSTNAMES='%s'\nLAB_ADDRS='%s'\n" "${names# }" "${addrs# }"
		printf "LAB_BRIDGE='%s'\nLAB_GATEWAY='%s'\nLAB_CAP='%s'\nLAB_NEIGH='%s'\n" "$BR" "$SUBNET.1" "$CAP" "$NEIGH"
		printf "LAB_SHARED='%s'\nLAB_CONTAINERS='%s'\n" "$DIR/shared" "$CONTAINERS_DRIVER"
		printf 'export LAB_NAME LAB_DIR LAB_HOSTS LAB_SUBNET LAB_KEY LAB_KNOWN_HOSTS LAB_HOSTNAMES LAB_ADDRS LAB_BRIDGE LAB_GATEWAY LAB_CAP LAB_NEIGH LAB_SHARED LAB_CONTAINERS\n'
	} >"$DIR/env"

	# the sshds, launched in parallel, then waited for over the bridge
	lpids=()
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		launch_sshd
		lpids+=("$LPID")
	done
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		launched "${lpids[i - 1]}"
	done
	local all=()
	for ((i = 1; i <= NHOSTS; i++)); do all+=("$i"); done
	wait_sshd bridge "${all[@]}"
	trap - EXIT
	if [[ -r /proc/sys/net/bridge/bridge-nf-call-iptables && $(</proc/sys/net/bridge/bridge-nf-call-iptables) == 1 ]] &&
		command -v iptables >/dev/null && iptables -S FORWARD 2>/dev/null | grep -q '^-P FORWARD DROP'; then
		echo "$PROG: lab $NAME: warning: br_netfilter is on and the FORWARD policy is DROP: host-to-host traffic may be dropped" >&2
	fi
	echo "lab $NAME: $NHOSTS hosts up on $BR ($SUBNET.0/24), dir $DIR"
}

# --neigh static: every host gets a permanent neighbour entry for every
# other host, in the ip batch that configures its eth0. Every namespace on
# a machine shares one IPv4 neighbour table, capped by the host's
# gc_thresh3 (1024 by default; measured: the 1,025th entry failed with "No
# buffer space available" whether the entries sat in one namespace or were
# split across two, and dmesg logged "neighbor table overflow"). An
# all-reduce over 128 ARP hosts wants 128x127 entries, so first connects
# failed with "No route to host" (UCX) or a failed connect (Open MPI's TCP
# BTL). Permanent entries are not counted against the cap, so with them
# both ran to the end. A real fleet's hosts each have their own table;
# this takes the lab's shared one out of the test.

# warn_neigh_table warns when an ARP-mode lab's all-to-all (each host's
# peers and its gateway, and the bridge's entry for each host) will not fit
# the shared table. It only warns: a lab that never runs a collective fits.
warn_neigh_table() {
	local f=/proc/sys/net/ipv4/neigh/default/gc_thresh3 limit need
	[[ $NEIGH == arp && -r $f ]] || return 0
	limit=$(<"$f")
	need=$((NHOSTS * (NHOSTS + 1)))
	[[ $limit =~ ^[0-9]+$ ]] && ((need > limit)) || return 0
	echo "$PROG: lab $NAME: warning: $NHOSTS hosts talking to each other need $need neighbour entries; this machine's namespaces share one table of $limit ($f): use --neigh static" >&2
}

# read_macs fills macs[i] with host i's eth0 MAC (cmd_up's local array).
read_macs() {
	local i
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		macs[i]=$(ip -n "$NS" link show eth0 | awk '/link\/ether/ {print $2}')
		[[ -n ${macs[i]} ]] || hdie "$H" up "no MAC address on eth0 in $NS"
	done
}

# neighbour_lines I prints host I's ip batch lines for every other host.
neighbour_lines() {
	local j
	for ((j = 1; j <= NHOSTS; j++)); do
		(($1 == j)) || printf 'neigh replace %s lladdr %s dev eth0 nud permanent\n' "$SUBNET.$((10 + j))" "${macs[j]}"
	done
}

cmd_down() {
	((${#ARGS[@]} == 0)) || usage_die "down takes no arguments (got: ${ARGS[*]})"
	lock
	teardown || die "teardown incomplete (see above)"
	rm -f "$RUNROOT/$NAME.lock"
	rmdir "$RUNROOT" 2>/dev/null || true
}

one_host() { # the command takes exactly HOST
	((${#ARGS[@]} == 1)) || usage_die "usage: $PROG $CMD [--name NAME] HOST"
	require_lab
	host_arg "${ARGS[0]}"
}

shadow_of_lab() { [[ ! -f $DIR/shadow ]] || SHADOW=$DIR/shadow; }

cmd_kill() {
	one_host
	lock
	kill_ns "/run/netns/$NS" || hdie "$H" kill "processes survive kill -9"
	rm -f "$HD/sshd.pid"
}

cmd_start() {
	one_host
	lock
	shadow_of_lab
	launch_sshd
	launched "$LPID"
	wait_sshd local "$I"
}

cmd_cut() {
	local err
	one_host
	lock
	err=$(ip link set "$VETH" down 2>&1) || hdie "$H" cut "ip link set $VETH down: $err"
}

cmd_restore() {
	local err
	one_host
	lock
	err=$(ip link set "$VETH" up 2>&1) || hdie "$H" restore "ip link set $VETH up: $err"
}

cmd_cap() {
	((${#ARGS[@]} == 2)) || usage_die "usage: $PROG cap [--name NAME] HOST RATE"
	require_lab
	host_arg "${ARGS[0]}"
	need_cmds tc
	lock
	shape_host "${ARGS[1]}"
}

cmd_cap_to() {
	((${#ARGS[@]} >= 3)) || usage_die "usage: $PROG cap-to [--name NAME] HOST RATE PEER..."
	require_lab
	local peers=() p self
	for p in "${ARGS[@]:2}"; do
		host_arg "$p"
		peers+=("$ADDR")
	done
	host_arg "${ARGS[0]}"
	self=$ADDR
	for p in "${peers[@]}"; do
		[[ $p != "$self" ]] || hdie "$H" cap-to "a host is not its own peer"
	done
	need_cmds tc
	lock
	shape_peers "${ARGS[1]}" "${peers[@]}"
}

cmd_uncap() {
	one_host
	need_cmds tc
	lock
	unshape_host
}

cmd_ps() {
	local list
	one_host
	ns_pids "/run/netns/$NS"
	if ((${#PIDS[@]} == 0)); then
		ps -o pid,ppid,pgid,args -p $$ | head -n 1
	else
		list=${PIDS[*]}
		ps -o pid,ppid,pgid,args -p "${list// /,}" || true
	fi
}

cmd_rekey() {
	local err
	one_host
	lock
	shadow_of_lab
	rm -f "$HD/ssh_host_ed25519_key" "$HD/ssh_host_ed25519_key.pub"
	err=$(ssh-keygen -q -t ed25519 -N '' -C "$H.$NAME" -f "$HD/ssh_host_ed25519_key" 2>&1) ||
		hdie "$H" rekey "ssh-keygen: $err"
	write_known_hosts
	launch_sshd
	launched "$LPID"
	wait_sshd local "$I"
}

cmd_exec() {
	((${#ARGS[@]} >= 2)) || usage_die "usage: $PROG exec [--name NAME] HOST CMD [ARG...]"
	require_lab
	host_arg "${ARGS[0]}"
	[[ ${ARGS[1]} != -- ]] || ARGS=("${ARGS[0]}" "${ARGS[@]:2}")
	((${#ARGS[@]} >= 2)) || usage_die "usage: $PROG exec [--name NAME] HOST [--] CMD [ARG...]"
	if sshd_pid; then
		# join the live host: its sshd's network, mount and UTS namespaces (what an ssh session sees)
		exec nsenter --target "$SPID" --net --mount --uts -- env -C /root HOME=/root "${ARGS[@]:1}" 9>&-
	fi
	# the host's sshd is down (killed): build the same view afresh
	shadow_of_lab
	exec nsenter --net="/run/netns/$NS" unshare --mount --uts --propagation private \
		/bin/sh -c "$HOSTVIEW"'cd /root; HOME=/root; export HOME; exec "$@"' \
		sh "$H" "$HD" "$DIR" "$SHADOW" "${ARGS[@]:1}" 9>&-
}

# ---------------------------------------------------------------- slurm --adopt (see the header)
ADOPT_USER=labuser ADOPT_UID=4242 ADOPT_GID=100 ADOPT_HOME=/srv/home/labuser
PAM_ADOPT="" # pam_slurm_adopt.so, found by adopt_files

# adopt_files: DIR/adopt/{passwd,pam.d/sshd-login,pam.d/sshd-compute}; rewritten in place (bind mounts hold inodes)
adopt_files() {
	local d
	for d in /lib/security /lib/x86_64-linux-gnu/security /usr/lib/x86_64-linux-gnu/security /usr/lib/security; do
		if [[ -f $d/pam_slurm_adopt.so ]]; then PAM_ADOPT=$d/pam_slurm_adopt.so; break; fi
	done
	[[ -n $PAM_ADOPT ]] || die "slurm --adopt: no pam_slurm_adopt.so (apt-get install libpam-slurm-adopt)"
	mkdir -p "$DIR/adopt/pam.d"
	# the machine's users and the lab user; "*" as its password: no shadow entry needed (pam_unix account)
	{
		awk -F: -v u="$ADOPT_USER" '$1 != u' /etc/passwd
		printf '%s:*:%s:%s:gpuaccept lab user held to pam_slurm_adopt:%s:/bin/bash\n' \
			"$ADOPT_USER" "$ADOPT_UID" "$ADOPT_GID" "$ADOPT_HOME"
	} >"$DIR/adopt/.passwd.new"
	cat "$DIR/adopt/.passwd.new" >"$DIR/adopt/passwd"
	rm -f "$DIR/adopt/.passwd.new"
	# sshd takes keys only, so PAM never authenticates; the account phase decides who is admitted
	printf '%s\n' \
		"# gpuaccept lab $NAME: written by $PROG slurm --adopt; /etc/pam.d/sshd of the login host h1" \
		"auth     required pam_deny.so" \
		"account  required pam_unix.so" \
		"session  required pam_unix.so" \
		"password required pam_deny.so" >"$DIR/adopt/.login.new"
	cat "$DIR/adopt/.login.new" >"$DIR/adopt/pam.d/sshd-login"
	printf '%s\n' \
		"# gpuaccept lab $NAME: written by $PROG slurm --adopt; /etc/pam.d/sshd of the compute hosts h2..h$NHOSTS" \
		"# pam_slurm_adopt: no job of the user on this host, no login (action_no_jobs=deny); with one, the session" \
		"# is adopted into the job's extern step (action_adopt_failure=allow, the default, admits it should that fail)" \
		"auth     required pam_deny.so" \
		"account  required pam_unix.so" \
		"account  required $PAM_ADOPT log_level=debug" \
		"session  required pam_unix.so" \
		"password required pam_deny.so" >"$DIR/adopt/.compute.new"
	cat "$DIR/adopt/.compute.new" >"$DIR/adopt/pam.d/sshd-compute"
	rm -f "$DIR/adopt/.login.new" "$DIR/adopt/.compute.new"
	chmod 644 "$DIR/adopt/passwd" "$DIR/adopt/pam.d/sshd-login" "$DIR/adopt/pam.d/sshd-compute"
}

# adopt_host on|off: host $I's live view with (without) the lab's passwd and PAM stack, its sshd_config with
# UsePAM yes (no) and its home for the lab user
adopt_host() {
	local pam=$DIR/adopt/pam.d/sshd-compute home=$HD/srv${ADOPT_HOME#/srv}
	[[ $I != 1 ]] || pam=$DIR/adopt/pam.d/sshd-login
	if [[ $1 == on ]]; then
		mkdir -p "$home/.ssh"
		cp "$DIR/home/.ssh/authorized_keys" "$home/.ssh/authorized_keys"
		chown -R "$ADOPT_UID:$ADOPT_GID" "$home"
		chmod 755 "$home"
		chmod 700 "$home/.ssh"
		chmod 600 "$home/.ssh/authorized_keys"
		in_host /bin/sh -c '[ /etc/passwd -ef "$1" ] || mount --bind "$1" /etc/passwd
[ /etc/pam.d/sshd -ef "$2" ] || mount --bind "$2" /etc/pam.d/sshd' sh "$DIR/adopt/passwd" "$pam" ||
			hdie "$H" slurm "cannot mount the lab's passwd and PAM stack in the host's view"
	else
		in_host /bin/sh -c '! [ /etc/pam.d/sshd -ef "$2" ] || umount /etc/pam.d/sshd
! [ /etc/passwd -ef "$1" ] || umount /etc/passwd' sh "$DIR/adopt/passwd" "$pam" ||
			hdie "$H" slurm "cannot unmount the lab's passwd and PAM stack in the host's view"
	fi
	write_sshd_config
}

# hup_sshd IDX...: sshd re-executes itself on SIGHUP (same pid, same view, the new sshd_config); wait until each
# listens again
hup_sshd() {
	local i try sizes=()
	for i in "$@"; do
		set_host "$i"
		sshd_pid || hdie "$H" slurm "sshd is down (run '$PROG start --name $NAME $H' first)"
		sizes[i]=$(stat -c %s "$HD/sshd.log")
		kill -HUP "$SPID"
	done
	for i in "$@"; do
		set_host "$i"
		for ((try = 0; try < WAIT * 50; try++)); do
			if tail -c "+$((sizes[i] + 1))" "$HD/sshd.log" | grep -q 'Server listening on'; then break; fi
			sleep 0.02
		done
		((try < WAIT * 50)) || hdie "$H" slurm "sshd did not listen again within ${WAIT}s of SIGHUP$(sshd_log_tail)"
	done
}

# ---------------------------------------------------------------- slurm --pyxis (see the header)
# pyxis_on: build the plugin (again when its source changed) and name it in plugstack.conf; pyxis_off removes that
pyxis_on() {
	local src=${PYXIS_SRC:-$(dirname "${BASH_SOURCE[0]}")/pyxis/spank_pyxis.c} out=$DIR/slurm/pyxis conf=$DIR/slurm/etc/plugstack.conf
	[[ -f $src ]] || die "slurm --pyxis: no plugin source $src (give --pyxis-src FILE)"
	command -v gcc >/dev/null || die "slurm --pyxis: no gcc (apt-get install gcc)"
	[[ -f /usr/include/slurm/spank.h ]] || die "slurm --pyxis: no /usr/include/slurm/spank.h (apt-get install libslurm-dev)"
	mkdir -p "$out"
	if ! cmp -s "$src" "$out/spank_pyxis.c" || [[ ! -f $out/spank_pyxis.so ]]; then
		cp "$src" "$out/.new.spank_pyxis.c"
		gcc -O2 -Wall -shared -fPIC -o "$out/.spank_pyxis.so.new" "$out/.new.spank_pyxis.c" 2>"$out/build.log" ||
			die "slurm --pyxis: building the plugin failed: $(tr '\n' ' ' <"$out/build.log")"
		mv -f "$out/.spank_pyxis.so.new" "$out/spank_pyxis.so"
		mv -f "$out/.new.spank_pyxis.c" "$out/spank_pyxis.c"
	fi
	printf '%s\n' "# gpuaccept lab $NAME: written by $PROG slurm --pyxis; every host's /etc/slurm/plugstack.conf" \
		"required $out/spank_pyxis.so runtime_path=/srv/pyxis" >"$conf.new"
	chmod 644 "$conf.new"
	mv -f "$conf.new" "$conf"
}

pyxis_off() { rm -f "$DIR/slurm/etc/plugstack.conf"; }

# cmd_slurm: (re)start what is not running of the lab's Slurm cluster, then wait until every node is idle
cmd_slurm() {
	local i p t0 err lpids=() key
	((${#ARGS[@]} == 0)) || usage_die "slurm takes no arguments (got: ${ARGS[*]})"
	require_lab
	for p in slurmctld slurmd sinfo munged runuser; do
		command -v "$p" >/dev/null || die "missing command $p (apt-get install slurmctld slurmd slurm-client munge)"
	done
	id munge >/dev/null 2>&1 || die "no user munge (apt-get install munge)"
	gres_plan
	lock
	now_ms
	t0=$NOW
	CLUSTER=${NAME,,} SCONF=$DIR/slurm/etc/slurm.conf key=$DIR/slurm/munge.key
	mkdir -p "$DIR/slurm/etc" "$DIR/slurm/state" /etc/slurm /run/munge
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		sshd_pid || hdie "$H" slurm "sshd is down, so the host's view is gone (run '$PROG start --name $NAME $H' first)"
		mkdir -p "$HD/munge" "$HD/slurmd" "$HD/tmp"
		chown munge:munge "$HD/munge"
		chmod 755 "$HD/munge"
	done
	if [[ ! -s $key ]]; then # one key per lab
		dd if=/dev/urandom of="$key.new" bs=1024 count=1 status=none || die "cannot write $key"
		chown munge:munge "$key.new"
		chmod 400 "$key.new"
		mv -f "$key.new" "$key"
	fi
	local old_conf="" ctld_was_up=0 hosts=() mode="" old_gres="" new_gres="" gres_how=""
	if [[ -f $SCONF ]]; then old_conf=$(<"$SCONF"); fi
	if [[ -f $DIR/slurm/etc/gres.conf ]]; then old_gres=$(<"$DIR/slurm/etc/gres.conf"); fi
	set_host 1
	if daemon_up "$DIR/slurm/slurmctld.pid" slurmctld; then ctld_was_up=1; fi
	write_slurm_conf
	# --gres changed (or turned off): scontrol reconfigure is not enough, slurmd reads gres.conf when it starts
	if [[ -f $DIR/slurm/etc/gres.conf ]]; then new_gres=$(<"$DIR/slurm/etc/gres.conf"); fi
	if [[ $new_gres != "$old_gres" ]]; then
		stop_slurm_daemons
		if ((STOPPED)); then gres_how=" (slurmctld and every slurmd restarted to read it)"; fi
		ctld_was_up=0
	fi
	# --adopt on (or off again): passwd, PAM stacks, sshd_config, then every sshd re-executes itself
	for ((i = 1; i <= NHOSTS; i++)); do hosts+=("$i"); done
	if ((ADOPT)); then
		adopt_files
		if [[ ! -f $DIR/slurm/adopt ]]; then mode=on; fi
		: >"$DIR/slurm/adopt"
		for i in "${hosts[@]}"; do set_host "$i"; adopt_host on; done
		hup_sshd "${hosts[@]}"
	elif [[ -f $DIR/slurm/adopt ]]; then
		mode=off
		rm -f "$DIR/slurm/adopt"
		for i in "${hosts[@]}"; do set_host "$i"; adopt_host off; done
		hup_sshd "${hosts[@]}"
	fi
	# --pyxis on (or off again): plugstack.conf, read by each srun and slurmstepd as it starts
	local pyxis_was=0
	if [[ -f $DIR/slurm/etc/plugstack.conf ]]; then pyxis_was=1; fi
	if ((PYXIS)); then pyxis_on; else pyxis_off; fi
	# every host: its mounts and munged (munged returns once its socket accepts)
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		rm -f "$HD/slurm.err"
		p=1
		if daemon_up "$HD/munge/munged.pid" munged; then p=0; fi
		in_host /bin/sh -c "$SLURMVIEW"'[ "$1" = 1 ] || exit 0
exec runuser -u munge -- munged --key-file="$2" --socket=/run/munge/munge.socket.2 --pid-file="$3/munged.pid" --log-file="$3/munged.log" --seed-file="$3/munged.seed"' \
			sh "$DIR/slurm/etc" "$HD/munge" "$p" "$key" "$HD/munge" >/dev/null 2>"$HD/slurm.err" &
		lpids+=($!)
	done
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		if ! wait "${lpids[i - 1]}"; then
			err=$(<"$HD/slurm.err")
			hdie "$H" slurm "starting munged failed${err:+: ${err//$'\n'/ }}$(log_tail "$HD/munge/munged.log")"
		fi
	done
	# slurmctld on h1, then a slurmd per host (both daemonize at once; wait_slurm_idle sees whether they live)
	set_host 1
	if ! daemon_up "$DIR/slurm/slurmctld.pid" slurmctld; then
		in_host slurmctld -f "$SCONF" >/dev/null 2>"$DIR/slurm/slurmctld.err" ||
			hdie h1 slurm "slurmctld failed: $(tr '\n' ' ' <"$DIR/slurm/slurmctld.err")$(log_tail "$DIR/slurm/slurmctld.log")"
	fi
	lpids=()
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		if daemon_up "$HD/slurmd.pid" slurmd; then
			lpids+=(0)
		else
			in_host slurmd -f "$SCONF" -N "$H" >/dev/null 2>"$HD/slurm.err" &
			lpids+=($!)
		fi
	done
	for ((i = 1; i <= NHOSTS; i++)); do
		set_host "$i"
		p=${lpids[i - 1]}
		if ((p)) && ! wait "$p"; then
			hdie "$H" slurm "slurmd failed: $(tr '\n' ' ' <"$HD/slurm.err")$(log_tail "$HD/slurmd.log")"
		fi
	done
	if ((ctld_was_up)) && [[ $(<"$SCONF") != "$old_conf" ]]; then
		# running daemons read the changed slurm.conf (PrologFlags with --adopt)
		set_host 1
		in_host scontrol reconfigure >/dev/null 2>"$DIR/slurm/slurmctld.err" ||
			hdie h1 slurm "scontrol reconfigure failed: $(tr '\n' ' ' <"$DIR/slurm/slurmctld.err")"
	fi
	wait_slurm_idle
	now_ms
	if ((ADOPT)); then
		echo "lab $NAME: slurm --adopt${mode:+ (turned $mode)}: h2..h$NHOSTS admit SSH from $ADOPT_USER (uid $ADOPT_UID) only with a job there (pam_slurm_adopt); h1 and root as before"
	elif [[ $mode == off ]]; then
		echo "lab $NAME: slurm: pam_slurm_adopt turned off (UsePAM no again)"
	fi
	if ((PYXIS)); then
		echo "lab $NAME: slurm --pyxis$( ((pyxis_was)) || echo ' (turned on)'): srun takes --container-image (spank_pyxis.so in $DIR/slurm/etc/plugstack.conf)"
	elif ((pyxis_was)); then
		echo "lab $NAME: slurm: Pyxis turned off (no plugstack.conf)"
	fi
	if any_gres; then
		echo "lab $NAME: slurm --gres: $(gres_summary)$gres_how"
	elif [[ -n $gres_how ]]; then
		echo "lab $NAME: slurm: GRES turned off$gres_how"
	fi
	echo "lab $NAME: slurm cluster $CLUSTER: h[1-$NHOSTS] idle in partition lab after $(((NOW - t0) / 1000)).$(printf %03d $(((NOW - t0) % 1000)))s; config $SCONF (/etc/slurm/slurm.conf on the hosts)"
}

cmd_status() {
	local name addr ns veth l flags rest cap sshd tcp link port
	declare -A up=()
	((${#ARGS[@]} == 0)) || usage_die "status takes no arguments"
	require_lab
	while read -r _ l flags rest; do
		l=${l%:} l=${l%@*}
		if [[ $flags == *[\<,]UP[,\>]* ]]; then up[$l]=1; fi
	done < <(ip -o link show 2>/dev/null)
	printf '%-7s %-15s %-5s %-5s %-6s %s\n' HOST ADDR SSHD LINK PORT22 CAP
	while IFS=$'\t' read -r name addr ns veth; do
		set_host "${name#h}"
		if [[ ! -e /run/netns/$ns ]]; then
			printf '%-7s %-15s %-5s %-5s %-6s %s\n' "$name" "$addr" gone - - -
			continue
		fi
		sshd=down tcp=- link=cut
		[[ -z ${up[$veth]:-} ]] || link=up
		if sshd_pid; then
			sshd=up
			if nsenter --net="/run/netns/$ns" timeout 2 bash -c ': 3<>/dev/tcp/127.0.0.1/22' 2>/dev/null; then tcp=open; else tcp=closed; fi
		fi
		cap=$(veth_rate "$veth")
		printf '%-7s %-15s %-5s %-5s %-6s %s\n' "$name" "$addr" "$sshd" "$link" "$tcp" "${cap:--}"
	done <"$DIR/hosts.tsv"
	set_storage
	if [[ -e /run/netns/$NS ]]; then # the storage host: PORT22 is its HTTP port (LAB_STORAGE_PORT in DIR/env)
		port=$(sed -n "s/^LAB_STORAGE_PORT='\([0-9]*\)'$/\1/p" "$DIR/env" 2>/dev/null)
		link=cut tcp=closed
		[[ -z ${up[$VETH]:-} ]] || link=up
		if [[ -n $port ]] && nsenter --net="/run/netns/$NS" timeout 2 bash -c ': 3<>"/dev/tcp/127.0.0.1/$1"' sh "$port" 2>/dev/null; then tcp=open; fi
		cap=$(veth_rate "$VETH")
		printf '%-7s %-15s %-5s %-5s %-6s %s\n' storage "$ADDR" - "$link" "$tcp" "${cap:--}"
	fi
}

main() {
	parse_args "$@"
	case $CMD in
	help) usage; exit 0 ;;
	"") usage; exit 2 ;;
	up | down | status | kill | start | cut | restore | cap | cap-to | uncap | ps | rekey | exec | slurm | storage) ;;
	*) usage_die "unknown command '$CMD'" ;;
	esac
	((ADOPT == 0)) || [[ $CMD == slurm ]] || usage_die "--adopt is an option of slurm, not of $CMD"
	((PYXIS == 0)) || [[ $CMD == slurm ]] || usage_die "--pyxis is an option of slurm, not of $CMD"
	[[ -z $GRES && ${#GRES_ON[@]} == 0 ]] || [[ $CMD == slurm ]] || usage_die "--gres and --gres-on are options of slurm, not of $CMD"
	need_root
	check_common
	"cmd_${CMD//-/_}"
}

main "$@"
