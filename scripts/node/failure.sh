# gpuaccept failure: the failure test's actions on one node. Runs WITHOUT
# the window's mark in its environment (it must not kill itself).
#   failure.sh kill-worker RUN STATE        kill -9 the training processes
#                                           the window's torchrun launchers
#                                           started
#   failure.sh kill-node RUN STATE          kill -9 every process of the
#                                           window (launchers, workers, their
#                                           container)
#   failure.sh cut RUN STATE SECONDS PEER   schedule the restore, then take
#                                           the interface that reaches PEER
#                                           down
#   failure.sh restore RUN STATE            run a pending restore now
#   failure.sh reboot RUN STATE             reboot the node (opt-in upstream)
#   failure.sh count RUN STATE              how many processes of the window
#                                           run
# STATE is the window's private directory on this node (the tools phase's
# mktemp -d): the cut's restore and the routes it puts back live there,
# where no other user can write them. Prints what it did, one line per
# action.
set -u
op=$1 run=$2 state=$3
case $state in
/var/tmp/gpuaccept-"$run".??????????)
  if [ ! -d "$state" ] || [ -L "$state" ] || [ ! -O "$state" ] || [ "$(stat -c %a "$state" 2>/dev/null)" != 700 ]; then
    echo "error $state is not this window's private directory"
    exit 1
  fi
  ;;
*)
  echo "error $state is not this window's private directory"
  exit 1
  ;;
esac
restore="$state/restore.sh"

self_net=$(readlink /proc/self/ns/net)
# The demo's simulated nodes share one machine and one network namespace:
# each is told apart by the stand-in's node name in its environment. Unset
# on a real node.
sim=${GPUACCEPT_STANDIN_NODE:-}
marked() {
  # PIDs whose environment carries the window's mark, in this node's
  # network namespace: hosts that share one kernel (the lab's, a node's
  # containers with their own network) see each other's /proc.
  for env in $(grep -lsxzF "GPUACCEPT_RUN=$run" /proc/[0-9]*/environ); do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [ "$pid" != "$$" ] && [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$self_net" ] || continue
    [ -z "$sim" ] || grep -qsxzF "GPUACCEPT_STANDIN_NODE=$sim" "$env" || continue
    echo "$pid"
  done
}
cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | cut -c1-160; }

case $op in
kill-worker)
  n=0
  for pid in $(marked); do
    case $(cmdline "$pid") in
    *torch.distributed.run*)
      for child in $(pgrep -P "$pid"); do
        echo "killed $child $(cmdline "$child")"
        kill -KILL "$child" 2>/dev/null && n=$((n + 1))
      done
      ;;
    esac
  done
  [ "$n" -gt 0 ] || { echo "error no training process of the window runs here"; exit 1; }
  ;;
kill-node)
  n=0
  for pid in $(marked); do
    echo "killed $pid $(cmdline "$pid")"
    kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
  done
  # A container of the window goes with it.
  for rt in docker podman; do
    command -v "$rt" >/dev/null 2>&1 || continue
    for c in $("$rt" ps -q --filter "label=gpuaccept.run=$run" 2>/dev/null); do
      "$rt" kill "$c" >/dev/null 2>&1 && echo "killed container $c ($rt)"
    done
  done
  [ "$n" -gt 0 ] || { echo "error no process of the window runs here"; exit 1; }
  ;;
cut)
  secs=$4 peer=$5
  dev=$(ip -o route get "$peer" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  [ -n "$dev" ] || { echo "error no route to $peer"; exit 1; }
  [ "$dev" != lo ] || { echo "error $peer is this node"; exit 1; }
  routes="$state/routes"
  ip -o route show dev "$dev" >"$routes" || exit 1
  # The restore is on the node before the cut, outside the window's mark
  # (teardown must not kill it) and outside this session (setsid), so a
  # lost coordinator can never leave the node cut off.
  cat >"$restore" <<EOF
ip link set dev $dev up
while read -r r; do ip route replace \$r dev $dev 2>/dev/null; done <$routes
rm -f $routes "$restore"
echo "restored $dev at \$(date +%s.%N)"
EOF
  setsid env -u GPUACCEPT_RUN bash -c "sleep $secs; bash $restore" </dev/null >>"$state/restore.log" 2>&1 &
  sleep 0.2
  kill -0 $! 2>/dev/null || { echo "error the restore could not be scheduled"; exit 1; }
  echo "cut dev=$dev for=$secs restore_pid=$! at=$(date +%s.%N)"
  # Let the line leave before the link goes.
  sleep 0.5
  ip link set dev "$dev" down || { echo "error ip link set $dev down failed"; exit 1; }
  ;;
restore)
  if [ -f "$restore" ] && [ ! -L "$restore" ] && [ -O "$restore" ]; then bash "$restore"; else echo "nothing to restore"; fi
  ;;
reboot)
  echo "rebooting at $(date +%s.%N)"
  setsid env -u GPUACCEPT_RUN sh -c 'sleep 1; systemctl reboot || reboot' </dev/null >/dev/null 2>&1 &
  ;;
count)
  marked | wc -l
  ;;
*)
  echo "error unknown operation $op"
  exit 2
  ;;
esac
