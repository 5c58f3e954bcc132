package orchestrator

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

// JournalFile is the journal's name in the run directory while the window
// may still be resumed; SealedJournalFile its name once the window ended
// (gzip: nothing appends to it again, and it is a fifth of a 1,000-node
// bundle uncompressed).
const (
	JournalFile       = "journal.jsonl"
	SealedJournalFile = JournalFile + ".gz"
)

// entry is one journal line. The journal is the window's memory: each line
// is on disk (fsync) before the window moves on, so a coordinator that
// dies loses at most the phase it was in.
type entry struct {
	Type string    `json:"type"` // start | result | done | quarantine | note | idle | release | slurm | resume | end
	At   time.Time `json:"at"`

	Run    *record.Run         `json:"run,omitempty"`    // start: the header (no phases yet)
	Result *record.PhaseResult `json:"result,omitempty"` // result
	Phase  string              `json:"phase,omitempty"`  // done, quarantine
	Node   string              `json:"node,omitempty"`   // quarantine
	Reason string              `json:"reason,omitempty"` // quarantine, end
	Key    string              `json:"key,omitempty"`    // note
	Value  string              `json:"value,omitempty"`  // note
}

// journal appends entries; phases write notes from their per-node
// goroutines, so writes are serialised.
type journal struct {
	mu     sync.Mutex
	f      *os.File
	closed bool
	// failed: a write failed (the bundle's disk is full). Nothing more is
	// appended after a line that may be torn, so what is there stays
	// readable; the window goes on in memory to tear down.
	failed error
}

func createJournal(dir string) (*journal, error) {
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &journal{f: f}, nil
}

// appendJournal reopens a journal to continue it, first cutting off a line
// torn by a crash (everything after the last whole entry, at size).
func appendJournal(dir string, size int64) (*journal, error) {
	path := filepath.Join(dir, JournalFile)
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	// A whole last entry may lack only its newline.
	newline := size > st.Size()
	if err := os.Truncate(path, min(size, st.Size())); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if newline {
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	return &journal{f: f}, nil
}

func (j *journal) write(e entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil {
		return j.failed
	}
	e.At = time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	// A secret a node printed never reaches the disk, here or anywhere.
	b = redact.Bytes(b)
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		j.failed = fmt.Errorf("journal: %w", err)
		return j.failed
	}
	if err := j.f.Sync(); err != nil {
		j.failed = fmt.Errorf("journal: fsync: %w", err)
		return j.failed
	}
	return nil
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	return j.f.Close()
}

// seal ends the journal of a window that is over: closed, then gzipped to
// SealedJournalFile (synced, renamed into place) before the plain file is
// removed, so a crash at any point leaves one whole journal to read.
func (j *journal) seal() error {
	if err := j.close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	path := j.f.Name()
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".journal-*.gz")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone by rename when all went well
	zw := gzip.NewWriter(tmp)
	zw.Name = JournalFile
	_, err = io.Copy(zw, in)
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(filepath.Dir(path), SealedJournalFile))
	}
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil {
		return fmt.Errorf("journal: seal: %w", err)
	}
	return nil
}

// OpenJournal reads the journal of the run in dir, plain or sealed.
func OpenJournal(dir string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(dir, JournalFile))
	if !os.IsNotExist(err) {
		return f, err
	}
	f, err = os.Open(filepath.Join(dir, SealedJournalFile))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: no %s in it", dir, JournalFile)
		}
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, f}, nil
}

// replayed is what a journal says about a window so far.
type replayed struct {
	run        *record.Run
	done       map[string]bool
	quarantine []entry
	notes      []entry
	// idle and release: the idle guard's signals and releases.
	idle, release []entry
	// slurm: the window's own allocation (its job, its nodes, its end).
	slurm []entry
	// teardown names the teardown phases (set before keep): a released
	// node's teardown results are kept, as the node is not torn down again.
	teardown map[string]bool
	ended    bool
	size     int64 // bytes of whole entries
	// For `gpuaccept status`: when each phase was marked done, the last
	// entry's time, and why the window ended.
	doneAt    map[string]time.Time
	last      time.Time
	endReason string
}

// readJournal rebuilds a window from its journal. A torn last line (the
// coordinator died mid-write) is ignored; a bad line elsewhere is an error
// naming it.
func readJournal(dir string) (*replayed, error) {
	path := filepath.Join(dir, JournalFile)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		path = filepath.Join(dir, SealedJournalFile) // what errors below name
	}
	f, err := OpenJournal(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &replayed{done: map[string]bool{}, doneAt: map[string]time.Time{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, line := range lines {
		var e entry
		if err := json.Unmarshal(line, &e); err != nil {
			if i == len(lines)-1 {
				break // torn by a crash mid-write: the phase will run again
			}
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		r.size += int64(len(line)) + 1
		r.last = e.At
		switch e.Type {
		case "start":
			r.run = e.Run
		case "result":
			if r.run == nil || e.Result == nil {
				return nil, fmt.Errorf("%s:%d: result before start", path, i+1)
			}
			r.run.Phases = append(r.run.Phases, *e.Result)
		case "done":
			r.done[e.Phase] = true
			r.doneAt[e.Phase] = e.At
		case "quarantine":
			r.quarantine = append(r.quarantine, e)
		case "note":
			r.notes = append(r.notes, e)
		case "idle":
			r.idle = append(r.idle, e)
		case "release":
			r.release = append(r.release, e)
		case "slurm":
			r.slurm = append(r.slurm, e)
		case "resume":
			if r.run != nil {
				r.run.Resumed = append(r.run.Resumed, e.At)
			}
		case "end":
			r.ended, r.endReason = true, e.Reason
		}
	}
	if r.run == nil {
		return nil, errors.New(path + ": no start record")
	}
	return r, nil
}

// keep drops what phases that must run again left behind: results and
// quarantines of unfinished phases (they run again in full, so a phase's
// results always come from one attempt) and of phases that always re-run.
//
// A node quarantined by a phase that is kept takes no part in the re-run
// of an always-run phase, so its earlier result of that phase stays: a
// resumed window judges it as the uninterrupted one did.
func (r *replayed) keep(rerun func(phase string) bool) {
	keep := func(phase string) bool { return r.done[phase] && !rerun(phase) }
	var q []entry
	out := map[string]bool{}
	for _, e := range r.quarantine {
		if keep(e.Phase) {
			q = append(q, e)
			out[e.Node] = true
		}
	}
	r.quarantine = q
	released := map[string]bool{}
	for _, e := range r.release {
		released[e.Node] = true
	}
	kept := r.run.Phases[:0]
	for _, p := range r.run.Phases {
		if keep(p.Phase) || r.done[p.Phase] && rerun(p.Phase) && (out[p.Node] || released[p.Node]) || r.teardown[p.Phase] && released[p.Node] {
			kept = append(kept, p)
		}
	}
	r.run.Phases = kept
}
