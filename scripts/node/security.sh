# gpuaccept security: what a buyer can learn over SSH about a node's access,
# isolation and residue, before the window writes anything of its own.
#
#   security.sh RUN [DIR...]   sshd's settings, login accounts, keys, other
#                              users' and GPU processes, containers, mounts,
#                              what DIR... held
#
# Each section is one command's output, framed as preflight.sh frames its:
#   @@gpuaccept@@ begin NAME ... @@gpuaccept@@ end NAME rc=N
# rc 127: the tool is not on the node.
set -u
run=$1
shift
section() {
  name=$1
  shift
  echo "@@gpuaccept@@ begin $name"
  "$@" 2>&1
  echo "@@gpuaccept@@ end $name rc=$?"
}
have() { command -v "$1" >/dev/null 2>&1; }

# sshd's effective settings: the listener that serves this session, with
# the config file it was started with (-f), asked with sshd -T; where that
# is not permitted (not root), the keywords as its config files set them,
# first one wins as in sshd.
sshd_settings() {
  local conf=/etc/ssh/sshd_config pid=$$ cmd found=
  while [ "$pid" -gt 1 ]; do
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
    case $cmd in
    *sshd*-f\ *) conf=${cmd#*-f } conf=${conf%% *} found=1 ;;
    sshd:* | */sshd\ * | */sshd) found=1 ;;
    esac
    # The parent: the field after the state, past the ")" that ends the
    # command name (which may hold spaces).
    pid=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $2 }')
    [ -n "$pid" ] || pid=1
  done
  # Another SSH server (Dropbear, an appliance's): OpenSSH's settings on
  # this disk would say nothing about it.
  [ -n "$found" ] || { echo "no OpenSSH sshd serves this session"; return 1; }
  keys='^(passwordauthentication|kbdinteractiveauthentication|challengeresponseauthentication|permitrootlogin|permitemptypasswords|pubkeyauthentication|usepam|authorizedkeysfile|allowusers|allowgroups) '
  if have sshd && out=$(sshd -T -f "$conf" 2>/dev/null) && [ -n "$out" ]; then
    echo "source sshd -T -f $conf"
    printf '%s\n' "$out" | grep -iE "$keys"
    return 0
  fi
  [ -r "$conf" ] || { echo "cannot read $conf"; return 1; }
  echo "source config $conf"
  { cat "$conf"; for f in /etc/ssh/sshd_config.d/*.conf; do [ -r "$f" ] && cat "$f"; done; } 2>/dev/null |
    sed 's/#.*//' | awk 'NF >= 2 { k = tolower($1); if (!(k in seen)) { seen[k] = 1; $1 = k; print } }' | grep -iE "$keys"
  return 0
}

accounts() {
  getent passwd | awk -F: '$7 !~ /(nologin|false|sync|halt|shutdown)$/ { print $1 ":" $3 ":" $7 }'
}

# Every key that may log in as this user: fingerprint and comment.
authorized() {
  local f found=0
  for f in "$HOME/.ssh/authorized_keys" "$HOME/.ssh/authorized_keys2"; do
    [ -f "$f" ] || continue
    found=1
    if have ssh-keygen; then
      ssh-keygen -lf "$f" 2>/dev/null
    else
      grep -cvE '^\s*(#|$)' "$f"
    fi
  done
  [ $found = 1 ] || echo "no authorized_keys"
}

# Processes of other (non-system) users than this one, in this node's
# network namespace (hosts that share one kernel see each other's /proc);
# one whose namespace cannot be read counts (another user's, to a user
# who is not root), unless it ended between ps and the look: whose node it
# ran on is then unknown, and on a kernel shared by hosts most such short
# lives are another host's commands.
foreign() {
  local self uid user pid comm ns
  self=$(readlink /proc/self/ns/net)
  # A zombie has ended (and shows no namespace): it is not counted.
  ps -eo uid=,user=,pid=,stat=,comm= 2>/dev/null | awk -v me="$(id -u)" '$1 >= 1000 && $1 != me && $1 != 65534 && $4 !~ /^Z/ { print $1, $2, $3, $5 }' |
    while read -r uid user pid comm; do
      ns=$(readlink "/proc/$pid/ns/net" 2>/dev/null)
      [ -z "$ns" ] && [ ! -e "/proc/$pid" ] && continue
      [ -z "$ns" ] || [ "$ns" = "$self" ] && echo "$uid $user $pid $comm"
    done
  return 0
}

gpu_apps() {
  have nvidia-smi || return 127
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
}

containers() {
  local rt found=127
  for rt in docker podman; do
    have "$rt" || continue
    found=0
    "$rt" ps --format "$rt {{.ID}} {{.Image}} {{.Names}}" 2>&1 || true
  done
  return $found
}

# What DIR held before the window wrote anything there: its entries, not
# the window's own (gpuaccept-RUN, and the private directory the tools
# phase made, GPUACCEPT_OWN: in /var/tmp, the default checkpoint directory,
# it read as residue of root's), the first 20 with a count, and how many
# belong to another user than root and this one (another tenant's).
residue() {
  local d own=${GPUACCEPT_OWN:-/nonexistent/gpuaccept-own}
  for d in "$@"; do
    [ -d "$d" ] || { echo "$d absent"; continue; }
    n=$(find "$d" -mindepth 1 -maxdepth 1 ! -name "gpuaccept-$run" ! -path "$own" 2>/dev/null | wc -l)
    echo "$d entries=$n others=$(find "$d" -mindepth 1 -maxdepth 1 ! -name "gpuaccept-$run" ! -path "$own" ! -uid 0 ! -uid "$(id -u)" 2>/dev/null | wc -l)"
    find "$d" -mindepth 1 -maxdepth 1 ! -name "gpuaccept-$run" ! -path "$own" -printf '  %M %u %s %p\n' 2>/dev/null | head -n 20
  done
}

section sshd sshd_settings
section accounts accounts
section authorized authorized
section foreign foreign
section gpu-apps gpu_apps
section containers containers
section mounts findmnt -rno TARGET,SOURCE,FSTYPE
section residue residue "$@"
