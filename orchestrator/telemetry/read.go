package telemetry

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/parse"
)

// KernelEvent is one kernel log line the sampler passed on. Kind is "xid",
// "sxid" or "off-bus" (parse.KernelEvent's kinds), empty for a driver line
// that reports no event (a module loading, a GSP trace).
type KernelEvent struct {
	At    time.Time `json:"at"`
	Line  string    `json:"line"` // at most 240 bytes, as parse keeps it
	Xid   int       `json:"xid,omitempty"`
	SXid  bool      `json:"sxid,omitempty"`
	BusID string    `json:"bus_id,omitempty"`
	Kind  string    `json:"kind,omitempty"`
}

// IBSample is one IB port's counters at one moment.
type IBSample struct {
	At       time.Time        `json:"at"`
	Port     string           `json:"port"`  // <device>:<port>, e.g. mlx5_0:1
	State    string           `json:"state"` // as sysfs says it, e.g. "4: ACTIVE"
	Counters map[string]int64 `json:"counters"`
}

// Series is one node's telemetry file read back.
type Series struct {
	Starts []time.Time
	GPUs   []GPUSample
	Kernel []KernelEvent
	IB     []IBSample
	Notes  []string
	// Dropped: lines the coordinator did not keep (past max_mib_per_node,
	// too long), as its dropped= notes count them.
	Dropped int64
	// Bad: lines that did not parse (kept out, counted).
	Bad int
	// Truncated: the reader stopped at its bound (MaxUnpacked); what came
	// after is not in the series.
	Truncated bool

	// busIDs holds one copy of each GPU's bus id while reading, so a
	// sample does not keep its whole line alive for the sake of 16 bytes.
	busIDs map[string]string
	cells  []string // the row parser's, reused
	// visit, when set, is Visit's: GPU rows and kernel events go to it
	// as they are read instead of into the series, and IB samples are
	// read and not kept.
	visit *Visitor
}

// Visitor is what Visit passes the rows to; a nil func leaves those out.
type Visitor struct {
	GPU    func(*GPUSample)
	Kernel func(*KernelEvent)
}

// The reader's bounds: a file is the node's word, however it was written.
const (
	MaxUnpacked = 1 << 30 // bytes read from a file, unpacked
	MaxLine     = 16 << 10
	maxNote     = 512
	maxNotes    = 1000
)

// DroppedNote is the note the coordinator writes when it keeps n lines out
// (why: "over max_mib_per_node", "longer than 8 KiB"); Read sums them
// into Series.Dropped.
func DroppedNote(n int64, why string) string {
	return "dropped=" + strconv.FormatInt(n, 10) + " " + why
}

// ReadFile reads a node's telemetry file; a missing file is
// (nil, fs.ErrNotExist).
func ReadFile(path string) (*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Read reads a stream of gzip members (the sink writes one per flush). A
// torn last line (the coordinator stopped mid-write) is left out; a torn
// gzip member ends the series where it tore, without an error, since the
// file of a window that is still running or was killed ends that way.
func Read(r io.Reader) (*Series, error) {
	return read(r, MaxUnpacked, MaxLine)
}

// Visit reads r as Read does, within the same bounds, but streams: each
// GPU row and kernel event goes to v as it is read and is not kept, so a
// reader of 1,000 nodes' files (report.html's charts) holds one row at a
// time, not a node's day. The Series it returns has the rest: the starts,
// the notes and the counts (Dropped, Bad, Truncated).
func Visit(r io.Reader, v Visitor) (*Series, error) {
	return readInto(r, &Series{visit: &v}, MaxUnpacked, MaxLine)
}

func read(r io.Reader, maxBytes int64, maxLine int) (*Series, error) {
	return readInto(r, &Series{}, maxBytes, maxLine)
}

func readInto(r io.Reader, s *Series, maxBytes int64, maxLine int) (*Series, error) {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		if errors.Is(err, io.EOF) {
			s.visit = nil
			return s, nil
		}
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	defer zr.Close()
	lr := &io.LimitedReader{R: zr, N: maxBytes + 1}
	br := bufio.NewReaderSize(lr, 64<<10)
	var kctx []string // the kernel lines before, for off-bus's GPU
	var buf []byte
	for {
		line, full, err := readLine(br, maxLine, buf[:0])
		buf = line
		if len(line) > 0 || full {
			switch {
			case !full:
				// A torn last line: the stream ended inside it.
			case len(line) > maxLine:
				s.Bad++
			default:
				s.add(string(line), &kctx)
			}
		}
		if err != nil {
			if lr.N <= 0 {
				s.Truncated = true
			}
			s.busIDs, s.cells, s.visit = nil, nil, nil
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isGzipTear(err) {
				return s, nil
			}
			return s, fmt.Errorf("telemetry: %w", err)
		}
	}
}

// isGzipTear: a member cut short or a trailer that does not match, what a
// coordinator killed mid-write leaves.
func isGzipTear(err error) bool {
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader)
}

// readLine reads up to '\n'; a line longer than max is skipped to its end
// and returned max+1 bytes long. full is false when the stream ended
// before the newline.
func readLine(br *bufio.Reader, max int, buf []byte) (line []byte, full bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf) <= max {
			buf = append(buf, chunk[:min(len(chunk), max+1-len(buf))]...)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, false, err
		}
	}
}

func (s *Series) add(line string, kctx *[]string) {
	line = strings.TrimSuffix(line, "\r")
	msStr, rest, ok1 := strings.Cut(line, " ")
	tag, payload, _ := strings.Cut(rest, " ")
	ms, err := strconv.ParseInt(msStr, 10, 64)
	// Years 1970 to 2286: a time outside them is not a coordinator's.
	if !ok1 || err != nil || ms < 0 || ms > 1e13 {
		s.Bad++
		return
	}
	at := time.UnixMilli(ms).UTC()
	switch tag {
	case TagStart:
		s.Starts = append(s.Starts, at)
	case TagGPU:
		if s.cells == nil {
			s.cells = make([]string, 0, len(Fields)+1)
		}
		g, err := parseGPURow(payload, at, s.cells)
		if err != nil {
			s.Bad++
			return
		}
		g.BusID = s.intern(g.BusID)
		if s.visit != nil {
			if s.visit.GPU != nil {
				s.visit.GPU(&g)
			}
			return
		}
		s.GPUs = append(s.GPUs, g)
	case TagKernel:
		e := kernelEvent(payload, at, *kctx)
		*kctx = append((*kctx)[max(0, len(*kctx)-1):], payload)
		if s.visit != nil {
			if s.visit.Kernel != nil {
				s.visit.Kernel(&e)
			}
			return
		}
		s.Kernel = append(s.Kernel, e)
	case TagIB:
		ib, ok := ibSample(payload, at)
		if !ok {
			s.Bad++
			return
		}
		if s.visit != nil {
			return
		}
		s.IB = append(s.IB, ib)
	case TagNote:
		if n, ok := droppedCount(payload); ok {
			s.Dropped += n
		}
		if len(s.Notes) < maxNotes {
			if len(payload) > maxNote {
				payload = payload[:maxNote]
			}
			s.Notes = append(s.Notes, payload)
		}
	default:
		s.Bad++
	}
}

func (s *Series) intern(id string) string {
	if v, ok := s.busIDs[id]; ok {
		return v
	}
	v := strings.Clone(id)
	if s.busIDs == nil {
		s.busIDs = map[string]string{}
	}
	if len(s.busIDs) < 1024 {
		s.busIDs[v] = v
	}
	return v
}

func kernelEvent(line string, at time.Time, before []string) KernelEvent {
	e := KernelEvent{At: at, Line: line}
	if len(e.Line) > 240 {
		e.Line = e.Line[:240]
	}
	if evs := parse.KernelLineEvents(line, before...); len(evs) > 0 {
		p := evs[0]
		e.Line, e.Kind, e.BusID = p.Text, p.Kind, p.Device
		e.SXid = p.Kind == "sxid"
		e.Xid = p.Code
	}
	return e
}

// ibSample reads "<dev>:<port> state=<state> <counter>=<v> ...". The state
// has a space in it ("4: ACTIVE"), so a field without '=' continues the
// value before it.
func ibSample(payload string, at time.Time) (IBSample, bool) {
	fields := strings.Fields(payload)
	if len(fields) == 0 || !strings.Contains(fields[0], ":") || len(fields[0]) > 64 {
		return IBSample{}, false
	}
	ib := IBSample{At: at, Port: fields[0], Counters: map[string]int64{}}
	last := ""
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			if last == "state" && len(ib.State) < 64 {
				ib.State += " " + f
				continue
			}
			return IBSample{}, false
		}
		last = k
		if k == "state" {
			ib.State = v
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || len(ib.Counters) >= 32 || len(k) > 64 {
			return IBSample{}, false
		}
		ib.Counters[k] = n
	}
	return ib, true
}

func droppedCount(note string) (int64, bool) {
	v, ok := strings.CutPrefix(note, "dropped=")
	if !ok {
		return 0, false
	}
	v, _, _ = strings.Cut(v, " ")
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n > 0
}
