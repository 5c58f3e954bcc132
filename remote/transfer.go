package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"
)

// TransferOptions tune Upload and Download.
type TransferOptions struct {
	// Progress is called as bytes move (at most every MiB, and at the end)
	// with the bytes done so far and the total, for the whole transfer.
	Progress func(done, total int64)
	// Mode of uploaded files; 0 keeps the local file's permission bits.
	Mode fs.FileMode
	// Concurrency is the number of SFTP requests in flight per file: a
	// single request at a time caps throughput at one packet per round
	// trip (pkg/sftp#472). Default 64.
	Concurrency int
	// SHA256 is the source's sha256 when the caller already knows it
	// (UploadFrom of generated data): the source is then not hashed again,
	// and the node's copy is checked against it.
	SHA256 string
}

// TransferResult describes a finished transfer.
type TransferResult struct {
	Files   int
	Bytes   int64 // total size of what now stands at the destination
	Resumed int64 // bytes that an earlier, interrupted upload had already sent
	SHA256  string
	Elapsed time.Duration
}

const (
	partSuffix      = ".gpuaccept-part"
	resumeBlock     = 8 << 20
	progressStep    = 1 << 20
	defaultInFlight = 64
)

// Upload copies a local file to remotePath on the node. The file is written
// under a temporary name beside the target, its size and sha256 are checked
// on the node itself, and only then is it renamed into place, so the target
// is either the old file or the complete new one. Re-running an interrupted
// upload continues from the part already on the node, after checking that
// part block by block against the local file.
func (c *Client) Upload(ctx context.Context, local, remotePath string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	st, err := os.Stat(local)
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload: %w", c.cfg.Name, err)
	}
	if st.IsDir() {
		return TransferResult{}, fmt.Errorf("%s: upload %s: is a directory (use UploadDir)", c.cfg.Name, local)
	}
	sc, done, err := c.sftpClient(ctx, o)
	if err != nil {
		return TransferResult{}, err
	}
	defer done()
	p := newProgress(o.Progress, st.Size())
	res, err := c.uploadLocal(ctx, sc, local, remotePath, o, p)
	res.Elapsed = time.Since(start)
	return res, err
}

// UploadFrom copies size bytes that src serves to remotePath, as Upload
// copies a local file: under a temporary name, checked on the node (size
// and sha256), then renamed into place. src is read at least twice (to
// hash it, unless o.SHA256 is given, and to send it), so it must serve the
// same bytes every time: generated data need never be held in memory or
// written to the coordinator's disk. Files are created with o.Mode
// (default 0644).
func (c *Client) UploadFrom(ctx context.Context, src io.ReaderAt, size int64, remotePath string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	if size < 0 {
		return TransferResult{}, fmt.Errorf("%s: upload %s: negative size %d", c.cfg.Name, remotePath, size)
	}
	sc, done, err := c.sftpClient(ctx, o)
	if err != nil {
		return TransferResult{}, err
	}
	defer done()
	mode := o.Mode
	if mode == 0 {
		mode = 0o644
	}
	res, err := c.uploadFile(ctx, sc, src, "the source", size, mode, remotePath, o, newProgress(o.Progress, size))
	res.Elapsed = time.Since(start)
	return res, err
}

// UploadDir copies a local directory tree to remoteDir, each file as
// Upload does.
func (c *Client) UploadDir(ctx context.Context, localDir, remoteDir string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	type file struct{ local, remote string }
	var files []file
	var total int64
	err := filepath.WalkDir(localDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil // directories are made on demand; links and devices are not copied
		}
		rel, err := filepath.Rel(localDir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		files = append(files, file{p, path.Join(remoteDir, filepath.ToSlash(rel))})
		return nil
	})
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload %s: %w", c.cfg.Name, localDir, err)
	}
	sc, done, err := c.sftpClient(ctx, o)
	if err != nil {
		return TransferResult{}, err
	}
	defer done()
	if err := c.privateDir(ctx, remoteDir, remoteDir); err != nil {
		return TransferResult{}, err
	}
	p := newProgress(o.Progress, total)
	var sum TransferResult
	for _, f := range files {
		r, err := c.uploadLocal(ctx, sc, f.local, f.remote, o, p)
		if err != nil {
			return sum, err
		}
		sum.Files++
		sum.Bytes += r.Bytes
		sum.Resumed += r.Resumed
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

func (c *Client) uploadLocal(ctx context.Context, sc *sftp.Client, local, remotePath string, o TransferOptions, p *progress) (TransferResult, error) {
	f, err := os.Open(local)
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload: %w", c.cfg.Name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload: %w", c.cfg.Name, err)
	}
	mode := o.Mode
	if mode == 0 {
		mode = st.Mode().Perm()
	}
	o.SHA256 = "" // a caller's sum is for UploadFrom's one source
	return c.uploadFile(ctx, sc, f, local, st.Size(), mode, remotePath, o, p)
}

// uploadFile sends size bytes of f (named srcName in errors) to remotePath.
func (c *Client) uploadFile(ctx context.Context, sc *sftp.Client, f io.ReaderAt, srcName string, size int64, mode fs.FileMode, remotePath string, o TransferOptions, p *progress) (TransferResult, error) {
	fail := func(step string, err error) (TransferResult, error) {
		return TransferResult{}, c.sftpError(ctx, "upload "+remotePath+": "+step, err)
	}
	// Hash the source while the bytes travel (a local file is read from
	// the page cache a second time at most), unless the caller knows it.
	localSum := make(chan hashResult, 1)
	if o.SHA256 != "" {
		localSum <- hashResult{sum: o.SHA256}
	} else {
		go func() { localSum <- hashReader(io.NewSectionReader(f, 0, size)) }()
	}

	// The part file's name is predictable (a resumed upload finds it), so
	// it is written only in a directory that is this user's alone.
	dir, base := path.Split(remotePath)
	if err := c.privateDir(ctx, dir, remotePath); err != nil {
		return TransferResult{}, err
	}
	part := path.Join(dir, "."+base+partSuffix)
	var offset int64
	pst, err := sc.Lstat(part)
	exists := err == nil
	if exists && pst.Mode().IsRegular() && pst.Size() > 0 {
		offset, err = c.resumeOffset(ctx, f, part, min(pst.Size(), size))
		if err != nil {
			return TransferResult{}, err
		}
	}
	if exists && offset == 0 {
		// Nothing to keep, or not a regular file (a link, a directory):
		// it goes, and the part is created afresh, never written through.
		if err := sc.Remove(part); err != nil {
			return fail("remove "+part, err)
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if offset > 0 {
		flags = os.O_WRONLY
	}
	rf, err := sc.OpenFile(part, flags)
	if err != nil {
		return fail("create "+part, err)
	}
	defer rf.Close()
	if err := rf.Truncate(offset); err != nil {
		return fail("truncate "+part, err)
	}
	if _, err := rf.Seek(offset, io.SeekStart); err != nil {
		return fail("seek "+part, err)
	}
	p.add(offset)
	src := &progressReader{r: io.NewSectionReader(f, offset, size-offset), p: p}
	if _, err := rf.ReadFromWithConcurrency(src, inFlight(o)); err != nil {
		return fail("write", err)
	}
	if err := rf.Sync(); err != nil && !isUnsupported(err) {
		return fail("fsync", err)
	}
	if err := rf.Close(); err != nil {
		return fail("close", err)
	}
	want := <-localSum
	if want.err != nil {
		return TransferResult{}, fmt.Errorf("%s: upload: read %s: %w", c.cfg.Name, srcName, want.err)
	}
	gotSize, gotSum, err := c.remoteSum(ctx, part)
	if err != nil {
		return TransferResult{}, err
	}
	if gotSize != size || gotSum != want.sum {
		_ = sc.Remove(part) // a corrupt part must not be resumed from
		return TransferResult{}, fmt.Errorf("%s: upload %s: verification failed on the node: sent %d bytes sha256 %s, node has %d bytes sha256 %s",
			c.cfg.Name, remotePath, size, want.sum, gotSize, gotSum)
	}
	if err := sc.Chmod(part, mode); err != nil {
		return fail("chmod", err)
	}
	if err := sc.PosixRename(part, remotePath); err != nil {
		return fail("rename into place", err)
	}
	p.finish()
	return TransferResult{Files: 1, Bytes: size, Resumed: offset, SHA256: want.sum}, nil
}

// resumeOffset finds how much of an earlier part file can be kept: the
// longest run of whole blocks from the start that match the local file.
// Concurrent writes leave holes, so a part's size alone proves nothing.
func (c *Client) resumeOffset(ctx context.Context, f io.ReaderAt, part string, upto int64) (int64, error) {
	blocks := upto / resumeBlock
	if blocks == 0 {
		return 0, nil
	}
	script := fmt.Sprintf(`f=%s; i=0; while [ $i -lt %d ]; do dd if="$f" bs=%d skip=$i count=1 2>/dev/null | sha256sum | cut -c1-64; i=$((i+1)); done`,
		Quote(part), blocks, resumeBlock)
	out, err := c.Output(ctx, script)
	if err != nil {
		return 0, fmt.Errorf("%s: upload: check part %s: %w", c.cfg.Name, part, err)
	}
	remote := strings.Fields(string(out))
	for i := int64(0); i < blocks; i++ {
		h := hashReader(io.NewSectionReader(f, i*resumeBlock, resumeBlock))
		if h.err != nil {
			return 0, fmt.Errorf("%s: upload: %w", c.cfg.Name, h.err)
		}
		if i >= int64(len(remote)) || remote[i] != h.sum {
			return i * resumeBlock, nil
		}
	}
	return blocks * resumeBlock, nil
}

// remoteSum measures a file on the node itself: what matters is what the
// node's disk holds, not what we believe we sent. openssl hashes several
// times faster than sha256sum where the CPU has SHA extensions, and the
// hash is part of every upload's time.
func (c *Client) remoteSum(ctx context.Context, file string) (int64, string, error) {
	q := Quote(file)
	out, err := c.Output(ctx, "stat -c %s "+q+" && { openssl dgst -sha256 -r < "+q+" 2>/dev/null || sha256sum < "+q+"; }")
	if err != nil {
		return 0, "", fmt.Errorf("%s: checksum %s on the node: %w", c.cfg.Name, file, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		return 0, "", fmt.Errorf("%s: checksum %s on the node: unexpected output %q", c.cfg.Name, file, out)
	}
	size, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || len(fields[1]) != 64 {
		return 0, "", fmt.Errorf("%s: checksum %s on the node: unexpected output %q", c.cfg.Name, file, out)
	}
	return size, fields[1], nil
}

// Download copies remotePath from the node to local, checked against the
// sha256 the node computes, and renamed into place only when it matches.
func (c *Client) Download(ctx context.Context, remotePath, local string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	sc, done, err := c.sftpClient(ctx, o)
	if err != nil {
		return TransferResult{}, err
	}
	defer done()
	st, err := sc.Stat(remotePath)
	if err != nil {
		return TransferResult{}, c.sftpError(ctx, "download "+remotePath, err)
	}
	res, err := c.downloadFile(ctx, sc, remotePath, local, newProgress(o.Progress, st.Size()))
	res.Elapsed = time.Since(start)
	return res, err
}

// DownloadDir copies a directory tree from the node.
func (c *Client) DownloadDir(ctx context.Context, remoteDir, localDir string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	sc, done, err := c.sftpClient(ctx, o)
	if err != nil {
		return TransferResult{}, err
	}
	defer done()
	type file struct{ remote, local string }
	var files []file
	var total int64
	walker := sc.Walk(remoteDir)
	for walker.Step() {
		if err := walker.Err(); err != nil {
			return TransferResult{}, c.sftpError(ctx, "download "+remoteDir, err)
		}
		if !walker.Stat().Mode().IsRegular() {
			continue
		}
		local, err := localName(localDir, remoteDir, walker.Path())
		if err != nil {
			return TransferResult{}, fmt.Errorf("%s: download %s: %w", c.cfg.Name, remoteDir, err)
		}
		files = append(files, file{walker.Path(), local})
		total += walker.Stat().Size()
	}
	p := newProgress(o.Progress, total)
	var sum TransferResult
	for _, f := range files {
		r, err := c.downloadFile(ctx, sc, f.remote, f.local, p)
		if err != nil {
			return sum, err
		}
		sum.Files++
		sum.Bytes += r.Bytes
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// localName is where the server's file remotePath lands under localDir:
// the server names it, so a name that would leave localDir ("../..", an
// absolute path, a path outside remoteDir) is refused.
func localName(localDir, remoteDir, remotePath string) (string, error) {
	rel, ok := strings.CutPrefix(remotePath, strings.TrimSuffix(remoteDir, "/")+"/")
	if !ok || rel == "" {
		return "", fmt.Errorf("the server named %q, which is not under %s", remotePath, remoteDir)
	}
	rel = filepath.FromSlash(rel)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("the server named %q, which would land outside %s", remotePath, localDir)
	}
	return filepath.Join(localDir, rel), nil
}

func (c *Client) downloadFile(ctx context.Context, sc *sftp.Client, remotePath, local string, p *progress) (TransferResult, error) {
	wantSize, wantSum, err := c.remoteSum(ctx, remotePath)
	if err != nil {
		return TransferResult{}, err
	}
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return TransferResult{}, fmt.Errorf("%s: download: %w", c.cfg.Name, err)
	}
	rf, err := sc.Open(remotePath)
	if err != nil {
		return TransferResult{}, c.sftpError(ctx, "download "+remotePath, err)
	}
	defer rf.Close()
	part := local + partSuffix
	lf, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return TransferResult{}, fmt.Errorf("%s: download: %w", c.cfg.Name, err)
	}
	defer os.Remove(part) // a no-op once renamed
	defer lf.Close()
	h := sha256.New()
	n, err := rf.WriteTo(io.MultiWriter(lf, h, &progressWriter{p: p}))
	if err != nil {
		return TransferResult{}, c.sftpError(ctx, "download "+remotePath, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if n != wantSize || got != wantSum {
		return TransferResult{}, fmt.Errorf("%s: download %s: verification failed: node has %d bytes sha256 %s, received %d bytes sha256 %s",
			c.cfg.Name, remotePath, wantSize, wantSum, n, got)
	}
	if err := lf.Sync(); err != nil {
		return TransferResult{}, fmt.Errorf("%s: download: %w", c.cfg.Name, err)
	}
	if err := lf.Close(); err != nil {
		return TransferResult{}, fmt.Errorf("%s: download: %w", c.cfg.Name, err)
	}
	if err := os.Rename(part, local); err != nil {
		return TransferResult{}, fmt.Errorf("%s: download: %w", c.cfg.Name, err)
	}
	p.finish()
	return TransferResult{Files: 1, Bytes: n, SHA256: got}, nil
}

// sftpClient opens an SFTP session for one transfer, bounded like any
// session, and closed when ctx ends so a cancelled transfer returns at once.
func (c *Client) sftpClient(ctx context.Context, o TransferOptions) (*sftp.Client, func(), error) {
	if err := c.lostErr(); err != nil {
		return nil, nil, err
	}
	sc, err := openBounded(ctx, c.cfg.SessionTimeout, func() (*sftp.Client, error) {
		return sftp.NewClient(c.conn,
			sftp.UseConcurrentWrites(true),
			sftp.UseConcurrentReads(true),
			sftp.MaxConcurrentRequestsPerFile(inFlight(o)))
	}, func(sc *sftp.Client) { sc.Close() })
	switch {
	case errors.Is(err, errOpenTimeout):
		return nil, nil, &TimeoutError{Node: c.cfg.Name, Step: "open sftp session", After: c.cfg.SessionTimeout}
	case err != nil && ctx.Err() != nil:
		return nil, nil, fmt.Errorf("%s: open sftp: %w", c.cfg.Name, err)
	case err != nil:
		return nil, nil, c.connectionError("open sftp", err)
	}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			sc.Close()
		case <-stop:
		}
	}()
	return sc, func() { close(stop); <-watched; sc.Close() }, nil
}

// sftpError explains an SFTP failure: cancellation, a lost connection, or
// the server's own complaint.
func (c *Client) sftpError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %s: %w", c.cfg.Name, what, ctx.Err())
	}
	if l := c.lostErr(); l != nil {
		return l
	}
	// The sftp channel can see the end of the connection before the
	// connection's own watcher does: the same loss, named as one.
	if errors.Is(err, sftp.ErrSSHFxConnectionLost) {
		return c.connectionError(what, err)
	}
	return fmt.Errorf("%s: %s: %w", c.cfg.Name, what, err)
}

func isUnsupported(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxOpUnsupported
}

func inFlight(o TransferOptions) int {
	if o.Concurrency > 0 {
		return o.Concurrency
	}
	return defaultInFlight
}

type hashResult struct {
	sum string
	err error
}

func hashReader(r io.Reader) hashResult {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return hashResult{err: err}
	}
	return hashResult{sum: hex.EncodeToString(h.Sum(nil))}
}

// progress reports bytes moved across the files of one transfer.
type progress struct {
	fn       func(done, total int64)
	total    int64
	done     int64
	reported int64
}

func newProgress(fn func(done, total int64), total int64) *progress {
	return &progress{fn: fn, total: total}
}

func (p *progress) add(n int64) {
	p.done += n
	if p.fn != nil && p.done-p.reported >= progressStep {
		p.reported = p.done
		p.fn(p.done, p.total)
	}
}

func (p *progress) finish() {
	if p.fn != nil && p.reported != p.done {
		p.reported = p.done
		p.fn(p.done, p.total)
	}
}

type progressReader struct {
	r io.Reader
	p *progress
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(int64(n))
	return n, err
}

type progressWriter struct{ p *progress }

func (w *progressWriter) Write(b []byte) (int, error) {
	w.p.add(int64(len(b)))
	return len(b), nil
}
