# gpuaccept teardown: end every process of this window on the node and
# remove its files. Processes are found by the GPUACCEPT_RUN=<id> that every
# command of the window carries in its environment, so nothing else on the
# node is touched. Prints one line per process ended.
# $1: run id, $2: the window's directory on the node, $3: the window's
# private directory on the node's own disk (what the tools phase made with
# mktemp -d), $4...: more of the window's directories (staging, checkpoint),
# each named gpuaccept-<run id>.
run=$1
dir=${2:-}
state=${3:-}
found=0
# Nothing is read or run from a path another user could have written: the
# private directory must be the one mktemp -d made for this window (its
# name, owned by this user, 0700, no link), else it is not used at all.
case $state in
/var/tmp/gpuaccept-"$run".??????????)
  if [ ! -e "$state" ] && [ ! -L "$state" ]; then
    state= # gone already (a released node's second visit)
  elif [ ! -d "$state" ] || [ -L "$state" ] || [ ! -O "$state" ] || [ "$(stat -c %a "$state" 2>/dev/null)" != 700 ]; then
    echo "not using $state: not this window's private directory"
    state=
  fi
  ;;
*) state= ;;
esac
mine() { [ -n "$state" ] && [ -f "$1" ] && [ ! -L "$1" ] && [ -O "$1" ]; }
# A node the idle guard releases while the window goes on
# (GPUACCEPT_RELEASE_NODE) takes only what is its own where it shares with
# other nodes of the window: where its home holds their copies of the
# window's scripts (a shared home), its copy and private directory go, and
# the window key and the window's directory stay; where their processes
# are in its process table (the lab's and the demo's nodes share one
# machine), only its processes (GPUACCEPT_NODE) go, and containers and
# images stay. The others' teardown removes the rest at the window's end.
only= procs=
case ${GPUACCEPT_RELEASE_NODE:-} in
'' | *[!A-Za-z0-9._-]* | .*) ;;
*)
  if [ -d "$dir/bin" ] && [ ! -L "$dir/bin" ] &&
    [ -n "$(ls -A -- "$dir/bin" 2>/dev/null | grep -vxF -- "$GPUACCEPT_RELEASE_NODE")" ]; then
    only=$GPUACCEPT_RELEASE_NODE
    echo "released alone: $dir is shared with other nodes of the window"
  fi
  for env in $(grep -lsxzF "GPUACCEPT_RUN=$run" /proc/[0-9]*/environ); do
    if grep -qszE '^GPUACCEPT_NODE=' "$env" && ! grep -qsxzF "GPUACCEPT_NODE=$GPUACCEPT_RELEASE_NODE" "$env"; then
      procs=$GPUACCEPT_RELEASE_NODE
      echo "released alone: other nodes' processes of the window run here"
      break
    fi
  done
  ;;
esac
# One grep reads every process's environment (NUL-separated entries).
for env in $(grep -lsxzF "GPUACCEPT_RUN=$run" /proc/[0-9]*/environ); do
  pid=${env#/proc/}
  pid=${pid%/environ}
  [ "$pid" = "$$" ] && continue
  if [ -n "${GPUACCEPT_RELEASE_NODE:-}" ]; then
    # Another node's, always (it may have begun since the look above);
    # an unmarked one only where no other node's processes are here.
    if grep -qszE '^GPUACCEPT_NODE=' "$env"; then
      grep -qsxzF "GPUACCEPT_NODE=$GPUACCEPT_RELEASE_NODE" "$env" || continue
    elif [ -n "$procs" ]; then
      continue
    fi
  fi
  echo "ended $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
  kill -KILL "$pid" 2>/dev/null
  found=$((found + 1))
done
# The window's containers (the failure test's job in the pinned image),
# when the window ran any.
# Containers and images are the machine's, not the home's: they stay only
# where other nodes' processes share the machine.
[ -n "$procs" ] && GPUACCEPT_TEARDOWN_CONTAINERS=
for rt in ${GPUACCEPT_TEARDOWN_CONTAINERS:+docker podman}; do
  command -v "$rt" >/dev/null 2>&1 || continue
  for c in $("$rt" ps -q --filter "label=gpuaccept.run=$run" 2>/dev/null); do
    "$rt" kill "$c" >/dev/null 2>&1 && echo "ended container $c ($rt)" && found=$((found + 1))
  done
done
# The load test's containers (its servers, its jobs), stopped or not: a
# stopped one still holds its name and its writable layer. The label names
# this window only.
for rt in ${GPUACCEPT_TEARDOWN_CONTAINERS:+docker podman}; do
  command -v "$rt" >/dev/null 2>&1 || continue
  for c in $("$rt" ps -aq --filter "label=gpuaccept.window=$run" 2>/dev/null); do
    if "$rt" rm -f "$c" >/dev/null 2>&1; then
      echo "removed container $c ($rt)"
    else
      echo "could not remove container $c ($rt)"
    fi
  done
done
# The window's named Pyxis container (image.runtime pyxis: its steps ran
# with --container-name=gpuaccept-<run id>, which Pyxis keeps on the node and
# never removes): enroot's pyxis_NAME, or pyxis_JOBID_NAME where Pyxis
# scopes names to the job (container_scope=job; its epilog removes those
# too, once the job ends). Only this window's name, never an option.
pyxis=${GPUACCEPT_TEARDOWN_ENROOT:-}
case $pyxis in gpuaccept-"$run") ;; *) pyxis= ;; esac
if [ -n "$pyxis" ] && [ -z "$procs" ] && command -v enroot >/dev/null 2>&1; then
  for c in $(enroot list 2>/dev/null); do
    case $c in pyxis_"$pyxis" | pyxis_[0-9]*_"$pyxis") ;; *) continue ;; esac
    if enroot remove -f "$c" >/dev/null 2>&1; then
      echo "removed container $c (enroot)"
    else
      echo "could not remove container $c (enroot)"
    fi
  done
fi
# Images the window loaded or pulled: the image phase lists them, before it
# loads, in the window's private directory on this node's own disk; an
# image the node had before the window is not listed. rmi -f also removes
# the window's stopped containers of it.
added="$state/images"
if [ -z "$procs" ] && mine "$added"; then
  while read -r rt id; do
    case $rt in docker | podman) ;; *) continue ;; esac
    # Only an image ID: never a name, never an option.
    case $id in sha256:*) ;; *) continue ;; esac
    [ ${#id} -eq 71 ] && [ -z "$(printf '%s' "${id#sha256:}" | tr -d 0-9a-f)" ] || continue
    command -v "$rt" >/dev/null 2>&1 || continue
    "$rt" image inspect "$id" >/dev/null 2>&1 || continue
    if "$rt" rmi -f "$id" >/dev/null 2>&1; then
      echo "removed image $id ($rt)"
    else
      echo "could not remove image $id ($rt)"
    fi
  done <"$added"
  rm -f -- "$added"
fi
# The window's key pair (see windowkey.sh): its line carries the run id.
# The file is replaced, never rewritten in place: a login while it is
# truncated and refilled finds no key (a shared home's other users' too).
# A new file beside it (same directory, owner and mode, a name of
# mktemp's), complete and synced, is renamed over it, so sshd reads the
# old file or the new one. A link is followed to the file it names; a
# file with other hard links keeps the line (a rename would part them),
# which expires with the window anyway.
keys="$HOME/.ssh/authorized_keys"
mark="gpuaccept-window-$run"
haskey() { awk -v m="$mark" '$NF == m { found = 1 } END { exit !found }' "$1"; }
if [ -z "$only" ] && [ -f "$keys" ] && haskey "$keys"; then
  (
    # every node at once on a shared home (windowkey.sh); the phase has 45 s. A pod (GPUACCEPT_POD) has a home
    # of its own, and its image may have no flock; a host without one keeps the line, which expires.
    if command -v flock >/dev/null 2>&1; then
      flock -w 30 9 || exit 1
    elif [ -z "${GPUACCEPT_POD-}" ]; then
      exit 1
    fi
    real=$(readlink -f -- "$keys") && [ -f "$real" ] || exit 1
    haskey "$real" || exit 0 # another node of a shared home removed it
    links=$(stat -c %h -- "$real") || exit 1
    [ "$links" = 1 ] || { echo "$real has $links hard links"; exit 1; }
    tmp=$(mktemp "${real%/*}/.authorized_keys.XXXXXX") || exit 1
    trap 'rm -f -- "$tmp"' EXIT
    # Every other byte as it was: a last line without its newline stays so.
    end=1
    [ -z "$(tail -c1 -- "$real")" ] || end=0
    awk -v m="$mark" -v end="$end" 'BEGIN { ORS = "" } $NF != m { print sep $0; sep = "\n"; n++ } END { if (n && end) print "\n" }' "$real" >"$tmp" &&
      # Owner and mode as stat says them: busybox (a pod's image) has no --reference.
      chown "$(stat -c %u:%g -- "$real")" -- "$tmp" && chmod "$(stat -c %a -- "$real")" -- "$tmp" &&
      { sync -- "$tmp" 2>/dev/null || true; } &&
      mv -f -- "$tmp" "$real"
  ) 9>>"$HOME/.ssh/.gpuaccept.lock" && echo "removed the window key from $keys" ||
    echo "could not remove the window key from $keys (it expires with the window)"
fi
# A network cut of the failure test still pending (this node was cut and
# is reachable again, or never was cut): its restore runs now.
restore="$state/restore.sh"
mine "$restore" && bash "$restore"
shift 3 2>/dev/null || shift $#
if [ -n "$only" ]; then
  dir=$dir/bin/$only
fi
if [ -n "$procs" ] && [ -n "$state" ]; then
  # It lists the images the window added on this machine, which stay
  # while other nodes share it: the window's own teardown needs the list.
  echo "left for the window's end (it lists the images the window added here): $state"
  state=
fi
if [ -n "${GPUACCEPT_RELEASE_NODE:-}" ] && [ $# -gt 0 ]; then
  # The staging and checkpoint directories may be shared storage the
  # others still use (the failure test resumes from the checkpoints): they
  # go with the window's own teardown.
  echo "left for the window's end (its staging and checkpoint directories, maybe shared): $*"
  set --
fi
# Only what is this user's: a directory another user made at one of the
# window's names (the window refused to use it) is theirs, not ours to
# remove; a link goes, never what it names.
for d in "$dir" "$state" "$@"; do
  if [ -n "$d" ] && [ -L "$d" ]; then
    echo "not removing $d: a symbolic link, not the window's"
  elif [ -n "$d" ] && [ -d "$d" ] && [ ! -O "$d" ]; then
    echo "not removing $d: owned by uid $(stat -c %u -- "$d"), not the window's"
  elif [ -n "$d" ] && [ -d "$d" ]; then
    rm -rf -- "$d" && echo "removed $d"
  fi
done
echo "processes ended: $found"
