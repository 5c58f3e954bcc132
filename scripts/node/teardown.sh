# gpuaccept teardown: end every process of this window on the node and
# remove its files. Processes are found by the GPUACCEPT_RUN=<id> that every
# command of the window carries in its environment, so nothing else on the
# node is touched. Prints one line per process ended.
# $1: run id, $2: the window's directory on the node
run=$1
dir=$2
found=0
# One grep reads every process's environment (NUL-separated entries).
for env in $(grep -lsxzF "GPUACCEPT_RUN=$run" /proc/[0-9]*/environ); do
  pid=${env#/proc/}
  pid=${pid%/environ}
  [ "$pid" = "$$" ] && continue
  echo "ended $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
  kill -KILL "$pid" 2>/dev/null
  found=$((found + 1))
done
if [ -n "$dir" ] && [ -d "$dir" ]; then
  rm -rf -- "$dir" && echo "removed $dir"
fi
echo "processes ended: $found"
