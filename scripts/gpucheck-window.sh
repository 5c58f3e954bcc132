#!/bin/bash
# gpucheck-window.sh: the short device pass this project runs on a borrowed GPU machine (one call, ~65 s on an
# H200 after the machine starts): (1) the node-kill failure test on the machine's own PyTorch over two loopback
# SSH nodes (gpucheck-serve), as the first field run did; (2) a real window through the local transport
# (inventories/local.yaml: preflight, security, diag, staging, intranode with nccl-tests built meanwhile,
# checkpoint); (3) check and check --connect. Results under $OUT (at most 8 files).
# Before: in the repository root, copy ../shared/gpucheck to .gpucheck/kit, build .gpucheck/bin/gpuaccept and
# .gpucheck/bin/gpucheck-serve for linux/amd64 (CGO_ENABLED=0; gpucheck-serve from .gpucheck/kit/src as
# ../shared/gpucheck/README.md says), keep .gpucheck git-ignored, and run `OUT=DIR bash scripts/gpucheck-window.sh`
# there with .gpucheck carried. GPUCHECK_PY names the Python with torch (default /opt/torch/.venv/bin/python3,
# else python3).
set -u
export PYTHONUNBUFFERED=1 COLUMNS=120
R=$(pwd); K=$R/.gpucheck; KIT=$K/kit; G=$K/bin/gpuaccept
W=/tmp/dw; rm -rf $W; mkdir -p $W/runs
LOG=$W/log.txt; : > $LOG
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
note() { echo "$(el)s $*" | tee -a $LOG; }
PY=${GPUCHECK_PY:-$(command -v python3)}
[ -z "${GPUCHECK_PY:-}" ] && [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
note "python $PY: $($PY -c 'import torch;print(torch.__version__)' 2>&1)"
(timeout 240 bash $KIT/build-nccl.sh $KIT/nccl-tests $W/nb $W/nh $PY > $W/nccl-build.log 2>&1; echo "rc=$?" >> $W/nccl-build.log) &
BP=$!
# --- (1) failure test, two loopback SSH nodes (as the field run) ---
WW=$W/failure-win; mkdir -p $WW
sd=$WW/failure; mkdir -p $sd/checkpoints $sd/failure
env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 TMPDIR=/tmp $K/bin/gpucheck-serve -dir $sd -nodes 2 \
  -template $KIT/inv-failure.yaml.tmpl -inventory $WW/failure.yaml -for 400s -env CUDA_VISIBLE_DEVICES= \
  -env PYTHONUNBUFFERED=1 -set PYTHON=$PY > $WW/serve.out 2>&1 &
SP=$!
for i in $(seq 1 100); do grep -q '^serving' $WW/serve.out 2>/dev/null && break; sleep 0.2; done
note "serve: $(head -n1 $WW/serve.out)"
printf '#!/bin/sh\nexec %s "$@"\n' "$PY" > $sd/gpu-01/bin/gpucheck-python
printf '#!/bin/sh\nsleep 3\nexec %s "$@"\n' "$PY" > $sd/gpu-02/bin/gpucheck-python
chmod +x $sd/gpu-0[12]/bin/gpucheck-python
note "failure window start"
timeout -k 5 200 $G run $WW/failure.yaml --runs-dir $W/runs --only failure --detail > $W/failure.out 2> $W/failure.err
note "failure window rc=$?"
kill $SP 2>/dev/null; wait $SP 2>/dev/null
# --- (2) local window ---
wait $BP
note "nccl build: $(tail -n 2 $W/nccl-build.log | tr '\n' ' ')"
NL=$(sed -n 's/^NCCL_LIB=//p' $W/nccl-build.log | tail -n1)
DRV=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1 | tr -d ' ')
CU=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n1)
LENV=(env -i PATH="$W/nb:$PATH" HOME=/root LANG=C.UTF-8 TMPDIR=/tmp COLUMNS=120 LD_LIBRARY_PATH="${NL:+$NL:}/usr/local/cuda/lib64"
  GPUACCEPT_QUOTE_DRIVER=$DRV GPUACCEPT_QUOTE_CUDA=$CU)
mkdir -p /var/tmp
"${LENV[@]}" timeout 40 $G check inventories/local.yaml > $W/local-check.out 2>&1; note "check rc=$?"
"${LENV[@]}" timeout 60 $G check --connect inventories/local.yaml > $W/local-connect.out 2>&1; note "check --connect rc=$?"
"${LENV[@]}" timeout 200 $G run inventories/local.yaml --runs-dir $W/runs --detail --skip allreduce,failure > $W/local-run.out 2> $W/local-run.err
note "local window (all but allreduce/failure) rc=$?"
"${LENV[@]}" timeout 60 $G run inventories/local.yaml --runs-dir $W/runs --only diag > $W/local-diag.out 2> $W/local-diag.err
note "local diag-only rc=$?"
note "done"
# what comes back: logs and the bundles' run.json/report.md (no keys)
find $W -name 'id_ed25519*' -delete
cp $LOG $W/*.out $OUT/ 2>/dev/null
tar -C $W -czf $OUT/bundles.tgz runs failure-win/serve.out failure.err local-run.err local-diag.err nccl-build.log --exclude='*.tgz' 2>/dev/null
tar -C $W -czf $OUT/failure-node-logs.tgz failure-win/failure 2>/dev/null
ls -la $OUT
echo ==== failure; head -c 6000 $W/failure.out; echo ==== local; head -c 5000 $W/local-run.out
