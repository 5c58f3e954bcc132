# gpuaccept telemetry: the window's sampler on one node, from the tools
# phase to teardown. It prints tagged lines, as they come, for the
# coordinator to time-stamp and keep (orchestrator/telemetry):
#   gpu <one row of nvidia-smi --query-gpu ... --format=csv,noheader,nounits>
#   kern <one kernel log line of the NVIDIA drivers (NVRM:, SXid, nvswitch)>
#   ib <device>:<port> state=<as sysfs says it: "4: ACTIVE"> <counter>=<value> ...
#   note <the sampler's own word>
# The first notes say which sources it found ("note source nvidia-smi",
# "note source dmesg" or "journal", "note source ib <ports>"; "note
# missing <source>: why"), then "note ready".
#
#   bash telemetry.sh INTERVAL_MS NVIDIA-SMI-ARGS...
#
# It runs until its stdin closes or it is signalled, then ends every
# process it started (nvidia-smi's loop, dmesg --follow, the readers):
# nothing of it outlives the coordinator's connection.
set -u
interval_ms=$1
shift
case $interval_ms in '' | *[!0-9]*)
  echo "note bad interval: $interval_ms"
  exit 2
  ;;
esac
secs=$((interval_ms / 1000)).$(printf '%03d' $((interval_ms % 1000)))
ib_root=${GPUACCEPT_SYSFS_IB:-/sys/class/infiniband}

# descendants: every process under $1, deepest last.
descendants() {
  local c kids
  kids=$(cat /proc/"$1"/task/*/children 2>/dev/null) || kids=
  [ -n "$kids" ] || kids=$(ps -o pid= --ppid "$1" 2>/dev/null)
  for c in $kids; do
    # Not the subshell that is asking.
    [ "$c" = "$BASHPID" ] && continue
    echo "$c"
    descendants "$c"
  done
}
done_=
finish() {
  [ -n "$done_" ] && return
  done_=1
  trap '' TERM INT HUP PIPE
  local all i
  all=$(descendants $$)
  [ -n "$all" ] && kill -TERM $all 2>/dev/null
  for i in 1 2 3 4 5 6 7 8 9 10; do
    all=$(descendants $$)
    [ -z "$all" ] && break
    sleep 0.2
  done
  [ -n "$all" ] && kill -KILL $all 2>/dev/null
  exit 0
}
trap finish EXIT TERM INT HUP PIPE

# prefix: each line of stdin as "<tag> <line>".
prefix() {
  local l
  while IFS= read -r l || [ -n "$l" ]; do
    printf '%s %s\n' "$1" "$l"
  done
}

if command -v nvidia-smi >/dev/null 2>&1; then
  echo "note source nvidia-smi"
  {
    nvidia-smi "$@" 2>/dev/null
    echo "nvidia-smi's loop ended: exit $?" >&3
  } 3> >(prefix note) | prefix gpu &
else
  echo "note missing nvidia-smi: not found on the node"
fi

# Only what is new from here on: dmesg --follow prints the whole ring
# first, so the lines there now are skipped; journalctl -n0 starts at the
# end by itself. Unreadable (kernel.dmesg_restrict, no journal access):
# said once, the rest goes on.
# Each line must pass as it comes: tail -n +N (and mawk) hold a pipe's
# lines until their input ends, which a follower's never does (an Xid
# waited for teardown and died with it). read takes a pipe a byte at a
# time, so grep goes on at the first line not skipped.
kern_filter() { grep --line-buffered -aE 'NVRM:|SXid|nvidia-nvswitch'; }
skip_lines() {
  local n=0 _l
  while [ "$n" -lt "$1" ] && IFS= read -r _l; do n=$((n + 1)); done
}
if have=$(dmesg 2>/dev/null | wc -l) && dmesg >/dev/null 2>&1; then
  echo "note source dmesg"
  { dmesg --follow 2>/dev/null | { skip_lines "$have"; kern_filter; } | prefix kern; } &
elif command -v journalctl >/dev/null 2>&1 && journalctl -k -n1 --no-pager -q >/dev/null 2>&1 &&
  [ -n "$(journalctl -k -n1 --no-pager -q 2>/dev/null)" ]; then
  echo "note source journal"
  { journalctl -k -f -n0 --no-pager -q 2>/dev/null | kern_filter | prefix kern; } &
else
  echo "note missing kernel log: neither dmesg nor journalctl -k is readable"
fi

counters="symbol_error link_downed link_error_recovery port_rcv_errors port_xmit_discards
excessive_buffer_overrun_errors local_link_integrity_errors"
ports=()
for p in "$ib_root"/*/ports/*; do
  [ -d "$p" ] && ports+=("$p")
done
if [ ${#ports[@]} -gt 0 ]; then
  echo "note source ib ${#ports[@]}"
  {
    while :; do
      for p in "${ports[@]}"; do
        dev=${p%/ports/*}
        dev=${dev##*/}
        line="ib $dev:${p##*/}"
        if read -r st 2>/dev/null <"$p/state"; then
          line+=" state=$st"
        fi
        for c in $counters; do
          if read -r v 2>/dev/null <"$p/counters/$c"; then
            case $v in '' | *[!0-9]*) ;; *) line+=" $c=$v" ;; esac
          fi
        done
        printf '%s\n' "$line"
      done
      sleep "$secs"
    done
  } &
else
  echo "note missing ib: no port under $ib_root"
fi
echo "note ready"

# Until stdin closes, where the caller holds it open; else (stdin is
# /dev/null, as under the coordinator's guard, which signals the whole
# process group when the window or the connection ends) until a signal.
if [ "$(readlink /proc/$$/fd/0 2>/dev/null)" = /dev/null ]; then
  while :; do
    sleep 3600 &
    wait $!
  done
fi
while IFS= read -r _; do :; done
