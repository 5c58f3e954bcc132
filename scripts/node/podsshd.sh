# gpuaccept pod sshd: an SSH server of the window's own in a pod of the
# window (transport kubernetes), so that mpirun can start its daemons in
# the other pods as it does on hosts. The pods share their nodes' host
# network: the server listens on the node's address only, on a port of the
# window's own, takes only the window's key (the authorized_keys line
# windowkey.sh made: from the window's nodes, until the window's end) and
# no password, and serves no forwarding. The host key is the coordinator's
# (it gives every peer its public half), copied here as its one 0600 file.
# $1: the window's directory on the pod, $2: the port, $3: the address to
# listen on, $4: the authorized_keys line.
# Prints "sshd PID" once the server listens, "no-sshd" when the image has
# none (not an error: the collectives over pods are then not measured), or
# fails with the server's own words.
set -eu
umask 077
d="$1/ssh" port=$2 addr=$3 line=$4
sshd=$(command -v sshd 2>/dev/null || true)
for s in /usr/sbin/sshd /usr/local/sbin/sshd /sbin/sshd; do
	[ -n "$sshd" ] && break
	[ -x "$s" ] && sshd=$s
done
[ -n "$sshd" ] || { echo no-sshd; exit 0; }
[ -d "$d" ] && [ ! -L "$d" ] || { echo "podsshd: $d is not the window's directory" >&2; exit 1; }
[ -f "$d/ssh_host_ed25519_key" ] || { echo "podsshd: no host key in $d" >&2; exit 1; }
# A window resumed here starts its server again, with the key the
# coordinator made this time: the old one goes first (it holds the port).
if [ -f "$d/sshd.pid" ]; then
	read -r old <"$d/sshd.pid" || old=
	case $old in
	'' | *[!0-9]*) ;;
	*)
		if tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | grep -qF -- "$d/sshd_config"; then
			kill "$old" 2>/dev/null || true
			i=0
			while kill -0 "$old" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		fi
		;;
	esac
	rm -f "$d/sshd.pid"
fi
printf '%s\n' "$line" >"$d/authorized_keys"
# sshd's privilege separation directory: images that have sshd seldom have
# it made (a package's tmpfiles.d does, at boot).
[ -d /run/sshd ] || mkdir -p /run/sshd 2>/dev/null || true
conf() {
	printf 'Port %s\nListenAddress %s\n' "$port" "$addr"
	printf 'HostKey %s\nAuthorizedKeysFile %s\nPidFile %s\n' "$d/ssh_host_ed25519_key" "$d/authorized_keys" "$d/sshd.pid"
	printf 'PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n'
	printf 'PermitRootLogin prohibit-password\nPermitUserEnvironment no\n'
	# The key file's directory is the window's private one (made and
	# checked by the tools phase: this user's, 0700, no link, no writable
	# parent); StrictModes would also refuse an image's group-writable home
	# above it, which some images have.
	printf 'StrictModes no\n'
	printf 'AllowTcpForwarding no\nAllowAgentForwarding no\nAllowStreamLocalForwarding no\n'
	printf 'X11Forwarding no\nPermitTunnel no\nGatewayPorts no\nPrintMotd no\n'
	# mpirun at fleet size opens many sessions at once.
	printf 'MaxStartups 256:30:512\nMaxSessions 64\nLogLevel ERROR\n'
	# A session gets the container's own PATH and libraries (orted and
	# the benchmark live where the image put them), as kubectl exec does.
	[ -z "${1-}" ] || printf 'SetEnv PATH=%s LD_LIBRARY_PATH=%s\n' "$PATH" "${LD_LIBRARY_PATH-}"
}
# SetEnv is OpenSSH 8.7's; an older server refuses the whole file for it.
conf env >"$d/sshd_config"
if ! "$sshd" -t -f "$d/sshd_config" >/dev/null 2>&1; then
	conf >"$d/sshd_config"
fi
if ! err=$("$sshd" -t -f "$d/sshd_config" 2>&1); then
	echo "podsshd: $sshd refuses its configuration: $(printf '%s\n' "$err" | tail -n 3 | tr '\n' ' ')" >&2
	exit 1
fi
# sshd detaches (its own session: the guard lets it be) and writes its
# pid file once it listens. It carries the window's GPUACCEPT_RUN, by which
# teardown ends it; the pod's deletion ends it too.
: >"$d/sshd.log"
"$sshd" -f "$d/sshd_config" -E "$d/sshd.log"
i=0
while [ ! -s "$d/sshd.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if [ -s "$d/sshd.pid" ]; then
	read -r pid <"$d/sshd.pid"
	echo "sshd $pid"
	exit 0
fi
echo "podsshd: sshd did not start on $addr port $port: $(tail -n 3 "$d/sshd.log" 2>/dev/null | tr '\n' ' ')" >&2
exit 1
