package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// uploadScript writes its stdin to TARGET as Upload promises, for an
// executor that reaches the node only through commands (srun, and the
// API's exec of a pod): into a part file of a random name beside TARGET
// in a directory that is the user's own (gpuaccept_private, exit 97
// otherwise), created exclusively and private while it is written; the
// part's size and sha256 are read back from the disk and printed, and
// only when they are SIZE and SUM is it given MODE and renamed into place
// (exit 98 otherwise). The part never outlives the script.
//
//	bash -c SCRIPT upload TARGET SIZE SUM MODE
const uploadScript = `set -u
t=$1 size=$2 want=$3 mode=$4
case $t in */*) dir=${t%/*} ;; *) dir=. ;; esac
dir=${dir:-/} base=${t##*/}
gpuaccept_private "$dir" parents || exit 97
umask 077
part=$(mktemp "$dir/.$base.XXXXXX.gpuaccept-part") || exit 96
trap 'rm -f -- "$part"' EXIT
cat >"$part" || exit 96
sync -- "$part" 2>/dev/null
got=$(stat -c %s -- "$part") || exit 96
sum=$({ openssl dgst -sha256 -r <"$part" 2>/dev/null || sha256sum <"$part"; } | cut -c1-64)
echo "$got $sum"
[ "$got" = "$size" ] && [ "$sum" = "$want" ] || exit 98
chmod "$mode" -- "$part" && mv -f -T -- "$part" "$t" || exit 96
trap - EXIT
`

// UploadByCommand is UploadFrom for an executor that reaches its node
// only through commands: the bytes travel as the command's stdin, and the
// node checks them (uploadScript). No part is resumed: the part has a
// random name and goes with a failure.
func UploadByCommand(ctx context.Context, e Executor, src io.ReaderAt, size int64, remotePath string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	name := e.Name()
	if size < 0 {
		return TransferResult{}, fmt.Errorf("%s: upload %s: negative size %d", name, remotePath, size)
	}
	if remotePath == "" || strings.HasSuffix(remotePath, "/") {
		return TransferResult{}, fmt.Errorf("%s: upload %q: not a file's path", name, remotePath)
	}
	want := o.SHA256
	if want == "" {
		h := hashReader(io.NewSectionReader(src, 0, size))
		if h.err != nil {
			return TransferResult{}, fmt.Errorf("%s: upload %s: read the source: %w", name, remotePath, h.err)
		}
		want = h.sum
	}
	mode := o.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	p := newProgress(o.Progress, size)
	var out bytes.Buffer
	err := e.Run(ctx, Cmd{
		Command: "bash -c " + Quote(privateDirFunc+uploadScript) + " upload " + Quote(remotePath) + " " +
			strconv.FormatInt(size, 10) + " " + want + " " + strconv.FormatUint(uint64(mode), 8),
		Stdin:  &progressReader{r: io.NewSectionReader(src, 0, size), p: p},
		Stdout: &limitWriter{w: &out, n: 4096},
	})
	got := strings.Fields(out.String())
	var ee *ExitError
	switch {
	case errors.As(err, &ee) && ee.Status == 97:
		why := strings.TrimPrefix(strings.TrimSpace(lastLines(strings.TrimSpace(ee.StderrTail), 1)), "gpuaccept: ")
		return TransferResult{}, fmt.Errorf("%s: upload %s: %w: %s", name, remotePath, ErrNotPrivate, why)
	case errors.As(err, &ee) && ee.Status == 98 && len(got) == 2:
		return TransferResult{}, fmt.Errorf("%s: upload %s: verification failed on the node: sent %d bytes sha256 %s, node has %s bytes sha256 %s",
			name, remotePath, size, want, got[0], got[1])
	case err != nil:
		return TransferResult{}, withNode(name, "upload "+remotePath, err)
	case len(got) != 2 || len(got[1]) != 64:
		return TransferResult{}, fmt.Errorf("%s: upload %s: the node's check said %q", name, remotePath, Shorten(out.String(), 200))
	}
	p.finish()
	return TransferResult{Files: 1, Bytes: size, SHA256: got[1], Elapsed: time.Since(start)}, nil
}

// UploadLocalFile is Upload for the executors that send a local file as
// UploadFrom sends its source; Mode 0 keeps the file's permission bits.
func UploadLocalFile(ctx context.Context, e Executor, local, remotePath string, o TransferOptions) (TransferResult, error) {
	f, err := os.Open(local)
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload: %w", e.Name(), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload: %w", e.Name(), err)
	}
	if st.IsDir() {
		return TransferResult{}, fmt.Errorf("%s: upload %s: is a directory", e.Name(), local)
	}
	if o.Mode == 0 {
		o.Mode = st.Mode().Perm()
	}
	o.SHA256 = "" // a caller's sum is for UploadFrom's one source
	return e.UploadFrom(ctx, f, st.Size(), remotePath, o)
}
