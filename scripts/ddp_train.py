# gpuaccept's training workload: a small PyTorch DistributedDataParallel
# job, launched by torchrun on every node, that the training load test
# measures and a node failure can be measured against. nccl backend when
# CUDA is there, gloo otherwise.
#
# Log contract (stdout, one line per event; your own training command must
# print the same to be measured). Every line starts with "GPUACCEPT ", may
# carry a launcher's prefix before that, and is key=value pairs after it:
#   GPUACCEPT start t=UNIX node=NAME rank=R world=W restart=N resume_step=S [torch=VERSION]
#   GPUACCEPT step t=UNIX node=NAME rank=R world=W step=S step_time=SECS
#       compute=SECS wait=SECS samples=N [mem_peak_mib=MIB mem_total_mib=MIB]
#       [tokens=N] [loss=X]
#   GPUACCEPT checkpoint t=UNIX node=NAME rank=R step=S
#   GPUACCEPT error t=UNIX node=NAME rank=R step=S msg=TEXT-TO-END-OF-LINE
# t is seconds since the epoch (float); NAME is $GPUACCEPT_NODE (the
# inventory's name) or the hostname; resume_step is the step the job
# continues after (0 on a fresh start); torch, optional, is the worker's
# torch.__version__ (recorded beside the launcher's); step lines come from
# every rank after the step's optimizer update; checkpoint lines after the
# checkpoint is on disk (renamed into place, fsync'd).
# A step line's figures are the rank's own, in seconds of its monotonic
# clock: step_time the whole step (data, compute, all-reduce, update and
# any --step-time pad); compute the batch, forward and backward pass (the GPU
# synchronised), which a slow node cannot hide; wait the gradients'
# all-reduce, where every rank waits for the slowest (so a slow node
# shows in everyone's step_time and wait, and in its own compute only);
# samples the rank's batch; mem_peak_mib torch.cuda.max_memory_allocated
# since the start and mem_total_mib the device's memory, on CUDA only.
# Keys may be added; a reader ignores those it does not know.
import argparse
import atexit
import datetime
import os
import signal
import socket
import stat
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

NODE = os.environ.get("GPUACCEPT_NODE") or socket.gethostname()
RANK = int(os.environ.get("RANK", "0"))
step = 0


def log(kind, **kv):
    words = ["GPUACCEPT", kind, "t=%.3f" % time.time(), "node=" + NODE, "rank=%d" % RANK]
    msg = kv.pop("msg", None)
    words += ["%s=%s" % (k, v) for k, v in kv.items()]
    if msg is not None:
        words.append("msg=" + " ".join(str(msg).split()))
    print(" ".join(words), flush=True)


def newest_checkpoint(d):
    best = None
    for name in os.listdir(d):
        if name.startswith("step-") and name.endswith(".pt"):
            try:
                s = int(name[5:-3])
            except ValueError:
                continue
            if best is None or s > best[0]:
                best = (s, os.path.join(d, name))
    return best


def save(d, model, opt, s):
    # Atomic: a killed writer leaves a .tmp, never a torn step-N.pt.
    path = os.path.join(d, "step-%d.pt" % s)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        torch.save({"step": s, "model": model.state_dict(), "opt": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_busy():
    """On a simulated node (the lab, the demo), tells the nvidia-smi stand-in that this process loads the GPUs:
    STATE/busy/<pid>, removed at exit. STATE is $GPUACCEPT_STANDIN_STATE, else /srv/gpuaccept-standin, and only
    a directory of this user's that no one else may write. A real node has neither: nothing is written."""
    d = os.environ.get("GPUACCEPT_STANDIN_STATE") or "/srv/gpuaccept-standin"
    busy = os.path.join(d, "busy")
    try:
        for p in (d, busy):
            if p == busy and not os.path.lexists(busy):
                os.mkdir(busy, 0o755)
            st = os.lstat(p)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
                return
        pid = os.getpid()
        tmp, final = os.path.join(busy, ".%d.tmp" % pid), os.path.join(busy, str(pid))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, b"%d\n" % pid)
        finally:
            os.close(fd)
        os.rename(tmp, final)
    except OSError:
        return
    atexit.register(lambda: os.path.lexists(final) and os.unlink(final))


def main():
    global step
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--ckpt-every", type=int, default=5, help="steps between checkpoints (0: none)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this step (0: run until stopped)")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=30, help="seconds a collective may take")
    ap.add_argument("--step-time", type=float, default=0.5,
                    help="seconds a step takes at least (a small model is fast; a real step is not)")
    a = ap.parse_args()
    mark_busy()

    def stopped(signum, _frame):
        log("error", step=step, msg="stopped by signal %d" % signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=a.timeout))
    world = dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(a.hidden, a.hidden), nn.ReLU(), nn.Linear(a.hidden, a.hidden)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    os.makedirs(a.ckpt_dir, exist_ok=True)

    # Every rank resumes from what rank 0 finds: the newest checkpoint in a
    # directory all nodes see.
    found = [None]
    if dist.get_rank() == 0:
        n = newest_checkpoint(a.ckpt_dir)
        found = [n[1] if n else None]
    dist.broadcast_object_list(found, src=0)
    if found[0]:
        state = torch.load(found[0], map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    log("start", world=world, restart=os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), resume_step=step,
        torch=torch.__version__)
    ddp = DDP(model, device_ids=[device.index] if cuda else None)
    gen = torch.Generator(device="cpu").manual_seed(1234 + dist.get_rank())
    params = [p for p in model.parameters() if p.requires_grad]
    mem = {}
    if cuda:
        mem["mem_total_mib"] = "%.0f" % (torch.cuda.get_device_properties(device).total_memory / 2**20)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    try:
        while a.steps == 0 or step < a.steps:
            began = time.monotonic()
            x = torch.randn(a.batch, a.hidden, generator=gen).to(device)
            opt.zero_grad()
            # The gradients are all-reduced apart from the backward pass
            # (DDP would overlap the two), so that compute and wait are
            # each measured: a straggler is the node whose compute is slow.
            with ddp.no_sync():
                loss = ddp(x).pow(2).mean()
                loss.backward()
            sync()
            computed = time.monotonic()
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            dist.all_reduce(flat)
            sync()
            reduced = time.monotonic()
            flat /= world
            i = 0
            for p in params:
                n = p.grad.numel()
                p.grad.copy_(flat[i:i + n].view_as(p.grad))
                i += n
            opt.step()
            time.sleep(max(0.0, a.step_time - (time.monotonic() - began)))
            sync()
            step += 1
            if cuda:
                mem["mem_peak_mib"] = "%.0f" % (torch.cuda.max_memory_allocated(device) / 2**20)
            log("step", world=world, step=step, step_time="%.6f" % (time.monotonic() - began),
                compute="%.6f" % (computed - began), wait="%.6f" % (reduced - computed), samples=a.batch,
                loss="%.5f" % loss.item(), **mem)
            if a.ckpt_every > 0 and step % a.ckpt_every == 0:
                if dist.get_rank() == 0:
                    save(a.ckpt_dir, model, opt, step)
                    log("checkpoint", step=step)
                dist.barrier()
    except Exception as e:  # a peer gone: say so, then let torchrun decide
        log("error", step=step, msg="%s: %s" % (type(e).__name__, e))
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
