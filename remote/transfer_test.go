package remote

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"

	"gpuaccept/remote/sshtest"
)

func randomFile(t *testing.T, dir, name string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestUploadIsVerifiedAndAtomic(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	data := randomFile(t, src, "blob", 5<<20+123)
	var calls int
	var last, total int64
	res, err := c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(f.dir, "dst/sub/blob"), TransferOptions{
		Progress: func(done, tot int64) { calls++; last, total = done, tot },
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(f.dir, "dst/sub/blob"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("remote copy differs (%d bytes, %v)", len(got), err)
	}
	if res.Bytes != int64(len(data)) || res.Resumed != 0 || len(res.SHA256) != 64 {
		t.Fatalf("result %+v", res)
	}
	if calls < 5 || last != total || total != int64(len(data)) {
		t.Fatalf("progress: %d calls, last %d of %d", calls, last, total)
	}
	if st, _ := os.Stat(filepath.Join(f.dir, "dst/sub/blob")); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the local 0640", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(f.dir, "dst/sub/.blob"+partSuffix)); !os.IsNotExist(err) {
		t.Errorf("part file left behind: %v", err)
	}
}

func TestUploadResumesFromMatchingBlocks(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	data := randomFile(t, src, "blob", 3*resumeBlock+1000)
	// An earlier upload got two blocks right and left garbage in the third
	// (concurrent writes leave holes, so size alone means nothing).
	part := append(append([]byte{}, data[:2*resumeBlock]...), make([]byte, resumeBlock/2)...)
	if err := os.WriteFile(filepath.Join(f.dir, ".blob"+partSuffix), part, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(f.dir, "blob"), TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 2*resumeBlock {
		t.Fatalf("resumed %d bytes, want %d", res.Resumed, 2*resumeBlock)
	}
	if got, _ := os.ReadFile(filepath.Join(f.dir, "blob")); !bytes.Equal(got, data) {
		t.Fatal("resumed upload is not the file")
	}

	// A part that does not match from the first block on is not trusted.
	bad := append([]byte{}, data[:2*resumeBlock]...)
	bad[10] ^= 1
	if err := os.WriteFile(filepath.Join(f.dir, ".blob"+partSuffix), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(f.dir, "blob"), TransferOptions{})
	if err != nil || res.Resumed != 0 {
		t.Fatalf("resumed %d from a bad part, err %v", res.Resumed, err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.dir, "blob")); !bytes.Equal(got, data) {
		t.Fatal("upload over a bad part is not the file")
	}
}

func TestUploadDetectsCorruptionOnTheNode(t *testing.T) {
	f := newFleet(t, 1, func(o *sshtest.Options) { o.CorruptSFTPWrites = true })
	c := f.dial(t, 0)
	src := t.TempDir()
	randomFile(t, src, "blob", 1<<20)
	old := []byte("the previous version stays in place")
	dst := filepath.Join(f.dir, "blob")
	if err := os.WriteFile(dst, old, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := c.Upload(t.Context(), filepath.Join(src, "blob"), dst, TransferOptions{})
	if err == nil || !strings.Contains(err.Error(), "verification failed on the node") || !strings.HasPrefix(err.Error(), "node-a: ") {
		t.Fatalf("corruption not reported: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, old) {
		t.Fatal("a corrupt upload replaced the target")
	}
	if _, err := os.Stat(filepath.Join(f.dir, ".blob"+partSuffix)); !os.IsNotExist(err) {
		t.Fatal("the corrupt part was kept for a resume")
	}
}

func TestUploadAndDownloadDirectories(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	files := map[string][]byte{
		"a.txt":        randomFile(t, src, "a.txt", 10),
		"sub/b.bin":    randomFile(t, src, "sub/b.bin", 300<<10),
		"sub/deep/c":   randomFile(t, src, "sub/deep/c", 0),
		"sub/deep/d d": randomFile(t, src, "sub/deep/d d", 7),
	}
	up, err := c.UploadDir(t.Context(), src, filepath.Join(f.dir, "tree"), TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Files != len(files) {
		t.Fatalf("uploaded %d files, want %d", up.Files, len(files))
	}
	back := filepath.Join(t.TempDir(), "back")
	down, err := c.DownloadDir(t.Context(), filepath.Join(f.dir, "tree"), back, TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if down.Files != len(files) || down.Bytes != up.Bytes {
		t.Fatalf("downloaded %+v, uploaded %+v", down, up)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(back, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: round trip differs (%v)", name, err)
		}
	}
}

func TestDownloadVerifies(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	data := randomFile(t, f.dir, "remote.bin", 2<<20)
	dst := filepath.Join(t.TempDir(), "local.bin")
	res, err := c.Download(t.Context(), filepath.Join(f.dir, "remote.bin"), dst, TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) || res.Bytes != int64(len(data)) {
		t.Fatal("download differs")
	}
	_, err = c.Download(t.Context(), filepath.Join(f.dir, "missing"), dst, TransferOptions{})
	if err == nil || !strings.Contains(err.Error(), "missing") || !strings.HasPrefix(err.Error(), "node-a: ") {
		t.Fatalf("missing remote file: %v", err)
	}
}

func TestUploadCancelled(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	randomFile(t, src, "blob", 1<<20)
	ctx, cancel := contextWithCancel(t)
	cancel()
	if _, err := c.Upload(ctx, filepath.Join(src, "blob"), filepath.Join(f.dir, "blob"), TransferOptions{}); err == nil {
		t.Fatal("a cancelled upload succeeded")
	}
}

func TestInterruptedUploadResumes(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	data := randomFile(t, src, "blob", 5*resumeBlock)
	ctx, cancel := contextWithCancel(t)
	_, err := c.Upload(ctx, filepath.Join(src, "blob"), filepath.Join(f.dir, "blob"), TransferOptions{
		Progress: func(done, _ int64) {
			if done >= 3*resumeBlock {
				cancel() // the coordinator is interrupted mid-transfer
			}
		},
	})
	if err == nil {
		t.Fatal("interrupted upload reported success")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "blob")); !os.IsNotExist(err) {
		t.Fatal("an interrupted upload left a target behind")
	}
	res, err := c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(f.dir, "blob"), TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// In-flight writes may leave holes near where it stopped; everything
	// before them is kept.
	if res.Resumed < resumeBlock {
		t.Fatalf("resumed only %d bytes after %d were sent", res.Resumed, 3*resumeBlock)
	}
	if got, _ := os.ReadFile(filepath.Join(f.dir, "blob")); !bytes.Equal(got, data) {
		t.Fatal("resumed upload is not the file")
	}
	t.Logf("resumed from %d MiB of %d", res.Resumed>>20, len(data)>>20)
}

func TestUploadFromStreamsAReaderAt(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	data := make([]byte, 3<<20+7)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	dst := filepath.Join(f.dir, "gen/blob")
	// The caller's sha256 spares hashing the source again.
	for _, known := range []string{"", want} {
		os.Remove(dst)
		res, err := c.UploadFrom(t.Context(), bytes.NewReader(data), int64(len(data)), dst, TransferOptions{SHA256: known})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) || res.SHA256 != want || res.Bytes != int64(len(data)) {
			t.Fatalf("known %q: copy differs or result %+v", known, res)
		}
		if st, _ := os.Stat(dst); st.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", st.Mode().Perm())
		}
	}
	// A wrong sha256 fails the upload and leaves the target as it was.
	_, err := c.UploadFrom(t.Context(), bytes.NewReader(data[1:]), int64(len(data)-1), dst, TransferOptions{SHA256: want})
	if err == nil || !strings.Contains(err.Error(), "verification failed on the node") {
		t.Fatalf("a mismatch was not reported: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("a failed upload replaced the target")
	}
}

func TestDownloadNamesStayInsideTheDirectory(t *testing.T) {
	for _, tc := range []struct {
		remote string
		want   string
	}{
		{"/srv/out/a.bin", "/tmp/dl/a.bin"},
		{"/srv/out/sub/b.bin", "/tmp/dl/sub/b.bin"},
		{"/srv/out/../../etc/passwd", ""},
		{"/srv/out/sub/../../../x", ""},
		{"/etc/shadow", ""},
		{"/srv/outside/a", ""},
		{"/srv/out/", ""},
	} {
		got, err := localName("/tmp/dl", "/srv/out", tc.remote)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: accepted as %s", tc.remote, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.remote, got, err, tc.want)
		}
	}
}

// TestUploadNeverWritesThroughALinkedPartFile: a part file that is a
// link (whoever left it) is removed and the part made afresh; the file it
// named is untouched.
func TestUploadNeverWritesThroughALinkedPartFile(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	data := randomFile(t, src, "blob", 9<<20)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, data[:8<<20+1], 0o644); err != nil { // resumable-looking: its first block matches
		t.Fatal(err)
	}
	dst := filepath.Join(f.dir, "dst")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dst, ".blob"+partSuffix)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(dst, "blob"), TransferOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); !bytes.Equal(got, data[:8<<20+1]) {
		t.Errorf("the link's target was written: %d bytes", len(got))
	}
	if st, err := os.Lstat(filepath.Join(dst, "blob")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("blob: %v, %v", st, err)
	}
}

// TestUploadRefusesADirectoryOthersCanWrite: a part file's name is
// predictable, so an upload writes only where no one else can.
func TestUploadRefusesADirectoryOthersCanWrite(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	src := t.TempDir()
	randomFile(t, src, "blob", 1000)
	shared := filepath.Join(f.dir, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(shared, "blob"), TransferOptions{})
	if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), shared+": other users can write in it (mode 777)") {
		t.Fatalf("upload into a 0777 directory: %v", err)
	}
	if _, err := c.Upload(t.Context(), filepath.Join(src, "blob"), filepath.Join(shared, "sub", "blob"), TransferOptions{}); err == nil ||
		!strings.Contains(err.Error(), "other users can write in "+shared+" above it (mode 777)") {
		t.Fatalf("upload below a 0777 directory: %v", err)
	}
}

// The sftp channel may report the end of the connection before the
// connection's watcher has recorded it: it is still a lost connection, so
// the phases name it as one ("connection lost"), not as a failed write.
func TestSftpConnectionLostIsALostConnection(t *testing.T) {
	c := &Client{cfg: &resolved{SSHConfig: SSHConfig{Name: "h3"}}, done: make(chan struct{})}
	err := c.sftpError(t.Context(), "upload /srv/w: write", sftp.ErrSSHFxConnectionLost)
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("%v: not a lost connection", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, "h3: connection lost: upload /srv/w: write") {
		t.Errorf("message %q", got)
	}
	if !c.Lost() {
		t.Error("a connection reported lost is not Lost")
	}
	// Another client's refused create is no loss.
	c = &Client{cfg: &resolved{SSHConfig: SSHConfig{Name: "h3"}}, done: make(chan struct{})}
	err = c.sftpError(t.Context(), "upload /srv/w: create", os.ErrPermission)
	if errors.Is(err, ErrConnectionLost) || !errors.Is(err, os.ErrPermission) {
		t.Errorf("a refused create reads as %v", err)
	}
}
