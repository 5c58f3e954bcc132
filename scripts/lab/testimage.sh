#!/usr/bin/env bash
# testimage.sh: builds the lab's test container image offline, in about a second: FROM scratch with a static
# busybox (/bin/busybox plus applet links: sh ls cat echo sleep sha256sum ...) and a stand-in /usr/bin/nvidia-smi
# that prints one fake GPU, so a container smoke test (`nvidia-smi -L`) runs on GPU-less lab hosts; and the
# gpuaccept stand-in binary at /usr/local/bin/standin, so that a lab host can run an inference server in it:
# `podman run -d --network host IMAGE standin openai-server --port 8000 ...` (scripts/standins/openai).
#
#   testimage.sh --standin FILE [--pad BYTES] [--tag REF] OUTDIR
#
# --standin FILE is a static build of scripts/standins/cmd/standin (CGO_ENABLED=0: the image has no libc);
# lab.BuildTestImage builds it.
# --pad BYTES adds /pad.bin, BYTES of random data (suffixes K M G as powers of 1024: 256M), so a benchmark can
# push an archive of a chosen size; REF defaults to localhost/gpuaccept-lab:1. Writes:
#   OUTDIR/image.docker.tar  docker-archive (podman load -i; `docker load` reads it too)
#   OUTDIR/image.oci.tar     oci-archive
#   OUTDIR/image.env         sh-sourceable, values single-quoted:
#     IMAGE_REF               the tag both archives carry
#     IMAGE_ID                sha256:<64 hex>, the config digest: what `podman image inspect --format {{.Id}}`
#                             shows (without the sha256: prefix) after loading either archive; the pin to check
#     IMAGE_OCI_DIGEST        sha256:<64 hex>, the manifest digest that the oci-archive's index.json lists (the
#                             docker-archive has another manifest, so this pins the oci-archive only)
#     IMAGE_DOCKER_ARCHIVE IMAGE_OCI_ARCHIVE   the archives' file names (relative to OUTDIR)
#     IMAGE_DOCKER_SHA256 IMAGE_OCI_SHA256     sha256 of each archive file (for staging checks)
#     IMAGE_DOCKER_SIZE IMAGE_OCI_SIZE         their sizes in bytes
#     IMAGE_PAD                                the --pad bytes
# The image ID changes with every build (the config records the build time); read it from image.env.
#
# Needs podman and busybox-static (bash scripts/deps.sh). podman runs with a throwaway store
# (--root/--runroot/--tmpdir under OUTDIR/.store, its own containers.conf and storage.conf, and as root a private
# mount namespace whose /var/lib/containers, where podman keeps its blob cache, is OUTDIR/.store too), removed at
# the end: the machine's own image store is never touched. (podman wants a runroot of at most 50 characters:
# under a longer OUTDIR it is a fresh /tmp/gpuaccept-testimage.XXXXXX, removed too.)
set -euo pipefail

PROG=testimage.sh
die() {
	echo "$PROG: $*" >&2
	exit 1
}
usage_die() {
	echo "$PROG: $*" >&2
	echo "usage: $PROG --standin FILE [--pad BYTES] [--tag REF] OUTDIR" >&2
	exit 2
}

PAD=0 REF=localhost/gpuaccept-lab:1 OUT="" STANDIN=""
while (($#)); do
	case $1 in
	--pad) (($# >= 2)) || usage_die "--pad needs a value"; PAD=$2; shift 2 ;;
	--pad=*) PAD=${1#*=}; shift ;;
	--tag) (($# >= 2)) || usage_die "--tag needs a value"; REF=$2; shift 2 ;;
	--tag=*) REF=${1#*=}; shift ;;
	--standin) (($# >= 2)) || usage_die "--standin needs a file"; STANDIN=$2; shift 2 ;;
	--standin=*) STANDIN=${1#*=}; shift ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
		exit 0
		;;
	-*) usage_die "unknown option $1" ;;
	*)
		[[ -z $OUT ]] || usage_die "one OUTDIR only (got $OUT and $1)"
		OUT=$1
		shift
		;;
	esac
done
[[ -n $OUT ]] || usage_die "OUTDIR missing"
[[ -n $STANDIN ]] || usage_die "--standin missing (a static build of scripts/standins/cmd/standin)"
[[ -f $STANDIN && -x $STANDIN ]] || die "--standin '$STANDIN': not an executable file"
if LC_ALL=C ldd "$STANDIN" >/dev/null 2>&1; then
	die "--standin '$STANDIN' is dynamically linked: build it with CGO_ENABLED=0 (the image has no libc)"
fi
[[ $REF =~ ^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$ ]] || usage_die "bad --tag '$REF'"
if [[ $PAD =~ ^[0-9]+[KMGkmg]?$ ]]; then
	PAD=$(numfmt --from=iec "${PAD^^}") || usage_die "bad --pad '$PAD'"
else
	usage_die "bad --pad '$PAD': bytes, optionally with K, M or G (256M)"
fi

command -v podman >/dev/null || die "podman missing (apt-get install podman runc, or bash scripts/deps.sh)"
BUSYBOX=""
for b in /bin/busybox /usr/bin/busybox; do
	# the static build only: the image has no libc
	if [[ -x $b ]] && ! LC_ALL=C ldd "$b" >/dev/null 2>&1; then BUSYBOX=$b && break; fi
done
[[ -n $BUSYBOX ]] || die "no static busybox (apt-get install busybox-static)"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
[[ $OUT =~ ^/[A-Za-z0-9._/+-]*$ ]] || die "OUTDIR '$OUT': no spaces or special characters, please"
ST=$OUT/.store
rm -rf "$ST" "$OUT/image.docker.tar" "$OUT/image.oci.tar" "$OUT/image.env"
RUN=$ST/run
if ((${#RUN} > 50)); then # podman refuses a longer runroot: then a short one beside, removed as well
	RUN=$(mktemp -d /tmp/gpuaccept-testimage.XXXXXX)
fi
trap 'rm -rf "$ST" "$RUN"' EXIT
mkdir -p "$ST/rootfs/bin" "$ST/rootfs/usr/bin" "$ST/rootfs/usr/local/bin" "$ST/rootfs/tmp" "$ST/root" "$RUN" "$ST/tmp" "$ST/copytmp" "$ST/varlib"
chmod 1777 "$ST/rootfs/tmp"

# ---------------------------------------------------------------- the root filesystem
R=$ST/rootfs
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh ls cat echo sleep sha256sum md5sum env true false id hostname uname head tail wc dd mkdir rm cp mv \
	ln touch test grep sed sync date; do
	ln -s busybox "$R/bin/$a"
done
cat >"$R/usr/bin/nvidia-smi" <<'EOF'
#!/bin/sh
# gpuaccept lab stand-in for nvidia-smi: the lab has no GPU; one fake GPU for container smoke tests
echo "GPU 0: gpuaccept lab container (UUID: GPU-00000000-0000-0000-0000-000000000000)"
EOF
chmod 755 "$R/usr/bin/nvidia-smi"
cp "$STANDIN" "$R/usr/local/bin/standin"
chmod 755 "$R/usr/local/bin/standin"
if ((PAD > 0)); then
	head -c "$PAD" /dev/urandom >"$R/pad.bin"
fi

# ---------------------------------------------------------------- a throwaway podman
cat >"$ST/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
lock_type = "file"
tmp_dir = "$ST/tmp"
image_copy_tmp_dir = "$ST/copytmp"
EOF
cat >"$ST/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$ST/root"
runroot = "$RUN"
EOF
export CONTAINERS_CONF=$ST/containers.conf CONTAINERS_STORAGE_CONF=$ST/storage.conf
P=(podman --root "$ST/root" --runroot "$RUN" --tmpdir "$ST/tmp")

# As root, the podman steps run in a private mount namespace with OUTDIR/.store/varlib as /var/lib/containers
# (podman 4 keeps its blob-info cache there whatever --root says).
build() {
	local cfg
	tar -C "$R" --owner=0 --group=0 --numeric-owner --sort=name -cf "$ST/rootfs.tar" .
	cfg=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'CMD ["/bin/sh"]')
	# import prints sha256:ID; both saves read the store at once
	"${P[@]}" import -q "${cfg[@]}" --message "gpuaccept lab test image" "$ST/rootfs.tar" "$REF" >"$ST/id"
	local pid rc=0
	"${P[@]}" save -q --format docker-archive -o "$OUT/image.docker.tar" "$REF" &
	pid=$!
	"${P[@]}" save -q --uncompressed --format oci-archive -o "$OUT/image.oci.tar" "$REF" || rc=$?
	wait "$pid" || rc=$?
	return $rc
}
if [[ $EUID == 0 ]] && command -v unshare >/dev/null; then
	[[ -d /var/lib/containers ]] || { mkdir -p /var/lib/containers && chmod 700 /var/lib/containers; }
	export -f build
	export R ST OUT REF
	# the array goes through the environment as a string: every element is free of spaces
	# shellcheck disable=SC2016 # expanded by the inner bash
	PS=${P[*]} unshare --mount --propagation private bash -c '
		set -euo pipefail
		read -r -a P <<<"$PS"
		mount --bind "$ST/varlib" /var/lib/containers
		build'
else
	build
fi

# ---------------------------------------------------------------- image.env
read -r id <"$ST/id"
id=${id#sha256:}
[[ $id =~ ^[0-9a-f]{64}$ ]] || die "podman image inspect gave the image ID '$id', not 64 hex digits"
index=$(tar -xOf "$OUT/image.oci.tar" index.json) || die "no index.json in $OUT/image.oci.tar"
oci=$(printf '%s' "$index" | grep -o '"digest": *"sha256:[0-9a-f]\{64\}"' | head -n 1 | grep -o 'sha256:[0-9a-f]*') ||
	die "no manifest digest in the oci-archive's index.json: $index"
read -r dsum _ < <(sha256sum "$OUT/image.docker.tar")
read -r osum _ < <(sha256sum "$OUT/image.oci.tar")
{
	printf "IMAGE_REF='%s'\nIMAGE_ID='sha256:%s'\nIMAGE_OCI_DIGEST='%s'\n" "$REF" "$id" "$oci"
	printf "IMAGE_DOCKER_ARCHIVE='image.docker.tar'\nIMAGE_OCI_ARCHIVE='image.oci.tar'\n"
	printf "IMAGE_DOCKER_SHA256='%s'\nIMAGE_OCI_SHA256='%s'\n" "$dsum" "$osum"
	printf "IMAGE_DOCKER_SIZE='%s'\nIMAGE_OCI_SIZE='%s'\nIMAGE_PAD='%s'\n" \
		"$(stat -c %s "$OUT/image.docker.tar")" "$(stat -c %s "$OUT/image.oci.tar")" "$PAD"
} >"$OUT/.image.env.new"
mv -f "$OUT/.image.env.new" "$OUT/image.env"
echo "$PROG: $REF sha256:$id in $OUT (image.docker.tar, image.oci.tar, image.env)"
