# gpuaccept step: one task of a job step that runs a command on each of
# its nodes at once (remote/srun_step.go), so that a fan-out over a
# thousand nodes is one step and one srun on the login node, not a
# thousand. Every task hears the same stream on its stdin (srun
# --input=all): first the step's table, then the guards' control stream.
#
#   bash -c STEP gpuaccept-step LEASE GUARD RUNNER
#
# The table, one frame per line, the nodes first:
#   n NODE I          node NODE runs command I
#   c I LEN GRACE     LEN bytes of command I follow; GRACE its grace in s
#   t                 the table ends; the control stream follows
# What a task prints on its stdout, which srun --label marks with the
# task's number, one short line each ending with a dot (srun cuts lines
# at 1 KiB, and breaks one slurmstepd passed on in pieces: the dot says
# where a line ends):
#   s NODE.           (by sh, before bash starts) the task runs on NODE
#   n WHY.            the node cannot take its command in this step: the
#                     coordinator runs it as a step of its own
#   o HEX., e HEX.    a chunk of the command's stdout, stderr (the runner)
#   g lost.           the guard stopped the command because the stream
#                     fell silent or ended: its end is no answer of the
#                     node's (the runner, before the x)
#   x STATUS SIGNAL.  the command ended (the runner)
set -u
lease=$1 guard=$2 runner=$3
# no WHY: the node cannot take its command here. (A task that ends early
# stalls no other: Slurm 22.05's srun went on passing 2,000 frames to a
# task whose neighbour had ended at once.)
no() {
  echo "n $1"
  exit 0
}
me=${SLURMD_NODENAME-}
# Bytes, not characters, for read -N; the command gets the locale back.
lcset=${LC_ALL+x} lcall=${LC_ALL-}
LC_ALL=C
perl -e 'use strict; use warnings; use POSIX (); use Errno (); use Fcntl (); 1' >/dev/null 2>&1 || no 'there is no working perl on the node.'
idx= mine= grace=
while IFS=' ' read -r op a b c; do
  case $op in
    n) [ "$a" = "$me" ] && idx=$b ;;
    c)
      IFS= read -r -N "$b" text || no "the step's table ended early."
      if [ -n "$idx" ] && [ "$a" = "$idx" ]; then
        mine=$text grace=$c
      fi
      ;;
    t) break ;;
    *) no "the step's table holds a frame gpuaccept does not send." ;;
  esac
done
[ -n "$grace" ] || no "the step's table has no command for $me."
# What the coordinator sent while Slurm was still making the step follows
# the table at once: a command withdrawn then ("k NODE") never starts.
while read -r -t 0 && IFS=' ' read -r op a; do
  [ "$op" = k ] && [ "$a" = "$me" ] && no "the command was withdrawn before the step started."
done
if [ -n "$lcset" ]; then LC_ALL=$lcall; else unset LC_ALL; fi
# As stepClean (srun.go): the command sees the node as a login there
# would, without the step's Slurm and PMI variables.
cd "$HOME" 2>/dev/null || cd /
for v in ${!SLURM@} ${!PMI@} ${!PMIX@} XDG_RUNTIME_DIR DBUS_SESSION_BUS_ADDRESS \
  XDG_SESSION_ID SSH_CLIENT SSH_CONNECTION SSH_TTY TMPDIR; do
  unset "$v"
done
exec perl -e "$runner" bash -c "$guard" gpuaccept-guard "$mine" "$lease" "$grace" 0 "$me"
