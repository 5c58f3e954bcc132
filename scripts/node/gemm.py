# gpuaccept's per-GPU compute rate: dense bf16 matrix products on every GPU
# of the node at once (a thread per GPU: a matmul releases the GIL and the
# GPUs run in parallel), for a fixed time, so that a GPU that computes
# slowly is named even when no counter says why.
#
# Output contract (stdout, one line per event, "GPUACCEPT gemm " then
# key=value pairs; device runs to the end of the line, it may hold spaces):
#   GPUACCEPT gemm gpu=I tflops=X iters=N secs=S size=N on=cuda|cpu device=NAME
#   GPUACCEPT gemm error gpu=I msg=TEXT-TO-END-OF-LINE
#   GPUACCEPT gemm done
# TFLOP/s = 2 size^3 iters / secs / 1e12, secs the timed section only:
# the warm-up (cuBLAS's heuristics, the clocks ramping) is left out, and
# the clock stops after the device synchronised, never at a launch.
# Every GPU starts its timed section together (a barrier), so that each
# is measured while the others load the node's power and cooling too.
# Without CUDA it says "no CUDA device" and exits 3, unless --allow-cpu
# (the lab): then one figure, on=cpu, which is no GPU's rate.
# Keys may be added; a reader ignores those it does not know.
# On a simulated node (--allow-cpu) it marks the node's GPUs busy as the
# stand-ins read it (scripts/standins/telemetry_state.go): STATE/busy/<name>
# holding its pid, STATE $GPUACCEPT_STANDIN_STATE or /srv/gpuaccept-standin
# where that exists; the stand-in nvidia-smi then answers with its load rows.
import argparse
import os
import signal
import sys
import threading
import time

NO_DEVICE = 3


def say(*words):
    print(" ".join(["GPUACCEPT", "gemm"] + [str(w) for w in words]), flush=True)


def one_line(s):
    return " ".join(str(s).split())


def mark_busy():
    """The stand-ins' busy marker's path, written; None where there is none."""
    d = os.environ.get("GPUACCEPT_STANDIN_STATE", "")
    if not d and os.path.isdir("/srv/gpuaccept-standin"):
        d = "/srv/gpuaccept-standin"
    if not d:
        return None
    path = os.path.join(d, "busy", "gemm.%d" % os.getpid())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("%d\n" % os.getpid())
    except OSError:
        return None
    return path


def measure(torch, device, size, seconds, barrier):
    """Multiplies on device for seconds after a warm-up; (iters, secs)."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    g = torch.Generator(device=device)
    g.manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=g)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=g)
    c = torch.empty(size, size, device=device, dtype=torch.bfloat16)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    # Warm-up: at least 3 products and a second of work.
    t0 = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - t0 < 1.0:
        torch.matmul(a, b, out=c)
        n += 1
        sync()
    per = (time.perf_counter() - t0) / n
    # Products between two checks of the clock: about 0.2 s of work, so
    # the synchronisations cost nothing measurable.
    batch = max(1, int(0.2 / max(per, 1e-6)))
    barrier.wait()
    iters = 0
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            torch.matmul(a, b, out=c)
        sync()
        iters += batch
        secs = time.perf_counter() - start
        if secs >= seconds:
            return iters, secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60, help="seconds each GPU multiplies for")
    ap.add_argument("--size", type=int, default=8192, help="the square matrices' dimension")
    ap.add_argument("--allow-cpu", action="store_true",
                    help="without CUDA, measure the CPU once (labelled on=cpu) instead of exiting 3")
    a = ap.parse_args()
    if a.seconds <= 0 or a.size <= 0:
        print("gemm: --seconds and --size must be positive", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print("no torch: %s" % one_line(e), flush=True)
        return NO_DEVICE
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
        names = [torch.cuda.get_device_name(i) for i in range(len(devices))]
        on = "cuda"
    elif a.allow_cpu:
        devices, names, on = [torch.device("cpu")], ["cpu"], "cpu"
    else:
        print("no CUDA device (torch %s)" % torch.__version__, flush=True)
        return NO_DEVICE

    busy = mark_busy() if on == "cpu" else None

    def unmark():
        if busy:
            try:
                os.unlink(busy)
            except OSError:
                pass

    def stopped(signum, _frame):
        # The window's end: the marker goes, then the process at once (an
        # interpreter's exit with threads inside torch aborts).
        unmark()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    try:
        return run_all(torch, devices, names, on, a)
    finally:
        unmark()


def run_all(torch, devices, names, on, a):
    barrier = threading.Barrier(len(devices))
    results = [None] * len(devices)

    def run(i):
        try:
            results[i] = measure(torch, devices[i], a.size, a.seconds, barrier)
        except threading.BrokenBarrierError:
            results[i] = "not timed: another GPU failed before the timed section"
        except BaseException as e:  # one GPU's fault is said, then the others'
            results[i] = e
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(devices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = False
    for i, r in enumerate(results):
        if not isinstance(r, tuple):
            failed = True
            say("error", "gpu=%d" % i, "msg=" + one_line(r if r is not None else "no result"))
            continue
        iters, secs = r
        tflops = 2.0 * a.size ** 3 * iters / secs / 1e12
        say("gpu=%d" % i, "tflops=%.6g" % tflops, "iters=%d" % iters, "secs=%.3f" % secs,
            "size=%d" % a.size, "on=" + on, "device=" + one_line(names[i]))
    say("done")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
