# gpuaccept relay: receive a file on stdin, keep it, and pass it on to the
# next node of the chain as it arrives, so the sender's uplink carries one
# copy whatever the number of nodes. Every node checks its own copy.
# $1: destination file, $2: expected sha256, $3: ssh_config (the window's
# key), $4: this node's name, $5...: the rest of the chain as NAME=HOST.
# Every node holds its own copy of this script (pushed at the start of the
# window under the login directory, beside this one's under the node's
# name); the next hop runs its copy only if its sha256 is this one's.
# Prints one line per node of the chain, this one first:
#   relay NAME ok|bad|failed BYTES SECONDS SHA256 [why]
set -u
# sha [FILE]: the sha256 of FILE or stdin as "HEX ...". openssl's is several
# times coreutils' where the CPU has SHA extensions, so the hash is not what
# limits a fast link or disk; sha256sum where there is no openssl.
if openssl dgst -sha256 -r </dev/null >/dev/null 2>&1; then
  sha() { openssl dgst -sha256 -r "$@"; }
else
  sha() { sha256sum "$@"; }
fi
# @include remote/private.sh
f=$1 want=$2 cfg=$3 self=$4
shift 4
# The destination's directory has a predictable name (gpuaccept-<run id>)
# in a directory every user can write (/var/tmp): only one of this user's
# alone is written in, never one another user made or a link they planted.
if ! why=$(gpuaccept_private "$(dirname -- "$f")" parents 2>&1); then
  echo "relay $self failed 0 0 - ${why#gpuaccept: }"
  exit 1
fi
tmp="$f.part.$$"
start=$(date +%s.%N)
if [ $# -gt 0 ]; then
  name=${1%%=*} host=${1#*=}
  shift
  args=""
  for a in "$f" "$want" "$cfg" "$name" "$@"; do args="$args $(printf '%q' "$a")"; done
  # This copy is .gpuaccept/RUN/bin/SELF/relay.sh; the next node's sits
  # beside it under its own name.
  rel=${0#"$HOME"/}
  rel="${rel%/*/relay.sh}/$name/relay.sh"
  sum=$(sha256sum <"$0" | cut -d' ' -f1)
  next="f=\"\$HOME\"/$(printf '%q' "$rel"); printf '%s  %s\\n' $sum \"\$f\" | sha256sum -c >/dev/null 2>&1 || { echo \"relay: \$f is missing or is not the window's copy\" >&2; exit 96; }"
  next="$next; export GPUACCEPT_RUN=$(printf '%q' "${GPUACCEPT_RUN:-}"); bash \"\$f\"$args"
  # Hashed as it arrives: the node's CPU works while the link does.
  tee "$tmp" >(sha >"$tmp.sum") | ssh -F "$cfg" "$host" "$next"
  rcs=("${PIPESTATUS[@]}")
  # A failed hop is named here; the nodes after it get no line, and the
  # coordinator sends them their copy itself.
  [ "${rcs[1]}" = 0 ] || echo "relay $name failed 0 0 - ssh to $host exited ${rcs[1]}"
else
  tee >(sha >"$tmp.sum") >"$tmp"
fi
# The hash runs beside the pipeline (no $! to wait for): its line appears
# once it has read everything.
for _ in $(seq 600); do [ -s "$tmp.sum" ] && break; sleep 0.1; done
end=$(date +%s.%N)
bytes=$(stat -c %s "$tmp" 2>/dev/null || echo 0)
got=$(cut -d' ' -f1 "$tmp.sum" 2>/dev/null)
rm -f "$tmp.sum"
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
if [ "$got" = "$want" ]; then
  mv -f "$tmp" "$f" && echo "relay $self ok $bytes $secs $got"
else
  rm -f "$tmp"
  echo "relay $self bad $bytes $secs $got expected $want"
fi
