#!/usr/bin/env bash
# Installs what the lab needs, once. Safe to re-run; a non-root user gets a
# note instead (the lab tests then skip themselves and say why).
set -euo pipefail
# slurmctld slurmd slurm-client munge: lab.sh slurm (libpam-slurm-adopt: its --adopt mode); srun --mpi=pmix dlopens libpmix.so from libpmix-dev;
# fio: the staging phase's disk baseline; podman runc busybox-static: podman on the lab hosts (runc: crun fails
# there) and testimage.sh's image; busybox httpd also serves lab.sh storage, curl is what hosts fetch with;
# python3-torch: torchrun and the failure test's DDP job (gloo on CPU); chromium (and poppler-utils: pdfinfo, pdftotext): the HTML report's test in a
# real headless browser; awscli: s3:// staging sources against the lab's object store; docker-registry: the
# lab's container registry for image.mode pull; gcc libslurm-dev: lab.sh slurm --pyxis builds its Pyxis stand-in (a
# SPANK plugin) against spank.h; etcd-server containerd containernetworking-plugins: the lab's Kubernetes
# (lab/kube.sh; kubectl is not needed by anything, only handy for a person looking at it)
pkgs=(openssh-server openssh-client openmpi-bin libopenmpi-dev iproute2 procps psmisc pdsh util-linux coreutils
  slurmctld slurmd slurm-client munge libpam-slurm-adopt libpmix-dev fio podman runc busybox-static curl python3-torch chromium poppler-utils awscli docker-registry gcc libslurm-dev
  etcd-server containerd containernetworking-plugins)
kube=
if [ "${1-}" = kube ]; then
  kube=1
fi
# A containerd already there (Docker's containerd.io, which conflicts with Debian's package) serves the lab too.
if command -v containerd >/dev/null && ! dpkg-query -W -f='${Status}' containerd 2>/dev/null | grep -q "ok installed"; then
  keep=()
  for p in "${pkgs[@]}"; do [ "$p" = containerd ] || keep+=("$p"); done
  pkgs=("${keep[@]}")
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: not root; lab packages missing (${missing[*]}): lab tests will be skipped" >&2
    exit 0
  fi
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# PyTorch 2.x for the failure test's second lab run: Debian 13's python3-torch unpacked into a root filesystem
# under /var/cache (once per machine, ~1-4 minutes; nothing installed on the machine itself).
[ "$(id -u)" = 0 ] && bash "$(dirname "$0")/lab/torch2.sh" >/dev/null
# With the argument kube (make kubetest): the lab's Kubernetes binaries (kube-apiserver, kubelet,
# kube-controller-manager, kube-scheduler v1.31.4), built from the Go module proxy into
# /var/cache/gpuaccept/kube-v1.31.4 once per machine (~6-7 minutes on 2 cores at nice 19, ~1.5 GB of module and
# build cache); a second run finds them at once. make test builds them beside its first tests instead
# (scripts/test.sh). A build that fails leaves the Kubernetes tests to skip, saying why.
if [ -n "$kube" ] && [ "$(id -u)" = 0 ] && command -v go >/dev/null; then
  bash "$(dirname "$0")/lab/kube.sh" build >/dev/null || echo "deps: the lab's Kubernetes binaries could not be built" >&2
fi
exit 0
