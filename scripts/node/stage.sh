# gpuaccept staging: copies one source to this node's local disk, as a
# training job's setup would, and says how long it took and what it wrote.
#
#   bash -c STAGE stage prepare DIR                 make DIR afresh; prints "avail BYTES"
#   bash -c STAGE stage fetch DIR NAME KIND SHOWN [ENDPOINT] <SOURCE
#                                                   stage SOURCE (one line on
#                                                   stdin) as DIR/NAME
#
# KIND is path (a file or directory on shared storage), http (http:// and
# https://, with curl or wget), s3 (aws s3 cp; ENDPOINT, when given, is an
# S3-compatible store's address: --endpoint-url), gs (gcloud storage cp, else
# gsutil cp) or az (azcopy copy; az://ACCOUNT/CONTAINER/PATH is
# https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH, credentials as
# azcopy finds them: azcopy login, AZCOPY_AUTO_LOGIN_TYPE, ...; one blob
# with a SAS token in its query goes through curl or wget instead, since
# azcopy would have the token in its argv; a prefix with one is refused).
# A SOURCE ending in "/" on an object store is a prefix, copied
# recursively.
#
# Checksums: a single file is hashed while it is written (the bytes go
# through tee into openssl dgst, or sha256sum without openssl), except from
# azcopy, which writes the file itself: the hash reads it after. A
# directory (or a prefix) is hashed after the copy, file by file; its sha256 is that of the manifest
# `sha256sum` writes for every file, sorted by path (./relative/path), which
# is left beside it as DIR/.NAME.sha256. The copy is fsynced before the
# clock stops.
#
# Output, one line on stdout:
#   staged bytes=N files=N seconds=S sha256=HEX checksum=tee|after tool=TOOL hasher=openssl|sha256sum
#   error MESSAGE            (exit 1; MESSAGE names the source and says why)
# The copy is written as DIR/.NAME.gpuaccept-part and renamed to DIR/NAME
# once complete, so DIR/NAME is never a partial copy.
#
# SOURCE comes on stdin, not in argv, which every user of the node sees:
# a signed URL carries its credential in the query. SHOWN is how messages
# name it (the URL without its query). curl and wget read the URL from a
# file only this user can read.
set -u -o pipefail
op=$1 dir=$2

now() { date +%s.%N; }

# sha [FILE]: the sha256 of FILE or stdin as "HEX ...". openssl's is several
# times coreutils' where the CPU has SHA extensions, so the hash is not what
# limits a fast link or disk; sha256sum where there is no openssl.
if openssl dgst -sha256 -r </dev/null >/dev/null 2>&1; then
  hasher=openssl
  sha() { openssl dgst -sha256 -r "$@"; }
else
  hasher=sha256sum
  sha() { sha256sum "$@"; }
fi

# @include remote/private.sh
# private: DIR's name is predictable (gpuaccept-<run id>): it is written in
# only when it is this user's alone, never one another user made or a
# link they planted (gpuaccept_private says why). $1: what the error line
# names first.
private() {
  local why
  why=$(gpuaccept_private "$dir" parents 2>&1) || { echo "error ${1:-}${why#gpuaccept: }"; exit 1; }
}

case $op in
prepare)
  # DIR is the window's own (gpuaccept-<run id>): what an interrupted
  # attempt left there goes, so a resumed window stages everything again.
  # Only when it is ours: another user's directory or link stays, and is
  # refused.
  if [ -d "$dir" ] && [ ! -L "$dir" ] && [ -O "$dir" ]; then rm -rf -- "$dir"; fi
  private
  avail=$(df -P -B1 -- "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }')
  echo "avail ${avail:-0}"
  exit 0
  ;;
fetch) ;;
*)
  echo "error unknown operation $op"
  exit 2
  ;;
esac

name=$3 kind=$4 shown=$5 endpoint=${6:-}
IFS= read -r src || [ -n "$src" ] || { echo "error $name ($shown): no source on stdin"; exit 2; }
dst=$dir/$name
part=$dir/.$name.gpuaccept-part
errf=$(mktemp "${TMPDIR:-/tmp}/gpuaccept-stage.XXXXXX") || { echo "error $name ($shown): mktemp failed"; exit 1; }
urlf=
# What the tool said goes to stderr at the end (the window's raw log).
trap 'cat -- "$errf" >&2 2>/dev/null; rm -f -- "$errf" ${urlf:+"$urlf"}' EXIT

fail() {
  local msg
  msg=$(grep -v '^[[:space:]]*$' "$errf" 2>/dev/null | tail -n 3 | tr '\n' ' ' | sed 's/[[:space:]]*$//')
  rm -rf -- "$part"
  echo "error $name ($shown): $1${msg:+: $msg}"
  exit 1
}
# missing: the node lacks the tool this kind of source needs. Not a
# failure of the node: the window says the staging was not measured.
missing() {
  rm -rf -- "$part"
  echo "missing $name ($shown): $1"
  exit 3
}
need() { command -v "$1" >/dev/null 2>&1; }

# single: run the tool (its arguments) with stdout through tee into sha;
# sets sum.
single() {
  local out rc
  out=$("$@" 2>>"$errf" | tee -- "$part" 2>>"$errf" | sha)
  rc=$?
  [ $rc -eq 0 ] || fail "$1 failed (exit $rc)"
  sum=${out%% *}
}

# fetchurl URL: an http(s) URL through curl or wget. The URL goes to the
# tool in a file of this user's (mktemp: 0600), never in its argv: a
# signed URL's query is its credential.
fetchurl() {
  urlf=$(mktemp "${TMPDIR:-/tmp}/gpuaccept-url.XXXXXX") || fail "mktemp failed"
  if need curl; then
    tool=curl
    # -f: an HTTP error is an error (404 is not retried); --retry covers
    # transient failures only, a few times. The config file's url line
    # takes the URL as written (quotes and backslashes escaped).
    esc=${1//\\/\\\\}
    printf 'url = "%s"\n' "${esc//\"/\\\"}" >"$urlf"
    single curl -fsSL --connect-timeout 20 --retry 2 --retry-delay 1 -K "$urlf"
  elif need wget; then
    tool=wget
    printf '%s\n' "$1" >"$urlf"
    single wget -q --tries=3 --timeout=20 -O - -i "$urlf"
  else
    missing "neither curl nor wget is installed on this node"
  fi
}

private "$name ($shown): "
rm -rf -- "$part"
prefix=
case $src in */) prefix=1 ;; esac
checksum=tee tool='' sum=''
t0=$(now)
case $kind in
path)
  [ -e "$src" ] || fail "no such file or directory on this node"
  [ -r "$src" ] || fail "not readable by $(id -un)"
  if [ -d "$src" ]; then
    tool=cp checksum=after
    cp -R -- "$src" "$part" 2>>"$errf" || fail "copy failed"
  else
    tool='cat'
    single cat -- "$src"
  fi
  ;;
http)
  fetchurl "$src"
  ;;
s3)
  need aws || missing "the aws CLI is not installed on this node (needed for s3://)"
  tool=aws
  set -- aws
  [ -z "$endpoint" ] || set -- aws --endpoint-url "$endpoint"
  if [ -n "$prefix" ]; then
    checksum=after
    "$@" s3 cp --recursive --only-show-errors "$src" "$part" 2>>"$errf" >&2 || fail "aws s3 cp failed"
  else
    single "$@" s3 cp --only-show-errors "$src" -
  fi
  ;;
gs)
  if need gcloud; then
    tool=gcloud
    set -- gcloud storage cp
  elif need gsutil; then
    tool=gsutil
    set -- gsutil -q cp
  else
    missing "neither gcloud nor gsutil is installed on this node (needed for gs://)"
  fi
  if [ -n "$prefix" ]; then
    checksum=after
    mkdir -p -- "$part" || fail "cannot create $part"
    "$@" -r "${src}*" "$part/" 2>>"$errf" >&2 || fail "$tool cp failed"
  else
    single "$@" "$src" -
  fi
  ;;
az)
  rest=${src#az://}
  account=${rest%%/*}
  url="https://$account.blob.core.windows.net/${rest#*/}"
  case $src in
  *\?*)
    # A SAS token (the query) must never be in a command line, which every
    # user of the node reads in /proc, and azcopy takes its URL only
    # there: one blob is fetched as any https URL is; a prefix needs
    # azcopy, and so azcopy's own credentials.
    case ${src%%\?*} in */)
      fail "a SAS token for a prefix would be in azcopy's command line, which every user of this node can read: give azcopy its credentials (azcopy login, AZCOPY_AUTO_LOGIN_TYPE) or name the blobs one by one"
      ;;
    esac
    fetchurl "$url"
    ;;
  *)
    need azcopy || missing "azcopy is not installed on this node (needed for az://)"
    tool=azcopy checksum=after
    if [ -n "$prefix" ]; then
      mkdir -p -- "$part" || fail "cannot create $part"
      azcopy copy --recursive --log-level=ERROR "${url}*" "$part/" >>"$errf" 2>&1 || fail "azcopy copy failed"
    else
      azcopy copy --log-level=ERROR "$url" "$part" >>"$errf" 2>&1 || fail "azcopy copy failed"
    fi
    ;;
  esac
  ;;
*)
  fail "unknown kind of source $kind"
  ;;
esac

# An empty prefix copies nothing and the tools exit 0: say so rather than
# stage an empty directory.
if [ -n "$prefix" ] && [ "$kind" != path ] && [ -z "$(find "$part" -type f -print -quit 2>/dev/null)" ]; then
  fail "no object under this prefix${endpoint:+ at $endpoint}"
fi
if [ -d "$part" ]; then
  (cd -- "$part" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) >"$dir/.$name.sha256" 2>>"$errf" ||
    fail "sha256sum of the copy failed"
  files=$(wc -l <"$dir/.$name.sha256")
  bytes=$(find "$part" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  sum=$(sha256sum <"$dir/.$name.sha256") || fail "sha256sum failed"
  sum=${sum%% *}
else
  [ -f "$part" ] || fail "$tool wrote no file"
  files=1
  bytes=$(stat -c %s -- "$part") || fail "stat failed"
  if [ "$checksum" = after ]; then
    sum=$(sha <"$part") || fail "$hasher of the copy failed"
    sum=${sum%% *}
  fi
fi
# fsync what was written (every file of a tree): other writers' dirty
# pages are not ours to wait for. A sync(1) too old for file arguments
# syncs everything.
find "$part" -type f -exec sync -- {} + 2>/dev/null || sync
t1=$(now)
rm -rf -- "$dst"
mv -- "$part" "$dst" || fail "cannot rename the copy into place"
seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
echo "staged bytes=$bytes files=$files seconds=$seconds sha256=$sum checksum=$checksum tool=$tool hasher=$hasher"
