#!/usr/bin/env bash
# torch2.sh: builds, once per machine, a root filesystem with a PyTorch of the 2.x line (Debian 13 trixie's
# python3-torch 2.6 and its whole dependency closure, Python 3.13 and glibc included), so the lab can run the
# failure test on PyTorch 2.x as well as on the machine's own 1.13 (Debian 12). Offline apart from the Debian
# mirror; nothing is installed on the machine: apt runs with a private sources list, lists and cache, each .deb is
# unpacked with dpkg-deb -x (no maintainer scripts), then the links those scripts would make are made here.
#
#   torch2.sh [DIR]      DIR defaults to $GPUACCEPT_TORCH2_DIR, else /var/cache/gpuaccept/torch2-trixie
#
# Prints DIR/rootfs when it is ready. A container runs it with `--rootfs DIR/rootfs`, or a lab image with its
# usr/ mounted at /usr, /lib and /lib64 and its etc/ld.so.cache at /etc/ld.so.cache (orchestrator/labtest), or a
# Kubernetes lab pod with its usr/ mounted over /usr (remote/kubetest).
# DIR/rootfs/TORCH_VERSION holds the Debian version of python3-torch. Re-running is free once built; concurrent
# runs wait for one another (flock). Measured on the lab's 2-core Debian 12 machine: 1-4 minutes (apt update and
# the download of 154 packages, 207 MB: 40-55 s; unpacking: 20 s idle, 3 minutes with the machine loaded); the
# rootfs is ~1 GB. Debian's torch 2.6 is built without libuv, which its own TCPStore asks for by default: a
# sitecustomize in the rootfs makes the other store server the default (see below), and changes nothing else.
set -euo pipefail
PROG=torch2.sh
die() {
	echo "$PROG: $*" >&2
	exit 1
}
dir=${1:-${GPUACCEPT_TORCH2_DIR:-/var/cache/gpuaccept/torch2-trixie}}
# The Debian mirror this machine's apt already uses (its first main-archive URI, deb822 or one-line form), so
# the script names none of its own; GPUACCEPT_TORCH2_MIRROR overrides it.
system_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] && awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] && awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { if ($i !~ /security/) print $i; break } }' "$f"
	done
	return 0 # a glob that matched nothing is no failure (set -e, pipefail)
}
# awk reads it all (grep -m1 or head would close the pipe early: SIGPIPE, and pipefail with set -e ended
# the script at random); the first Debian archive, else the first URI.
mirror=${GPUACCEPT_TORCH2_MIRROR:-$(system_mirror | awk '!f { f = $0 } tolower($0) ~ /debian/ && !d { d = $0 } END { print (d != "" ? d : f) }')}
suite=trixie
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ "$(id -u)" = 0 ] || die "needs root (apt-get and dpkg-deb write root-owned files)"
[ -r "$keyring" ] || die "$keyring is missing (apt-get install debian-archive-keyring)"
[ -n "$mirror" ] || die "no Debian mirror in this machine's apt sources: set GPUACCEPT_TORCH2_MIRROR"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
# .ready-3: the layout this script makes (bump it when that changes, so older builds are made again).
if [ -f "$dir/rootfs/.ready-3" ]; then
	echo "$dir/rootfs"
	exit 0
fi
apt_dir=$dir/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [signed-by=$keyring] $mirror $suite main" >"$apt_dir/sources.list"
: >"$apt_dir/status" # an empty dpkg status: the whole closure, libc and Python included
apt=(apt-get -q -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Dir::State::status=$apt_dir/status"
	-o APT::Install-Recommends=false -o Debug::NoLocking=1)
t0=$(date +%s)
"${apt[@]}" update >"$apt_dir/update.log" 2>&1 || die "apt-get update for $suite failed: $(tail -3 "$apt_dir/update.log")"
# coreutils, tar, grep and sed too: the Kubernetes lab mounts this usr/ over a pod's whole /usr, where the
# window's own commands (the guard's head, mktemp, sha256sum, tar, failure.sh's grep) must still be GNU's
"${apt[@]}" -y --download-only install python3-torch coreutils tar grep sed >"$apt_dir/download.log" 2>&1 ||
	die "downloading python3-torch from $suite failed: $(tail -3 "$apt_dir/download.log")"
t1=$(date +%s)
tmp=$dir/rootfs.tmp
rm -rf "$tmp" "$dir/rootfs"
mkdir -p "$tmp"
for deb in "$apt_dir"/cache/archives/*.deb; do
	dpkg-deb -x "$deb" "$tmp" || die "unpacking $deb failed"
done
# What the packages' maintainer scripts and base-files would have made: the merged-/usr links, the BLAS and
# LAPACK alternatives (torch's libraries link libblas.so.3), the linker cache, a /tmp.
for d in bin sbin lib lib64; do [ -e "$tmp/$d" ] || ln -s "usr/$d" "$tmp/$d"; done
multi=$tmp/usr/lib/x86_64-linux-gnu
[ -e "$multi/blas/libblas.so.3" ] && ln -sf blas/libblas.so.3 "$multi/libblas.so.3"
[ -e "$multi/lapack/liblapack.so.3" ] && ln -sf lapack/liblapack.so.3 "$multi/liblapack.so.3"
printf 'include /etc/ld.so.conf.d/*.conf\n' >"$tmp/etc/ld.so.conf"
/sbin/ldconfig -r "$tmp" || die "ldconfig -r $tmp failed"
mkdir -p "$tmp/tmp" "$tmp/proc" "$tmp/dev" "$tmp/sys"
chmod 1777 "$tmp/tmp"
[ -x "$tmp/usr/bin/python3" ] && [ -d "$tmp/usr/lib/python3/dist-packages/torch" ] || die "no python3 with torch in $tmp"
# Debian's torch 2.6 has no libuv, yet its TCPStore asks for the libuv server by default and the c10d rendezvous
# backend does not say otherwise: torchrun --rdzv_backend=c10d fails at once ("use_libuv was requested but
# PyTorch was build without libuv support"). The wheels on real nodes have libuv; here the other server is made
# the default (and nothing else) by a sitecustomize in place of Debian's (an apport hook in /etc, not used here).
py=$(readlink "$tmp/usr/bin/python3")
rm -f "$tmp/usr/lib/$py/sitecustomize.py"
cat >"$tmp/usr/lib/$py/sitecustomize.py" <<'PY'
# gpuaccept lab (scripts/lab/torch2.sh): Debian's python3-torch 2.6 is built without libuv, yet TCPStore asks
# for the libuv server by default and torch.distributed creates its stores without saying which ("use_libuv was
# requested but PyTorch was build without libuv support"). The wheels on real nodes have libuv. This makes
# every TCPStore use the other server, and changes nothing else: torch.distributed binds TCPStore by name as it
# loads, so the class is replaced as soon as it exists (torch._C._c10d_init, at the start of
# torch.distributed) and before the first submodule that binds it loads.
import os
import sys

os.environ.setdefault("USE_LIBUV", "0")


class _NoLibuv:
    done = False

    def find_spec(self, name, path=None, target=None):
        if self.done or not name.startswith("torch.distributed."):
            return None
        c = sys.modules.get("torch._C._distributed_c10d")
        if c is None or not hasattr(c, "TCPStore"):
            return None
        self.done = True
        base = c.TCPStore

        class TCPStore(base):
            def __init__(self, *args, **kwargs):
                kwargs["use_libuv"] = False
                super().__init__(*args, **kwargs)

        TCPStore.__module__, TCPStore.__qualname__ = base.__module__, base.__qualname__
        c.TCPStore = TCPStore
        d = sys.modules.get("torch.distributed")
        if d is not None and getattr(d, "TCPStore", None) is base:
            d.TCPStore = TCPStore
        return None


sys.meta_path.insert(0, _NoLibuv())
PY
dpkg-deb -f "$(ls "$apt_dir"/cache/archives/python3-torch_*.deb | head -1)" Version >"$tmp/TORCH_VERSION"
: >"$tmp/.ready-3"
mv "$tmp" "$dir/rootfs"
# The .debs are not needed once unpacked (~200 MB).
rm -f "$apt_dir"/cache/archives/*.deb
echo "$PROG: python3-torch $(cat "$dir/rootfs/TORCH_VERSION") from $suite in $dir/rootfs: download $((t1 - t0)) s, unpack $(($(date +%s) - t1)) s" >&2
echo "$dir/rootfs"
