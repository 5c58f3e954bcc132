# gpuaccept left: after teardown, over a fresh connection, what of the
# window is still on this node: one line per thing found, then "checked".
# Travels inline (teardown removed the pushed scripts), and runs WITHOUT the
# window's mark in its environment (it must not find itself).
#   $1: run id; $2...: paths the window wrote (files or directories), and
#   image=RUNTIME:sha256:ID for images the window added
#   file PATH | key FILE:LINE | process PID CMDLINE | container ID (RUNTIME) | image ID (RUNTIME)
set -u
run=$1
shift
for p in "$@"; do
  case $p in
  image=*)
    rt=${p#image=} id=${rt#*:} rt=${rt%%:*}
    case $rt in docker | podman) ;; *) continue ;; esac
    case $id in sha256:*) ;; *) continue ;; esac
    [ ${#id} -eq 71 ] && [ -z "$(printf '%s' "${id#sha256:}" | tr -d 0-9a-f)" ] || continue
    command -v "$rt" >/dev/null 2>&1 && "$rt" image inspect "$id" >/dev/null 2>&1 && echo "image $id ($rt)"
    ;;
  *)
    [ -n "$p" ] && { [ -e "$p" ] || [ -L "$p" ]; } || continue
    # Another user's directory or link at one of the window's names (stat
    # without -L: the link itself) is theirs, not the window's: the window
    # refused to use it, and the phase that did says so.
    [ "$(stat -c %u -- "$p" 2>/dev/null)" = "$(id -u)" ] && echo "file $p"
    ;;
  esac
done
for f in "$HOME/.ssh/authorized_keys" "$HOME/.ssh/authorized_keys2"; do
  [ -f "$f" ] && awk -v m="gpuaccept-window-$run" '$NF == m { print "key " FILENAME ":" FNR }' "$f"
done
for env in $(grep -lsxzF "GPUACCEPT_RUN=$run" /proc/[0-9]*/environ); do
  pid=${env#/proc/}
  pid=${pid%/environ}
  [ "$pid" = "$$" ] && continue
  echo "process $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
done
for rt in docker podman; do
  command -v "$rt" >/dev/null 2>&1 || continue
  for c in $("$rt" ps -aq --filter "label=gpuaccept.run=$run" 2>/dev/null); do echo "container $c ($rt)"; done
  for c in $("$rt" ps -aq --filter "label=gpuaccept.window=$run" 2>/dev/null); do echo "container $c ($rt)"; done
done
echo "checked"
