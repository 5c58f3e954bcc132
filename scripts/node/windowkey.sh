# gpuaccept window key: let the window's nodes ssh to each other (mpirun
# starts its daemons that way) with a key pair made for this window only.
# $1: the window's directory on the node, $2: the public key and its
# comment (which marks it for teardown), $3: known_hosts lines for every
# node, $4: ssh_config lines for nodes on another port (each "-": read
# from stdin instead, the known_hosts lines, a line "@@ports", the
# ssh_config lines: at 1,000 nodes they pass the 128 KiB an argument may
# be), $5: when the key
# expires (seconds since the epoch), $6: the window's nodes as their peers
# reach them, comma-separated. The private key is not here: the
# coordinator copies it into the directory this makes (0700) once it is
# made, as its one 0600 file.
#
# The authorized_keys line is restricted: no forwarding, pty or X11
# (restrict), usable only from the window's own nodes (from=, host names
# resolved here, since sshd matches addresses), and only until the window
# is over (expiry-time, in this node's local time as sshd reads it), so a
# node teardown never reached still closes it. Prints "authorized LINE".
set -eu
umask 077
known=$3 ports=$4
if [ "$known" = - ] || [ "$ports" = - ]; then
	known= ports= part=k
	while IFS= read -r line; do
		if [ "$part" = k ] && [ "$line" = @@ports ]; then part=p; continue; fi
		if [ "$part" = k ]; then known+=$line$'\n'; else ports+=$line$'\n'; fi
	done
fi
d="$1/ssh"
mkdir -p "$d"
chmod 700 "$1" "$d"
IFS=, read -r -a peers <<<"$6"
# One lookup for every peer (getent goes on past a name it cannot
# resolve): one per peer made a 1,000-node window a million lookups.
from=$({
  printf '%s\n' "${peers[@]}"
  # Bounded: a resolver that drops queries must not hold the window.
  t=; command -v timeout >/dev/null 2>&1 && t="timeout $((20 + ${#peers[@]} / 20))"
  [ "${#peers[@]}" -eq 0 ] || $t getent ahosts "${peers[@]}" 2>/dev/null | awk '{ print $1 }'
} | awk 'NF && !seen[$1]++ { printf "%s%s", sep, $1; sep = "," }')
expiry=$(date -d "@$5" +%Y%m%d%H%M%S)
line="restrict,from=\"$from\",expiry-time=\"$expiry\" $2"
# Nodes may share one home (NFS): each writes its own temporary file and
# renames it; they all write the same bytes.
put() { t=$(mktemp "$d/.$1.XXXXXX") && cat >"$t" && mv -f "$t" "$d/$1"; }
printf '%s\n' "$known" | put known_hosts
{
  printf '%s\n' "$ports"
  printf 'Host *\n'
  printf '  IdentityFile %s\n' "$d/id_ed25519"
  printf '  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n' "$d/known_hosts"
  # A node that stops answering ends its daemon's ssh, and so the job,
  # instead of hanging it (a cut link hangs mpirun for minutes otherwise).
  printf '  BatchMode yes\n  ConnectTimeout 10\n  ServerAliveInterval 5\n  ServerAliveCountMax 3\n  LogLevel ERROR\n'
  # AES-GCM first: with AES-NI it costs a fraction of chacha20's CPU, and
  # the image relay pushes every byte through one ssh per node.
  printf '  Ciphers aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com\n'
} | put config
mkdir -p "$HOME/.ssh"
chmod 700 "$HOME/.ssh"
# Nodes may share one home (NFS): one writer at a time, each line once.
# Every node of the window waits its turn at once: 10 s left 4 of 64 lab
# nodes sharing one home unlocked on two busy cores; 40 s stays inside
# the phase's minute. A pod's image may lack flock (util-linux), and a
# pod's home is its own (the coordinator sets GPUACCEPT_POD there).
(
  if command -v flock >/dev/null 2>&1; then
    flock -w 40 9 || { echo "cannot lock $HOME/.ssh/.gpuaccept.lock" >&2; exit 1; }
  elif [ -z "${GPUACCEPT_POD-}" ]; then
    echo "no flock to lock $HOME/.ssh/.gpuaccept.lock with (util-linux)" >&2
    exit 1
  fi
  touch "$HOME/.ssh/authorized_keys"
  # A last line without its newline would swallow ours.
  if [ -s "$HOME/.ssh/authorized_keys" ] && [ -n "$(tail -c1 "$HOME/.ssh/authorized_keys")" ]; then
    echo >>"$HOME/.ssh/authorized_keys"
  fi
  grep -qxF "$line" "$HOME/.ssh/authorized_keys" || printf '%s\n' "$line" >>"$HOME/.ssh/authorized_keys"
) 9>>"$HOME/.ssh/.gpuaccept.lock"
echo "authorized $line"
