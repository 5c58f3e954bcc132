# gpuaccept preflight: one pass over everything a node says about itself.
# Each section is the raw output of one command, framed so the coordinator
# can split them:
#   @@gpuaccept@@ begin NAME
#   ...the command's stdout and stderr...
#   @@gpuaccept@@ end NAME rc=N
# rc 127 means the command is not installed on the node.
section() {
  name=$1
  shift
  echo "@@gpuaccept@@ begin $name"
  "$@" 2>&1
  echo "@@gpuaccept@@ end $name rc=$?"
}
optional() {
  # A tool that is not installed is a fact, not a failure of the node.
  if command -v "$2" >/dev/null 2>&1; then
    section "$@"
  else
    echo "@@gpuaccept@@ begin $1"
    echo "$2: not installed"
    echo "@@gpuaccept@@ end $1 rc=127"
  fi
}
section hostname hostname
section machine-id cat /etc/machine-id
section kernel uname -r
section os-release cat /etc/os-release
section cpu sh -c 'grep -m1 "model name" /proc/cpuinfo; nproc'
section meminfo grep MemTotal /proc/meminfo
section nvidia-smi-L nvidia-smi -L
# power.max_limit (the board's, not the one set now) tells SKUs of one name
# apart (GPU-004) where -q cannot be read; --query-gpu has no board part number.
section nvidia-smi-query nvidia-smi --query-gpu=index,name,uuid,serial,pci.bus_id,memory.total,driver_version,vbios_version,power.max_limit --format=csv
section nvidia-smi-q nvidia-smi -q
section nvidia-smi-topo nvidia-smi topo -m
optional dcgmi-discovery dcgmi discovery -l
# The kernel log since boot, the NVIDIA drivers' lines only (Xid, SXid, a
# GPU fallen off the bus): dmesg, else the journal where dmesg is
# restricted (kernel.dmesg_restrict) and the user may read the journal.
# Neither readable: the exit says so, and the check is not passed.
kernel_messages() {
  local out
  if out=$(dmesg 2>&1); then
    :
  elif out=$(journalctl -k -b --no-pager 2>&1) && [ -n "$out" ]; then
    :
  else
    printf '%s\n' "$out" | tail -n 3
    return 1
  fi
  printf '%s\n' "$out" | grep -aE 'NVRM:|SXid|nvidia-nvswitch|[Nn]eighbou?r table overflow' | tail -n 4000
  return 0
}
section kernel-log kernel_messages
# The IPv4 neighbour (ARP) table's limits: past gc_thresh3 entries the
# kernel makes no new one, and a connect to a peer it has not met fails.
# Inside a network namespace the files are absent (the host's limit,
# shared by every namespace, applies).
section neigh-limit grep -H . /proc/sys/net/ipv4/neigh/default/gc_thresh2 /proc/sys/net/ipv4/neigh/default/gc_thresh3
optional ibstat ibstat
optional ibv_devinfo ibv_devinfo
