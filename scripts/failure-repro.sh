#!/usr/bin/env bash
# failure-repro.sh: the failure test's elastic node kill, without gpuaccept, on one machine over loopback (as the
# H200 field run of 2026-12-04 had it). Two torchrun agents, "a" and "b", run scripts/ddp_train.py with the
# window's launcher flags; once the job runs steadily every process of b is killed (found by a mark in its
# environment: under PyTorch 2.x the workers live outside the agent's process group), and b is relaunched a few
# seconds later, while a re-forms the job. Run twice: with the agent-shared store (PyTorch 2.4+'s default) and
# with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (what gpuaccept's launches set). On 2.4 and later the first hangs
# (the relaunched b waits for a MASTER_ADDR that a never writes again; both time out after 60 s), the second
# rejoins; on 1.13 both rejoin.
#
#   PY=python3 bash scripts/failure-repro.sh        (PY: the Python whose torch to test; OUT: where logs go)
#
# Environment: PY (python3), OUT (a fresh /tmp/gpuaccept-repro.XXXXXX), PORT (29610; PORT and PORT+1 are used),
# RELAUNCH_AFTER (5: seconds between the kill and b's relaunch, the field's), WAIT (120: seconds to wait for the
# job to go on), GPU (unset: CUDA hidden, gloo on CPU, as the field's two nodes on one GPU; GPU=1 keeps CUDA).
# Prints one line per run and "verdict: ..."; exit 0 when the run with the variable rejoined, 1 otherwise.
set -u
PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d /tmp/gpuaccept-repro.XXXXXX)}
PORT=${PORT:-29610}
RELAUNCH_AFTER=${RELAUNCH_AFTER:-5}
WAIT=${WAIT:-120}
mark=gpuaccept-repro-$$
mkdir -p "$OUT"
cp "$here/ddp_train.py" "$OUT/ddp_train.py" || exit 2

# pids: every process whose environment carries NAME's mark.
pids() {
	grep -lsxzF "GPUACCEPT_REPRO=$mark-$1" /proc/[0-9]*/environ | sed 's,^/proc/,,; s,/environ$,,'
}
killall_of() { for p in $(pids "$1"); do kill -KILL "$p" 2>/dev/null; done; }

# agent NAME RUN LOG [ENV...]: one launcher, in the background, marked.
agent() {
	local name=$1 run=$2 log=$3
	shift 3
	mkdir -p "$OUT/$run/ckpt"
	# Twice in the background: not this shell's job, so a kill is not reported as one.
	( (
		[ -n "${GPU:-}" ] || export CUDA_VISIBLE_DEVICES=
		export GPUACCEPT_REPRO=$mark-$run GPUACCEPT_NODE=$name LOGLEVEL=INFO PYTHONUNBUFFERED=1 "$@"
		exec setsid $PY -m torch.distributed.run --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d \
			--rdzv_endpoint=127.0.0.1:$port --rdzv_id=$mark-$run --max_restarts=3 --monitor_interval=1 \
			--rdzv_conf=last_call_timeout=5,join_timeout=60 --redirects=1 --tee=1 --log_dir="$OUT/$run/logs-$name-$RANDOM" \
			"$OUT/ddp_train.py" --ckpt-dir "$OUT/$run/ckpt" --ckpt-every=3 --hidden=1024 --timeout=20 --step-time=0.3
	) >>"$log" 2>&1 </dev/null & )
}

# run RUN [ENV...]: a and b, b killed whole and relaunched; prints the outcome.
run() {
	local run=$1
	shift
	local a=$OUT/$run-a.log b=$OUT/$run-b.log
	agent a "$run" "$a" "$@"
	sleep 3 # a hosts the rendezvous store
	agent b "$run" "$b" "$@"
	local i
	for i in $(seq 1 180); do
		grep -q "world=2 step=8 " "$a" 2>/dev/null && break
		sleep 1
	done
	if ! grep -q "world=2 step=8 " "$a"; then
		echo "$run: the job never ran steadily at world=2 (logs: $a $b)"
		killall_of "$run"
		return 2
	fi
	for p in $(pids "$run"); do grep -qzxF "GPUACCEPT_NODE=b" "/proc/$p/environ" 2>/dev/null && kill -KILL "$p"; done
	local t0=$SECONDS
	sleep "$RELAUNCH_AFTER"
	echo "# relaunched" >>"$b"
	agent b "$run" "$b" "$@"
	local outcome="hung: no step after the kill within ${WAIT} s"
	while [ $((SECONDS - t0)) -lt "$WAIT" ]; do
		sleep 1
		if sed -n '/# relaunched/,$p' "$b" | grep -q "world=2 step="; then
			outcome="b rejoined: world=2 steps again $((SECONDS - t0)) s after the kill"
			break
		fi
		if grep -q "world=1 step=" "$a"; then
			outcome="a went on alone (b not back yet) $((SECONDS - t0)) s after the kill"
		fi
	done
	grep -h "DistStoreError" "$a" "$b" 2>/dev/null | head -2 | sed 's/^/    /'
	killall_of "$run"
	echo "$run: $outcome (logs: $a $b)"
	case $outcome in "b rejoined"*) return 0 ;; *) return 1 ;; esac
}

echo "torch $($PY -c 'import torch; print(torch.__version__)' 2>&1 | tail -1); logs in $OUT"
port=$PORT run shared
shared=$?
port=$((PORT + 1)) run fixed TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
fixed=$?
case "$shared$fixed" in
2? | ?2) echo "verdict: none: the two agents never ran one job at world=2 (b started too late for a's 5 s last call?)" ;;
10) echo "verdict: the agent-shared store is the cause: b hangs with it, rejoins with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" ;;
00) echo "verdict: b rejoins either way (PyTorch before 2.4, or a version that fixed it)" ;;
*) echo "verdict: b did not rejoin with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: another cause (logs above)" ;;
esac
[ "$fixed" = 0 ]
