# gpuaccept checkpoint: save a checkpoint the way a training job does (one
# shard per GPU rank, all ranks at once, fsync before it counts as saved),
# or restore one and hash what was read.
#
#   write   BASE NODE SIZE SHARDS SEED NEED
#   restore BASE WRITER SHARDS
#
# BASE is <checkpoint dir>/gpuaccept-<run id> (teardown removes it); its
# parent must exist (a shared filesystem that is not mounted must not turn
# into a local directory). write puts BASE/NODE/shard-K.bin and, last and
# atomically, BASE/NODE/manifest.sha256 with the sha256 of every shard,
# computed from the bytes as they were written (never re-read). NEED is
# the free space the write needs on the filesystem.
#
# Output, one fact a line (the coordinator parses it):
#   generator openssl|urandom      what made the data (not zeros: they compress)
#   hasher openssl|sha256sum       what computed the sha256s
#   free BYTES                     free space before writing
#   ceiling BYTES SECONDS          the pipeline alone (generate and hash, or
#                                  hash only), every shard at once, to /dev/null
#   cache fadvise|drop_caches|none RESIDENT
#                                  how the page cache was emptied before
#                                  reading, and the shards' bytes still in it
#                                  (fincore; "unknown" without it)
#   expect K SHA256                the writer's manifest, as read back
#   shard K BYTES SHA256 SECONDS   one shard written or read
#   missing K WHY                  a shard that could not be read
#   seconds S                      the whole save (shards, fsync, manifest) or
#                                  the whole read
set -u
export LC_ALL=C
mode=$1 base=$2

# now: microseconds (bash 5 has the clock built in: no process per reading).
now() { if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME/[.,]/}"; else date +%s%6N; fi; }
since() { local d=$(($(now) - $1)); printf '%d.%06d' $((d / 1000000)) $((d % 1000000)); }
die() { echo "checkpoint: $*" >&2; exit 1; }
# fsync one file or directory: sync FILE (coreutils 8.24), else dd.
fsync() { sync -- "$1" 2>/dev/null || dd if=/dev/null of="$1" conv=notrunc,fsync status=none 2>/dev/null || sync; }

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
parent=$(dirname -- "$base")
[ -d "$parent" ] || die "$parent does not exist on $(hostname) (is the shared filesystem mounted?)"
# BASE's name is predictable and its parent may be shared: only a
# directory of this user's alone is written in (or read from), never
# one another user made or a link they planted.
why=$(gpuaccept_private "$base" 2>&1) || die "${why#gpuaccept: }"
tmp=$(mktemp -d) || die "mktemp failed"
trap 'rm -rf -- "$tmp"' EXIT

# ceiling N SHARDS CMD...: run CMD (reading N bytes from stdin's pipeline)
# once per shard, all at once, to measure what the CPU side alone can do.
ceiling() {
  local n=$1 shards=$2 k t0
  shift 2
  t0=$(now)
  for ((k = 0; k < shards; k++)); do "$@" "$k" "$n" >/dev/null & done
  wait
  echo "ceiling $((n * shards)) $(since "$t0")"
}

case $mode in
write)
  node=$3 size=$4 shards=$5 seed=$6 need=$7
  d="$base/$node"
  mkdir -p -- "$d" || die "cannot create $d"
  free=$(df -Pk -- "$d" | awk 'NR == 2 { printf "%.0f", $4 * 1024 }')
  echo "free ${free:-unknown}"
  if [ -n "$free" ] && [ "$free" -lt "$need" ]; then
    die "$d: $need bytes needed, $free free"
  fi
  if openssl enc -aes-128-ctr -K 00000000000000000000000000000000 -iv 00000000000000000000000000000000 </dev/null >/dev/null 2>&1; then
    generator=openssl
  else
    generator=urandom
  fi
  echo "generator $generator"
  echo "hasher $hasher"
  # gen K N: N bytes of shard K; AES-CTR under a key made from the seed
  # costs about as little CPU as data can, and nothing dedupes it.
  keybase=$(printf '%s' "$seed" | sha256sum)
  keybase=${keybase:0:24}
  gen() {
    if [ "$generator" = openssl ]; then
      key=$keybase$(printf '%08x' "$1")
      openssl enc -aes-128-ctr -K "$key" -iv 00000000000000000000000000000000 </dev/zero 2>/dev/null | head -c "$2"
    else
      head -c "$2" /dev/urandom
    fi
  }
  genhash() { gen "$1" "$2" | sha; }
  per=$((size / shards)) extra=$((size % shards))
  probe=$((per < 32 << 20 ? per : 32 << 20))
  [ "$probe" -gt 0 ] && ceiling "$probe" "$shards" genhash
  # write K N: shard K, its sha256 from the same bytes as they go to disk,
  # then fsync.
  write() {
    local k=$1 n=$2 f="$d/shard-$1.bin" t0 sum
    t0=$(now)
    sum=$(gen "$k" "$n" | tee -- "$f" | sha)
    sum=${sum%% *}
    fsync "$f"
    echo "shard $k $(stat -c %s -- "$f" 2>/dev/null || echo 0) $sum $(since "$t0")" >"$tmp/shard-$k"
  }
  t0=$(now)
  for ((k = 0; k < shards; k++)); do
    write "$k" $((per + (k < extra ? 1 : 0))) &
  done
  wait
  m=$(mktemp "$d/.manifest.XXXXXX") || die "cannot write the manifest in $d"
  for ((k = 0; k < shards; k++)); do
    [ -s "$tmp/shard-$k" ] || die "shard $k was not written"
    read -r _ _ _ sum _ <"$tmp/shard-$k"
    printf '%s  shard-%d.bin\n' "$sum" "$k" >>"$m"
  done
  fsync "$m"
  mv -f -- "$m" "$d/manifest.sha256" || die "cannot rename the manifest in $d"
  fsync "$d"
  secs=$(since "$t0")
  cat "$tmp"/shard-*
  echo "manifest $d/manifest.sha256"
  echo "seconds $secs"
  ;;
restore)
  writer=$3 shards=$4
  d="$base/$writer"
  # The manifest is written last: without it the writer never finished.
  [ -f "$d/manifest.sha256" ] || die "$d/manifest.sha256 is not there as seen from $(hostname) (written by $writer)"
  while read -r sum name; do
    k=${name#shard-}
    k=${k%.bin}
    echo "expect $k $sum"
  done <"$d/manifest.sha256"
  echo "hasher $hasher"
  hashonly() { head -c "$2" /dev/zero | sha; }
  size=$(stat -c %s -- "$d"/shard-*.bin 2>/dev/null | awk '{ n += $1 } END { printf "%.0f", n }')
  per=$((size / shards))
  probe=$((per < 32 << 20 ? per : 32 << 20))
  [ "$probe" -gt 0 ] && ceiling "$probe" "$shards" hashonly
  # Read from the storage, not from RAM. First the checkpoint's own pages
  # (fadvise DONTNEED through dd; anyone may, and nothing else on the node
  # loses its cache), then, if pages are left and we are root, the whole
  # page cache. fincore, where installed, says what is still resident.
  # (A shared filesystem's server cache is out of reach either way.)
  resident() {
    command -v fincore >/dev/null 2>&1 || return 0
    fincore -b -n -o RES -- "$d"/shard-*.bin 2>/dev/null | awk '{ n += $1 } END { printf "%.0f", n }'
  }
  cache=fadvise
  for ((k = 0; k < shards; k++)); do
    [ -f "$d/shard-$k.bin" ] || continue
    dd if="$d/shard-$k.bin" iflag=nocache count=0 status=none 2>/dev/null || cache=none
  done
  left=$(resident)
  if [ "$cache" = none ] || [ "${left:-0}" -gt 0 ]; then
    if { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
      cache=drop_caches
      left=$(resident)
    fi
  fi
  echo "cache $cache ${left:-unknown}"
  read1() {
    local k=$1 f="$d/shard-$1.bin" t0 sum n
    t0=$(now)
    if [ ! -f "$f" ]; then
      echo "missing $k $f does not exist" >"$tmp/shard-$k"
      return
    fi
    n=$(stat -c %s -- "$f")
    if ! sum=$(sha -- "$f" 2>"$tmp/err-$k"); then
      echo "missing $k $(head -n 1 "$tmp/err-$k" | head -c 200)" >"$tmp/shard-$k"
      return
    fi
    echo "shard $k $n ${sum%% *} $(since "$t0")" >"$tmp/shard-$k"
  }
  t0=$(now)
  for ((k = 0; k < shards; k++)); do read1 "$k" & done
  wait
  secs=$(since "$t0")
  for ((k = 0; k < shards; k++)); do
    if [ -s "$tmp/shard-$k" ]; then cat "$tmp/shard-$k"; else echo "missing $k not read"; fi
  done
  echo "seconds $secs"
  ;;
*)
  die "unknown mode $mode"
  ;;
esac
