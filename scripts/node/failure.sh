# gpuaccept failure: the failure test's actions on one node. Runs WITHOUT
# the window's mark in its environment (it must not kill itself).
#   failure.sh kill-worker RUN        kill -9 the training processes the
#                                     window's torchrun launchers started
#   failure.sh kill-node RUN          kill -9 every process of the window
#                                     (launchers, workers, their container)
#   failure.sh cut RUN SECONDS PEER   schedule the restore, then take the
#                                     interface that reaches PEER down
#   failure.sh restore RUN            run a pending restore now
#   failure.sh reboot RUN             reboot the node (opt-in upstream)
#   failure.sh count RUN              how many processes of the window run
# Prints what it did, one line per action.
set -u
op=$1 run=$2
restore="/var/tmp/gpuaccept-restore-$run.sh"

self_net=$(readlink /proc/self/ns/net)
marked() {
  # PIDs whose environment carries the window's mark, in this node's
  # network namespace: hosts that share one kernel (the lab's, a node's
  # containers with their own network) see each other's /proc.
  for env in $(grep -lsxzF "GPUACCEPT_RUN=$run" /proc/[0-9]*/environ); do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [ "$pid" != "$$" ] && [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$self_net" ] && echo "$pid"
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
  secs=$3 peer=$4
  dev=$(ip -o route get "$peer" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  [ -n "$dev" ] || { echo "error no route to $peer"; exit 1; }
  [ "$dev" != lo ] || { echo "error $peer is this node"; exit 1; }
  routes="/var/tmp/gpuaccept-routes-$run"
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
  setsid env -u GPUACCEPT_RUN bash -c "sleep $secs; bash $restore" </dev/null >>"/var/tmp/gpuaccept-restore-$run.log" 2>&1 &
  sleep 0.2
  kill -0 $! 2>/dev/null || { echo "error the restore could not be scheduled"; exit 1; }
  echo "cut dev=$dev for=$secs restore_pid=$! at=$(date +%s.%N)"
  # Let the line leave before the link goes.
  sleep 0.5
  ip link set dev "$dev" down || { echo "error ip link set $dev down failed"; exit 1; }
  ;;
restore)
  if [ -f "$restore" ]; then bash "$restore"; else echo "nothing to restore"; fi
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
