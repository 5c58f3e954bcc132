package reports

import (
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gpuaccept/orchestrator/record"
)

// LogSuffix is how a raw log ends in a bundle: gzip, which zcat, zless and
// any browser's download read, and a 1,000-node window's logs shrink to a
// tenth.
const LogSuffix = ".log.gz"

// compressLogs gzips every raw/**/*.log of dir the window wrote (as
// name.log.gz; a window resumed after its bundle was written adds a gzip
// member to the one there, which every gzip reader reads as one stream)
// and points run's phase results at them. A log is removed only once its
// compressed copy is synced.
func compressLogs(dir string, run *record.Run) error {
	raw := filepath.Join(dir, "raw")
	err := filepath.WalkDir(raw, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == raw {
				return filepath.SkipDir
			}
			return err
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		return compressLog(path)
	})
	if err != nil {
		return fmt.Errorf("bundle %s: raw logs: %w", dir, err)
	}
	for i := range run.Phases {
		p := &run.Phases[i]
		if strings.HasSuffix(p.Log, ".log") {
			if _, err := os.Stat(filepath.Join(dir, p.Log+".gz")); err == nil {
				p.Log += ".gz"
			}
		}
	}
	return nil
}

func compressLog(path string) (err error) {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(path+".gz", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Name = filepath.Base(path)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Remove(path)
}

// OpenLog opens a raw log of a bundle, compressed or not, for reading.
func OpenLog(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, f}, nil
}
