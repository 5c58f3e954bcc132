#!/usr/bin/env bash
# The whole suite (make test, and so CI), in two halves at once so that it fits a 2-core machine's half hour:
# one package at a time in each, the lab tests on labs of their own. The window lab tests are split in two: the
# PyTorch jobs (failure test, training, burn-in), which mostly wait on detection and rendezvous timeouts, beside the
# rest, which measure tc-shaped links. A package's timing-sensitive tests never share the machine with a second
# lab package's burst of CPU: the pure packages follow the PyTorch half, the other lab packages the window half.
# Both halves' output is printed whole; the suite fails if either does.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
flags=(-race -count=1 -p 1 -timeout 40m)
torch='^(TestFailure|TestTraining|TestBurnin)'
# remote/kubetest is make kubetest's, not yet the suite's (Makefile).
labpkgs=(./remote ./remote/labtest ./scripts/lab ./scripts/standins)
mapfile -t pure < <($GO list ./... | grep -v -x -e gpuaccept/orchestrator/labtest -e gpuaccept/remote \
	-e gpuaccept/remote/labtest -e gpuaccept/remote/kubetest -e gpuaccept/scripts/lab -e gpuaccept/scripts/standins)
[ ${#pure[@]} -gt 0 ] || { echo "test.sh: go list found no packages" >&2; exit 1; }

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
(
	rc=0
	GPUACCEPT_LABTEST_SHARD=2 $GO test "${flags[@]}" -run "$torch" ./orchestrator/labtest || rc=1
	$GO test "${flags[@]}" "${pure[@]}" || rc=1
	exit $rc
) >"$log/a" 2>&1 &
a=$!

rc=0
$GO test "${flags[@]}" -skip "$torch" ./orchestrator/labtest || rc=1
$GO test "${flags[@]}" "${labpkgs[@]}" || rc=1
wait "$a" || rc=1
echo "== the other half: the PyTorch lab tests, then the packages that need no lab"
cat "$log/a"
exit $rc
