# gpuaccept pod sshd: an SSH server of the window's own in a pod of the
# window (transport kubernetes), so that mpirun can start its daemons in
# the other pods as it does on hosts. The pods share their nodes' host
# network: the server listens on the node's address only, on a port of the
# window's own, lets in only this user with only the window's key (the
# authorized_keys line windowkey.sh made: from the window's nodes, until
# the window's end), no password, no forwarding. The host key is the
# coordinator's (it gives every peer its public half), copied here as its
# one 0600 file.
# $1: the window's directory on the pod, $2: the port, $3: the address to
# listen on, $4: the authorized_keys line.
# Prints "sshd PID" once the server listens and a login to it through the
# window's ssh config finds Open MPI's daemon; "unreachable REASON" when the
# image cannot serve mpirun (no sshd, no ssh client, no daemon on a
# session's PATH, a server that refuses the key): not an error, the
# collectives over pods are then not measured. Exit 3: arguments or files
# that are not the window's (the coordinator fails the node); 1: the
# server did not start (its own words on stderr).
set -eu
umask 077
d="$1/ssh" port=$2 addr=$3 line=$4
case $port in '' | *[!0-9]*) echo "podsshd: port '$port' is not a number" >&2; exit 3 ;; esac
case $addr in '' | *[!A-Za-z0-9.:-]*) echo "podsshd: address '$addr' is not a host name or address" >&2; exit 3 ;; esac
case $line in *'
'*) echo "podsshd: the key's line has a newline" >&2; exit 3 ;; esac
[ -d "$d" ] && [ ! -L "$d" ] || { echo "podsshd: $d is not the window's directory" >&2; exit 3; }
[ -f "$d/ssh_host_ed25519_key" ] && [ ! -L "$d/ssh_host_ed25519_key" ] || { echo "podsshd: no host key in $d" >&2; exit 3; }
sshd=$(command -v sshd 2>/dev/null || true)
for s in /usr/sbin/sshd /usr/local/sbin/sshd /sbin/sshd; do
	[ -n "$sshd" ] && break
	[ -x "$s" ] && sshd=$s
done
[ -n "$sshd" ] || { echo "unreachable no sshd in the pod's image"; exit 0; }
command -v ssh >/dev/null 2>&1 || { echo "unreachable no ssh client in the pod's image"; exit 0; }
user=$(id -un 2>/dev/null) || { echo "unreachable the pod's user $(id -u) has no name (no passwd entry): sshd lets no one in"; exit 0; }
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
	printf 'AllowUsers %s\nPubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n' "$user"
	printf 'PermitRootLogin prohibit-password\nPermitUserEnvironment no\nMaxAuthTries 3\n'
	# The key file's directory is the window's private one (made and
	# checked by the tools phase: this user's, 0700, no link, no writable
	# parent); StrictModes would also refuse an image's group-writable home
	# above it, which some images have.
	printf 'StrictModes no\n'
	printf 'AllowTcpForwarding no\nAllowAgentForwarding no\nAllowStreamLocalForwarding no\n'
	printf 'X11Forwarding no\nPermitTunnel no\nGatewayPorts no\nPrintMotd no\n'
	# No login grace alarm: its signal handler is what CVE-2024-6387
	# raced (the image's OpenSSH is whatever it pinned). mpirun at fleet
	# size opens many sessions at once.
	printf 'LoginGraceTime 0\nMaxStartups 256:30:512\nMaxSessions 64\nLogLevel ERROR\n'
	# A session gets the container's own PATH and libraries (orted and
	# the benchmark live where the image put them), as kubectl exec does;
	# a value the file cannot hold in quotes is left out.
	if [ -n "${1-}" ]; then
		case "$PATH${LD_LIBRARY_PATH-}" in *'"'* | *'
'*) ;; *) printf 'SetEnv "PATH=%s" "LD_LIBRARY_PATH=%s"\n' "$PATH" "${LD_LIBRARY_PATH-}" ;; esac
	fi
}
# SetEnv is OpenSSH 8.7's; an older server refuses the whole file for it
# (its sessions then have sshd's own PATH: the login below finds out).
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
if [ ! -s "$d/sshd.pid" ]; then
	echo "podsshd: sshd did not start: $(tail -n 3 "$d/sshd.log" 2>/dev/null | tr '\n' ' ')" >&2
	exit 1
fi
read -r pid <"$d/sshd.pid"
# What mpirun will do from another pod: the window's ssh config and key,
# this server, and Open MPI's daemon on the session's PATH (an image whose
# sshd is too old for SetEnv or for the key's expiry-time, or whose root
# is locked, stops here, not in the collective).
if ! out=$(ssh -F "$1/ssh/config" -o ConnectTimeout=10 "$addr" 'command -v orted || command -v prted' 2>&1 </dev/null); then
	echo "unreachable a login to the pod's own sshd failed: $(printf '%s\n' "$out" | tail -n 1)"
	exit 0
fi
[ -n "$out" ] || { echo "unreachable no orted or prted (Open MPI's daemon) on an SSH session's PATH in the pod"; exit 0; }
echo "sshd $pid"
