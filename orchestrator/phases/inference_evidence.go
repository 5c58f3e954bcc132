package phases

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator/redact"
	"gpuaccept/remote"
)

// What the load test keeps besides its figures: the GPU memory the
// servers held while they took the load, and every request's line of the
// generator's log.

// memQuery is how the node's GPU memory is read: one row per GPU, in
// index order, MiB.
const memQuery = "nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits"

// gpuMem is one GPU's row; ok is false for a row nvidia-smi could not
// fill ("[N/A]").
type gpuMem struct {
	used, total float64
	ok          bool
}

// parseMemRow reads "71234, 81559".
func parseMemRow(line string) gpuMem {
	a, b, found := strings.Cut(line, ",")
	if !found {
		return gpuMem{}
	}
	u, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	t, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if err1 != nil || err2 != nil || u < 0 || t <= 0 || u > t*1.01 {
		return gpuMem{}
	}
	return gpuMem{used: u, total: t, ok: true}
}

// sampleOnce reads the node's GPUs once: how many, and their memory.
func (s *infNode) sampleOnce(ctx context.Context) ([]gpuMem, error) {
	out, err := runOn(ctx, s.w, s.n, memQuery)
	if err != nil {
		return nil, err
	}
	var rows []gpuMem
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.TrimSpace(l) != "" && len(rows) < 1024 {
			rows = append(rows, parseMemRow(l))
		}
	}
	return rows, nil
}

// memSampler reads the sampler's stream: a sample is the GPUs' rows,
// then a line "--".
type memSampler struct {
	mu      sync.Mutex
	partial []byte
	rows    []gpuMem
	// peaks: per GPU group ("" for all), the most memory in use at once
	// over the group in any one sample, and the group's total.
	samples int
	peaks   map[string][2]float64
	groups  []string
	done    chan struct{}
}

// sample reads the node's GPU memory every second until ctx ends.
func (s *infNode) sample(ctx context.Context) *memSampler {
	m := &memSampler{peaks: map[string][2]float64{}, done: make(chan struct{})}
	for _, sv := range s.servers {
		m.groups = append(m.groups, sv.GPUs)
	}
	go func() {
		defer close(m.done)
		runStream(ctx, s.w, s.n, "while :; do "+memQuery+" || exit 1; echo --; sleep 1; done", m)
	}()
	return m
}

func (m *memSampler) wait() { <-m.done }

// Write takes the stream's lines; a line longer than any row is dropped.
func (m *memSampler) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(m.partial)+len(p) <= 256 {
				m.partial = append(m.partial, p...)
			} else {
				m.partial = m.partial[:0]
			}
			break
		}
		line := string(append(m.partial, p[:i]...))
		m.partial, p = m.partial[:0], p[i+1:]
		m.line(strings.TrimSpace(line))
	}
	return n, nil
}

func (m *memSampler) line(l string) {
	if l != "--" {
		if len(m.rows) < 1024 {
			m.rows = append(m.rows, parseMemRow(l))
		}
		return
	}
	rows := m.rows
	m.rows = nil
	m.samples++
	for _, g := range m.groups {
		used, total, ok := groupMem(rows, g)
		if !ok {
			continue
		}
		if p, seen := m.peaks[g]; !seen || used > p[0] {
			m.peaks[g] = [2]float64{used, total}
		}
	}
}

// groupMem sums the rows of group ("0-3", "5", "" for every GPU); ok is
// false when a row of it is missing or unreadable.
func groupMem(rows []gpuMem, group string) (used, total float64, ok bool) {
	lo, hi := 0, len(rows)-1
	if group != "" {
		a, b, found := strings.Cut(group, "-")
		if !found {
			b = a
		}
		var err1, err2 error
		lo, err1 = strconv.Atoi(a)
		hi, err2 = strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
	}
	if lo < 0 || hi >= len(rows) || hi < lo {
		return 0, 0, false
	}
	for _, r := range rows[lo : hi+1] {
		if !r.ok {
			return 0, 0, false
		}
		used += r.used
		total += r.total
	}
	return used, total, true
}

// peak is group's most memory in use and its total, MiB; nil when no
// sample read it.
func (m *memSampler) peak(group string) (*float64, *float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.peaks[group]
	if !ok {
		return nil, nil
	}
	return &p[0], &p[1]
}

// What a request log may be in the bundle: its compressed size as the
// node sends it, and what it unpacks to (a gzip bomb is not evidence).
const (
	maxRequestLogBytes    = 64 << 20
	maxRequestLogUnpacked = 512 << 20
)

// fetchLog brings the node's request log at path into the bundle as
// raw/<node>/name: unpacked (bounded), its secret shapes scrubbed as
// every raw log's are, packed again. It returns the bundle path.
func (s *infNode) fetchLog(ctx context.Context, path, name string) (string, error) {
	rel := filepath.Join("raw", s.n.Name, name)
	dst := filepath.Join(s.w.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	part, err := os.CreateTemp(filepath.Dir(dst), "."+name+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(part.Name())
	defer part.Close()
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	lim := &limitWriter{w: part, left: maxRequestLogBytes}
	var errs capture
	err = s.e.Run(fctx, remote.Cmd{Command: "head -c " + fmt.Sprint(maxRequestLogBytes+1) + " -- " + remote.Quote(path),
		Env: nodeEnv(s.w, s.n), Stdout: lim, Stderr: &errs})
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %v", clipText(redact.Shown(lastLine(string(errs.Bytes()))), 200), err)
	case lim.over:
		return "", fmt.Errorf("larger than %d bytes: not kept", maxRequestLogBytes)
	}
	if _, err := part.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(part)
	if err != nil {
		return "", fmt.Errorf("not gzip: %v", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	zw := gzip.NewWriter(out)
	rw := redact.Writer(zw)
	n, cerr := io.Copy(rw, io.LimitReader(zr, maxRequestLogUnpacked+1))
	if err := errors.Join(rw.Close(), zw.Close(), out.Close()); cerr == nil {
		cerr = err
	}
	switch {
	case cerr != nil:
		os.Remove(dst)
		return "", fmt.Errorf("unreadable: %v", cerr)
	case n > maxRequestLogUnpacked:
		os.Remove(dst)
		return "", fmt.Errorf("unpacks to more than %d bytes: not kept", maxRequestLogUnpacked)
	}
	return rel, nil
}

// limitWriter keeps the first left bytes and notes that more came.
type limitWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) > l.left {
		p, l.over = p[:l.left], true
	}
	l.left -= int64(len(p))
	if _, err := l.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}
