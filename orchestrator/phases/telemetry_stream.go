package phases

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator/telemetry"
)

// The bounds of what the coordinator keeps of one node's stream.
const (
	// maxTelemetryLine: a row of nvidia-smi's query is a few hundred
	// bytes, a kernel line under 1 KiB; a longer line is cut here.
	maxTelemetryLine = 8 << 10
	// telemetryFlushEvery: what gpuaccept status reads of a running
	// window is at most this old.
	telemetryFlushEvery = 30 * time.Second
)

// nodeTags are the tags a node may send: start lines are the
// coordinator's own, so a node cannot forge where a sampler began.
var nodeTags = map[string]bool{telemetry.TagGPU: true, telemetry.TagKernel: true, telemetry.TagIB: true, telemetry.TagNote: true}

// telemetrySink is the coordinator's end of one node's stream: each line
// the node sends is stamped with the time it arrived and appended, gzip,
// to raw/<node>/telemetry.txt.gz, within the bounds above. Lines wait in
// memory and go to the file as a gzip member of their own at each flush:
// an open gzip writer holds some 800 KiB (deflate's tables), which a sink
// per node made 1.5 GiB at 1,000 nodes (BenchmarkTelemetryFleet), so the
// writers are shared, and each member is whole once written.
type telemetrySink struct {
	mu sync.Mutex
	f  *os.File
	// pending: the lines not yet in the file (at most pendingMax).
	pending bytes.Buffer
	now     func() time.Time
	limit   int64 // bytes the file may reach (see openTelemetrySink)
	kept    int64

	line []byte // the line so far
	long bool   // the line so far passed maxTelemetryLine: the rest is not kept
	// What was not kept as it came: lines past the limit, lines cut,
	// lines with a tag a node may not send.
	dropped, cut, rejected int64
	full                   bool
	lastFlush              time.Time
	err                    error

	// onGPU hears each GPU row as it is kept (the idle guard); nil when
	// nothing listens. Called under mu: it must not block.
	onGPU func(at time.Time, row string)

	// The sampler's first notes, until "note ready".
	sources, missing []string
	ready            chan struct{}
	isReady          bool
}

// openTelemetrySink opens path for appending and starts a member with the
// coordinator's start line. limit bounds the file: what a node sends past
// it is counted, not kept (the bytes kept are counted before compression,
// so the file stays well under it).
func openTelemetrySink(path string, interval time.Duration, fields int, limit int64, now func() time.Time) (*telemetrySink, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := mendTornTelemetry(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &telemetrySink{f: f, now: now, limit: limit, kept: st.Size(),
		ready: make(chan struct{}), lastFlush: now()}
	s.put(fmt.Sprintf("%s interval=%d fields=%d", telemetry.TagStart, interval.Milliseconds(), fields))
	if err := s.flush(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// mendTornTelemetry rewrites a file whose last gzip member tore (the
// coordinator was killed mid-write) as one whole member of what reads, to
// its last full line. A reader stops at a tear, so the member a resumed
// window appends after one would never be read: the resumed sampler's
// rows were lost from the verdicts and the status. A whole file, or none,
// is left as it is.
func mendTornTelemetry(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	torn := func(err error) bool {
		// A tail of zeros (a crash before the data reached the disk)
		// reads as corrupt deflate data.
		var corrupt flate.CorruptInputError
		return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) ||
			errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt)
	}
	// First pass: is it whole? (Reading, not holding: a day's file is large.)
	zr, err := gzip.NewReader(bufio.NewReader(f))
	switch {
	case errors.Is(err, io.EOF):
		return nil // empty
	case err == nil:
		_, err = io.Copy(io.Discard, io.LimitReader(zr, telemetry.MaxUnpacked))
		if err == nil {
			return nil
		}
	}
	if !torn(err) {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".telemetry-mend-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	gz := gzip.NewWriter(tmp)
	if zr, err := gzip.NewReader(bufio.NewReader(f)); err == nil {
		br := bufio.NewReaderSize(io.LimitReader(zr, telemetry.MaxUnpacked), telemetry.MaxLine+1)
		for {
			line, err := br.ReadSlice('\n')
			if err == nil {
				if _, err := gz.Write(line); err != nil {
					return err
				}
				continue
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				// A line longer than the buffer: the reader drops such lines.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = br.ReadSlice('\n')
				}
				if err == nil {
					continue
				}
			}
			if err == io.EOF || torn(err) {
				break // a last line without its end is left out, as the reader does
			}
			return err
		}
	}
	if err := gz.Close(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil { // as the sink makes it, not CreateTemp's 0600
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Write takes the node's stdout as it comes.
func (s *telemetrySink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if s.f == nil {
		// Closed: what the stream's copier still hands over is not kept
		// (the counts are already in the file's last notes).
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxTelemetryLine - len(s.line); len(chunk) > room {
			s.line = append(s.line, chunk[:max(room, 0)]...)
			s.long = true
		} else {
			s.line = append(s.line, chunk...)
		}
		if i < 0 {
			break
		}
		s.take(string(s.line), s.long)
		s.line, s.long = s.line[:0], false
		p = p[i+1:]
	}
	if s.now().Sub(s.lastFlush) >= telemetryFlushEvery {
		s.flushLocked()
	}
	// A disk that fails is the coordinator's trouble, not the node's: the
	// stream goes on being read (so the node is not blocked) and the
	// error is Close's.
	return n, nil
}

// take keeps one complete line from the node.
func (s *telemetrySink) take(line string, long bool) {
	line = strings.TrimSuffix(line, "\r")
	tag, payload, _ := strings.Cut(line, " ")
	if !nodeTags[tag] {
		s.rejected++
		return
	}
	if long {
		s.cut++
	}
	if tag == telemetry.TagNote && !s.isReady {
		s.firstNote(payload)
	}
	s.put(line)
	if tag == telemetry.TagGPU && s.onGPU != nil && !long {
		s.onGPU(s.now(), payload)
	}
	if tag == telemetry.TagKernel {
		// Rare and not sent again: a coordinator killed within the next
		// 30 s must not lose an Xid (the resumed sampler skips the
		// kernel lines already there).
		s.flushLocked()
	}
}

// firstNote reads the sampler's notes before "ready": which sources it
// found.
func (s *telemetrySink) firstNote(payload string) {
	f := strings.Fields(payload)
	switch {
	case len(f) >= 2 && f[0] == "source":
		s.sources = append(s.sources, f[1])
	case len(f) >= 2 && f[0] == "missing":
		s.missing = append(s.missing, strings.TrimPrefix(payload, "missing "))
	case len(f) == 1 && f[0] == "ready":
		s.isReady = true
		close(s.ready)
	}
}

// put appends "<unix ms> line", unless the file is full.
func (s *telemetrySink) put(line string) {
	if s.err != nil {
		return
	}
	rec := strconv.FormatInt(s.now().UnixMilli(), 10) + " " + line + "\n"
	if s.kept+int64(len(rec)) > s.limit {
		if !s.full {
			s.full = true
			// Said once, in the file, past the limit by one short line.
			s.write(fmt.Sprintf("%d %s gpuaccept: the file reached telemetry.max_mib_per_node (%d MiB); "+
				"later lines are counted, not kept\n", s.now().UnixMilli(), telemetry.TagNote, s.limit>>20))
		}
		s.dropped++
		return
	}
	s.kept += int64(len(rec))
	s.write(rec)
}

func (s *telemetrySink) write(rec string) {
	s.pending.WriteString(rec)
	if s.pending.Len() >= pendingMax {
		s.flushLocked()
	}
}

// pendingMax bounds what waits in memory between flushes (30 s of a node's
// rows are some 30 KiB).
const pendingMax = 256 << 10

// gzipWriters are shared by every sink: a writer is held only while a
// member is written.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// Flush makes what arrived so far readable from the file: a member of its
// own, whole (gpuaccept status reads the file while the window runs).
func (s *telemetrySink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *telemetrySink) flushLocked() error {
	s.lastFlush = s.now()
	if s.err != nil || s.pending.Len() == 0 || s.f == nil {
		s.pending.Reset()
		return s.err
	}
	gz := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(s.f)
	if _, err := gz.Write(s.pending.Bytes()); err != nil {
		s.err = err
	}
	if err := gz.Close(); err != nil && s.err == nil {
		s.err = err
	}
	gz.Reset(io.Discard) // let go of the file
	gzipWriters.Put(gz)
	s.pending.Reset()
	return s.err
}

func (s *telemetrySink) flush() error { return s.Flush() }

// Close ends the member: a torn last line is kept as it came (counted as
// cut), and what was not kept whole is counted in last notes that
// telemetry.Read adds to Series.Dropped (telemetry.DroppedNote).
func (s *telemetrySink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return s.err
	}
	if len(s.line) > 0 {
		s.take(string(s.line), true)
		s.line = nil
	}
	for _, d := range []struct {
		n   int64
		why string
	}{
		{s.dropped, "over max_mib_per_node"},
		{s.cut, "longer than 8 KiB (cut)"},
		{s.rejected, "with a tag a node may not send"},
	} {
		if d.n > 0 {
			// Past the limit too: the count is what the reader must know.
			s.write(fmt.Sprintf("%d %s %s\n", s.now().UnixMilli(), telemetry.TagNote, telemetry.DroppedNote(d.n, d.why)))
		}
	}
	s.flushLocked()
	if err := s.f.Sync(); err != nil && s.err == nil {
		s.err = err
	}
	if err := s.f.Close(); err != nil && s.err == nil {
		s.err = err
	}
	s.f = nil
	return s.err
}

// Ready is closed once the sampler said "note ready".
func (s *telemetrySink) Ready() <-chan struct{} { return s.ready }

// Sources is what the sampler found and what it lacks, as its first
// notes said.
func (s *telemetrySink) Sources() (found, missing []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sources...), append([]string(nil), s.missing...)
}
