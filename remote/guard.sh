# gpuaccept guard: runs one command for the coordinator and makes sure it
# never outlives the coordinator's interest in it. sshd does not kill a
# command when its channel closes (no pty), so without this a cancelled or
# orphaned benchmark would keep a rented GPU busy.
#
#   bash -c GUARD gpuaccept-guard COMMAND LEASE GRACE STDIN [SELF]
#
# The command runs as `bash -c COMMAND` in a session and process group of
# its own, so the whole tree can be signalled at once. The guard's own stdin
# is a control stream from the coordinator, one frame per line:
#   h        heartbeat; silence longer than LEASE seconds ends the command
#   d N      N bytes of the command's stdin follow (only when STDIN=1)
#   e        the command's stdin ends
#   k NAME   the command NAME (SELF) is cancelled: one job step runs a
#            command on each of many nodes, and every node's guard hears
#            the one control stream (srun_step.sh)
# In such a step the guard also says on fd 9, which the step's runner
# gives it, when it stopped the command because the stream fell silent or
# ended: there that is srun no longer passing the stream on, not the
# coordinator gone, and the command's end is then no answer of the node's.
# End of the control stream (the channel closed, the connection or the
# coordinator died) ends the command: TERM to its group, KILL after GRACE.
# Processes that leave the group on purpose (setsid) are not followed.
set -u
cmd=$1 lease=$2 grace=$3 withstdin=$4 self=${5-}
dir= pid= killer=

# Signal the command's group and the command itself: until the child has
# called setsid the group does not exist yet, and the child must still go.
stop() {
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
}
# stopnow: the command must end: TERM now, KILL after the grace period.
# Installed before anything starts, so an early signal is never lost (the
# command is stopped as soon as it has a pid). USR1 comes from the control
# subshell. The KILL comes from a timer of its own rather than from the main
# loop: a signal that lands just before the loop's wait would otherwise
# leave the guard waiting on a command that ignores TERM.
stopping=
stopnow() {
  stopping=1
  [ -n "$pid" ] && startkill
}
startkill() {
  [ -n "$killer" ] && return 0
  stop
  # The timer ignores the signals the guard traps: a subshell would reset
  # them to their default, and Slurm signals every process of a step one
  # by one (srun passes its TERM on), which would end the timer and leave
  # a command that ignores TERM running. The guard loses nothing meanwhile:
  # it is already stopping.
  trap '' TERM HUP INT
  {
    i=0
    while alive "$pid" && [ $i -lt $((grace * 10)) ]; do
      sleep 0.1
      i=$((i + 1))
    done
    if alive "$pid"; then
      kill -KILL -- "-$pid"
      kill -KILL "$pid"
    fi
  } </dev/null >/dev/null 2>&1 &
  killer=$!
  trap stopnow TERM HUP INT
}
trap stopnow TERM HUP INT USR1
# USR2 (a shared step's stream fell silent or ended): the command stops as
# for USR1, and its end is said to be no answer of the node's (fd 9) when
# it was still running then; one that had ended keeps its own answer.
lost=
lostnow() {
  { [ -z "$pid" ] || alive "$pid"; } && lost=1
  stopnow
}
trap lostnow USR2

# alive: the process runs (a zombie waiting to be reaped does not count).
alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || { kill -0 "$1" 2>/dev/null; return; }
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# groupalive: does any live (non-zombie) process remain in the command's
# group? Orphaned members linger as zombies until init reaps them.
groupalive() {
  # Most commands leave nothing behind: one builtin call settles it.
  kill -0 -- "-$pid" 2>/dev/null || return 1
  if command -v ps >/dev/null 2>&1; then
    ps -A -o pgid=,stat= | awk -v g="$pid" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'
  fi
}
# fd 9 is the guard's alone: the command does not get it.
if [ "$withstdin" = 1 ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/gpuaccept-guard.XXXXXX") || exit 125
  mkfifo "$dir/in" || exit 125
  setsid bash -c "$cmd" <"$dir/in" 9>&- &
else
  setsid bash -c "$cmd" </dev/null 9>&- &
fi
pid=$!
# From here on the guard's stderr is the command's alone: bash reports a
# job killed by a signal ("line 80: 1234 Killed ...") whenever it reaps it,
# not only inside a redirected wait, and that notice is not the command's
# output.
exec 2>/dev/null
[ -n "$stopping" ] && startkill

control() {
  trap '' PIPE
  if [ "$withstdin" = 1 ]; then exec 3>"$dir/in"; fi
  k=0 feeder=
  while :; do
    IFS=' ' read -r -t "$lease" op n
    st=$?
    if [ $st -ne 0 ]; then
      # Timed out (>128: the coordinator fell silent) or end of stream (the
      # channel is gone): either way nobody is waiting for this command.
      # The guard itself stops it, so nothing of ours outlives the guard.
      if [ -n "$self" ]; then kill -USR2 $$; else kill -USR1 $$; fi
      exit 0
    fi
    case $op in
      h) ;;
      k)
        if [ -n "$self" ] && [ "$n" = "$self" ]; then
          kill -USR1 $$
          exit 0
        fi
        ;;
      d)
        # Read the frame whole before passing it on, so a command that stops
        # reading its stdin early cannot leave half a frame in the stream.
        # Two chunk files in turn: the next frame is read while the last one
        # is handed over (a bulk stream would otherwise wait on each fork).
        head -c "$n" >"$dir/chunk$k"
        [ -n "$feeder" ] && wait "$feeder"
        cat "$dir/chunk$k" >&3 2>/dev/null &
        feeder=$! k=$((1 - k))
        ;;
      e)
        [ -n "$feeder" ] && wait "$feeder"
        feeder=
        exec 3>&-
        ;;
    esac
  done
}

# Background jobs get /dev/null as stdin unless redirected: hand the control
# stream over explicitly. Its output goes nowhere so that it never holds the
# channel open after the command ended.
exec 4<&0
control <&4 >/dev/null 2>&1 &
ctl=$!
# Untracked, so bash never reports its end ("Terminated") on the
# command's stderr.
disown "$ctl" 2>/dev/null # it may have ended already (a closed channel)
exec 4<&-

# wait returns early when a trapped signal arrives; keep waiting for the
# command itself (the timer KILLs it once it was told to stop).
while :; do
  wait "$pid"
  rc=$?
  alive "$pid" || { wait "$pid"; rc2=$?; [ $rc2 -ne 127 ] && rc=$rc2; break; }
done
# The timer goes before we do, reaped, so that nothing of the guard is left
# when the coordinator hears the exit (KILL: a TERM waits out its sleep).
if [ -n "$killer" ]; then
  kill -KILL "$killer" 2>/dev/null
  wait "$killer" 2>/dev/null
fi

# Whatever the command left in its group goes too: TERM, then KILL after
# the grace period.
if groupalive; then
  kill -TERM -- "-$pid" 2>/dev/null
  i=0
  while groupalive && [ $i -lt $((grace * 10)) ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -KILL -- "-$pid" 2>/dev/null
fi
# The control subshell and whatever it runs (a sleep, a head) end with us.
# Its children are read from /proc without a fork where the kernel offers
# the list; usually there are none.
kids=
if [ -r "/proc/$ctl/task/$ctl/children" ]; then
  read -r kids <"/proc/$ctl/task/$ctl/children"
else
  kids=$(pgrep -P "$ctl" 2>/dev/null)
fi
[ -n "$kids" ] && kill $kids 2>/dev/null
kill "$ctl" 2>/dev/null
# Disowned, so it cannot be waited for: it is gone once /proc no longer
# shows a live child of ours under its pid (a reused pid is not ours).
ours() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  set -- $stat
  [ "$1" != Z ] && [ "$2" = "$$" ]
}
i=0
while ours "$ctl" && [ $i -lt 10 ]; do
  sleep 0.1
  i=$((i + 1))
done
ours "$ctl" && kill -KILL "$ctl" 2>/dev/null
[ -n "$dir" ] && rm -rf "$dir"

[ -n "$lost" ] && { echo lost >&9; } 2>/dev/null

# A command killed by a signal makes the guard die by the same signal, so
# the coordinator sees exit-signal as it would without the guard.
if [ $rc -gt 128 ] && [ $rc -le 192 ]; then
  trap - TERM HUP INT
  kill -s $((rc - 128)) $$ 2>/dev/null
fi
exit $rc
