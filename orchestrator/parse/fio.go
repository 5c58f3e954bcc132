package parse

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Fio reads the report of `fio --output-format=json` (or json+, which only
// adds latency histogram "bins" that are ignored here).
//
// What it handles:
//   - fio 3.x: "fio version", "timestamp", "timestamp_ms", "time",
//     "global options", "jobs", "disk_util"; io_bytes in bytes, bw_bytes,
//     latencies in nanoseconds (slat_ns/clat_ns/lat_ns).
//   - fio 2.x: no bw_bytes/io_kbytes, and then "io_bytes" is in KiB (fio
//     shifted it by 10 before 3.0) and "bw" in KiB/s; latencies in
//     microseconds ("clat"/"lat"); percentile maps padded with "0.00" keys,
//     which are dropped. fio 2.1 writes no timestamp, no options and no
//     total_ios (left 0).
//   - `fio --client` runs: the jobs are under "client_stats", each with the
//     server's "hostname" and "port"; the "All clients" sum fio adds when
//     more than one server reported is kept apart (AllClients) so sums over
//     Jobs do not count it twice.
//   - unified_rw_reporting: the "mixed" direction.
//   - text before the JSON (fio's "note:"/"fio:" warnings, client banners)
//     and after it is kept as Notes; several fio reports in one capture
//     (runs appended to one file) are all read, their jobs in order.
//   - numbers written as ints, floats or quoted strings; duplicate keys (fio
//     writes "filename" twice in "global options" with write_hist_log): the
//     last one wins, as for every JSON decoder.
//
// Latency percentiles come from the completion latency (clat) map; fio writes
// them for the total latency (lat) instead with lat_percentiles=1, and then
// those are used and PercentileOf says "lat". All latencies are given in µs.
//
// Errors: ErrNotRecognized when no fio JSON report is in the text (fio's
// normal text output, other JSON); ErrToolFailed when a job reports
// error != 0 (the parsed result is returned with it); ErrMalformed when the
// report is cut short, lists no jobs or has a field of the wrong type.
func Fio(text string) (FioResult, error) {
	r := FioResult{GlobalOptions: map[string]string{}, Jobs: []FioJob{}, DiskUtil: []FioDiskUtil{}}
	docs, notes, truncated := fioFindDocs(normalize(text))
	r.Notes = notes
	if len(docs) == 0 {
		if truncated {
			return r, fmt.Errorf("%s: %w: the JSON report is cut short", fioTool, ErrMalformed)
		}
		return r, notRecognized(fioTool, splitLines(text), "fio JSON report")
	}
	var bad error
	if truncated {
		bad = fmt.Errorf("%s: %w: another JSON report in the text is cut short", fioTool, ErrMalformed)
	}
	for i, raw := range docs {
		var d fioDoc
		if err := json.Unmarshal(raw, &d); err != nil && bad == nil {
			bad = fmt.Errorf("%s: %w: JSON field of unexpected type: %v", fioTool, ErrMalformed, err)
		}
		d.addTo(&r, i == 0)
	}
	r.Documents = len(docs)
	if len(r.Jobs) == 0 && bad == nil {
		bad = fmt.Errorf("%s: %w: the report lists no jobs", fioTool, ErrMalformed)
	}
	if failed := r.failedJobs(); len(failed) > 0 {
		return r, fmt.Errorf("%s: %w: %s", fioTool, ErrToolFailed, strings.Join(failed, "; "))
	}
	r.OK = bad == nil
	return r, bad
}

const fioTool = "fio"

// FioResult is one fio report (or several appended to one capture).
type FioResult struct {
	Version     string `json:"fio_version"`            // as fio writes it: "fio-3.16"
	Timestamp   int64  `json:"timestamp,omitempty"`    // Unix seconds; 0 where fio wrote none (fio 2.1)
	TimestampMS int64  `json:"timestamp_ms,omitempty"` // Unix milliseconds (fio >= 2.2)
	Time        string `json:"time,omitempty"`         // "Tue Jul 20 06:41:18 2021"
	// GlobalOptions is fio's "global options" object (values as strings).
	GlobalOptions map[string]string `json:"global_options"`
	// Client: the jobs came from "client_stats" (fio --client).
	Client bool     `json:"client,omitempty"`
	Jobs   []FioJob `json:"jobs"`
	// AllClients holds the "All clients" sums fio --client adds (one per
	// report) when more than one server reported; not part of Jobs.
	AllClients []FioJob      `json:"all_clients,omitempty"`
	DiskUtil   []FioDiskUtil `json:"disk_util"`
	Documents  int           `json:"documents"`       // fio JSON reports found in the text
	Notes      []string      `json:"notes,omitempty"` // non-blank lines outside the JSON (warnings)
	OK         bool          `json:"ok"`              // parsed cleanly, at least one job, every error 0
}

// FioJob is one entry of "jobs" (or "client_stats"). With group_reporting
// fio writes one entry for the whole group (numjobs included).
type FioJob struct {
	Name     string `json:"name"`
	GroupID  int    `json:"groupid"`
	Error    int    `json:"error"` // errno of the first error; 0 when the job ran clean
	Hostname string `json:"hostname,omitempty"`
	Port     int    `json:"port,omitempty"`
	// Options is the job's "job options" object as fio wrote it.
	Options map[string]string `json:"options,omitempty"`
	// The main options, from the job's options, else the global ones
	// (empty/0 when neither names them: fio's default applied).
	RW       string `json:"rw,omitempty"`
	BS       string `json:"bs,omitempty"`
	Size     string `json:"size,omitempty"`
	IODepth  int    `json:"iodepth,omitempty"`
	NumJobs  int    `json:"numjobs,omitempty"`
	Direct   bool   `json:"direct,omitempty"`
	IOEngine string `json:"ioengine,omitempty"`
	// Per direction; nil where fio wrote none ("mixed" only with
	// unified_rw_reporting).
	Read   *FioIO  `json:"read,omitempty"`
	Write  *FioIO  `json:"write,omitempty"`
	Trim   *FioIO  `json:"trim,omitempty"`
	Mixed  *FioIO  `json:"mixed,omitempty"`
	UsrCPU float64 `json:"usr_cpu"` // percent
	SysCPU float64 `json:"sys_cpu"`
}

// FioIO is one direction's statistics, in bytes, bytes/s, ms and µs
// whatever the fio version wrote.
type FioIO struct {
	IOBytes    int64   `json:"io_bytes"`
	BWBytes    float64 `json:"bw_bytes"` // bytes per second
	IOPS       float64 `json:"iops"`
	RuntimeMS  int64   `json:"runtime_ms"`
	TotalIOs   int64   `json:"total_ios"` // 0 where fio did not write it (fio 2.1)
	ClatMeanUS float64 `json:"clat_mean_us"`
	LatMeanUS  float64 `json:"lat_mean_us"`
	// PercentileOf says which latency the percentiles are of: "clat",
	// "lat" (lat_percentiles=1 without clat ones) or "" (none written).
	PercentileOf string          `json:"percentile_of,omitempty"`
	Percentiles  []FioPercentile `json:"percentiles_us,omitempty"` // ascending
	P50US        *float64        `json:"p50_us,omitempty"`
	P99US        *float64        `json:"p99_us,omitempty"`
	P999US       *float64        `json:"p99_9_us,omitempty"`
}

// FioPercentile is one entry of fio's percentile map: Pct percent of the
// I/Os completed within US microseconds.
type FioPercentile struct {
	Pct float64 `json:"pct"`
	US  float64 `json:"us"`
}

// FioDiskUtil is one "disk_util" entry.
type FioDiskUtil struct {
	Name     string  `json:"name"`
	Util     float64 `json:"util_pct"`
	ReadIOs  int64   `json:"read_ios"`
	WriteIOs int64   `json:"write_ios"`
	Hostname string  `json:"hostname,omitempty"` // fio --client: the server
}

// ReadBW is the read bandwidth in bytes/s summed over Jobs. The sum means
// aggregate bandwidth only for jobs that ran at the same time (one group,
// or group_reporting's single entry); stonewalled groups run one after the
// other. Jobs reported with unified_rw_reporting ("mixed") count in
// neither ReadBW nor WriteBW.
func (r FioResult) ReadBW() float64 {
	return r.sumBW(func(j FioJob) *FioIO { return j.Read })
}

// WriteBW is the write bandwidth in bytes/s summed over Jobs (see ReadBW).
func (r FioResult) WriteBW() float64 {
	return r.sumBW(func(j FioJob) *FioIO { return j.Write })
}

func (r FioResult) sumBW(dir func(FioJob) *FioIO) float64 {
	sum := 0.0
	for _, j := range r.Jobs {
		if d := dir(j); d != nil {
			sum += d.BWBytes
		}
	}
	return sum
}

// failedJobs describes each job (and All clients sum) with error != 0.
func (r FioResult) failedJobs() []string {
	var out []string
	for _, j := range append(append([]FioJob{}, r.Jobs...), r.AllClients...) {
		if j.Error == 0 {
			continue
		}
		s := fmt.Sprintf("job %q error %d", j.Name, j.Error)
		if j.Error > 0 && j.Error < 4096 {
			s += " (" + syscall.Errno(j.Error).Error() + ")"
		}
		if j.Hostname != "" {
			s += " on " + j.Hostname
		}
		out = append(out, s)
	}
	return out
}

// fioFindDocs finds the fio JSON reports in text: objects that open a line
// (fio prints its report from a fresh line) and carry fio's keys. The lines
// outside them become notes. truncated: a fio-looking object ran to the end
// of the text unclosed.
func fioFindDocs(text string) (docs []json.RawMessage, notes []string, truncated bool) {
	const maxFailed = 32 // failed decodes each read to the end at worst: bound the work
	failed, noteFrom := 0, 0
	for i := 0; i < len(text); {
		eol := strings.IndexByte(text[i:], '\n')
		if eol < 0 {
			eol = len(text)
		} else {
			eol += i
		}
		j := i + len(text[i:eol]) - len(strings.TrimLeft(text[i:eol], " \t"))
		if j < eol && text[j] == '{' && failed < maxFailed {
			dec := json.NewDecoder(strings.NewReader(text[j:]))
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if err == nil {
				end := j + int(dec.InputOffset())
				if fioLooksLike(raw) {
					notes = fioNotes(notes, text[noteFrom:i])
					docs = append(docs, raw)
					noteFrom = end
				}
				i = end // a non-fio object's inner lines are no candidates
				continue
			}
			failed++
			if errors.Is(err, io.ErrUnexpectedEOF) && (strings.Contains(text[j:], `"fio version"`) || strings.Contains(text[j:], `"jobname"`)) {
				truncated = true
			}
		}
		i = eol + 1
	}
	if noteFrom < len(text) {
		notes = fioNotes(notes, text[noteFrom:])
	}
	return docs, notes, truncated
}

// fioLooksLike: a "fio version" string, or a jobs/client_stats list whose
// first entry has a jobname.
func fioLooksLike(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	var v string
	if json.Unmarshal(m["fio version"], &v) == nil && strings.HasPrefix(v, "fio") {
		return true
	}
	for _, key := range []string{"jobs", "client_stats"} {
		var list []json.RawMessage
		var first map[string]json.RawMessage
		if json.Unmarshal(m[key], &list) == nil && len(list) > 0 && json.Unmarshal(list[0], &first) == nil {
			if _, ok := first["jobname"]; ok {
				return true
			}
		}
	}
	return false
}

// fioNotes appends the non-blank lines of s, at most maxNotes in all.
func fioNotes(notes []string, s string) []string {
	const maxNotes = 20
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		switch {
		case len(notes) < maxNotes:
			notes = append(notes, clip(l))
		case len(notes) == maxNotes:
			notes = append(notes, "...")
		}
	}
	return notes
}

// The JSON as fio writes it; every scalar through the lenient types below.
type fioDoc struct {
	Version     fioStr       `json:"fio version"`
	Timestamp   fioNum       `json:"timestamp"`
	TimestampMS fioNum       `json:"timestamp_ms"`
	Time        fioStr       `json:"time"`
	Global      fioOptions   `json:"global options"`
	Jobs        []fioJobDoc  `json:"jobs"`
	Clients     []fioJobDoc  `json:"client_stats"`
	DiskUtil    []fioDiskDoc `json:"disk_util"`
}

type fioJobDoc struct {
	Name     fioStr     `json:"jobname"`
	GroupID  fioNum     `json:"groupid"`
	Error    fioNum     `json:"error"`
	Options  fioOptions `json:"job options"`
	Read     *fioDirDoc `json:"read"`
	Write    *fioDirDoc `json:"write"`
	Trim     *fioDirDoc `json:"trim"`
	Mixed    *fioDirDoc `json:"mixed"`
	UsrCPU   fioNum     `json:"usr_cpu"`
	SysCPU   fioNum     `json:"sys_cpu"`
	Hostname fioStr     `json:"hostname"`
	Port     fioNum     `json:"port"`
}

type fioDirDoc struct {
	IOBytes  fioNum     `json:"io_bytes"`
	IOKBytes fioNum     `json:"io_kbytes"`
	BWBytes  fioNum     `json:"bw_bytes"`
	BW       fioNum     `json:"bw"`
	IOPS     fioNum     `json:"iops"`
	Runtime  fioNum     `json:"runtime"`
	TotalIOs fioNum     `json:"total_ios"`
	ClatNS   *fioLatDoc `json:"clat_ns"`
	LatNS    *fioLatDoc `json:"lat_ns"`
	Clat     *fioLatDoc `json:"clat"` // fio 2.x, µs
	Lat      *fioLatDoc `json:"lat"`
}

type fioLatDoc struct {
	Mean       fioNum            `json:"mean"`
	Percentile map[string]fioNum `json:"percentile"`
}

type fioDiskDoc struct {
	Name     fioStr `json:"name"`
	Util     fioNum `json:"util"`
	ReadIOs  fioNum `json:"read_ios"`
	WriteIOs fioNum `json:"write_ios"`
	Hostname fioStr `json:"hostname"`
}

// addTo appends the document's jobs and disks; the first one also gives
// the header fields.
func (d *fioDoc) addTo(r *FioResult, first bool) {
	if first {
		r.Version = string(d.Version)
		r.Timestamp = d.Timestamp.int64()
		r.TimestampMS = d.TimestampMS.int64()
		r.Time = string(d.Time)
		for k, v := range d.Global {
			r.GlobalOptions[k] = v
		}
	}
	for _, jd := range d.Jobs {
		r.Jobs = append(r.Jobs, jd.job(d.Global))
	}
	if len(d.Clients) > 0 {
		r.Client = true
	}
	for _, jd := range d.Clients {
		j := jd.job(d.Global)
		if len(d.Clients) > 1 && j.Name == "All clients" {
			r.AllClients = append(r.AllClients, j)
			continue
		}
		r.Jobs = append(r.Jobs, j)
	}
	for _, du := range d.DiskUtil {
		r.DiskUtil = append(r.DiskUtil, FioDiskUtil{Name: string(du.Name), Util: du.Util.f,
			ReadIOs: du.ReadIOs.int64(), WriteIOs: du.WriteIOs.int64(), Hostname: string(du.Hostname)})
	}
}

func (jd fioJobDoc) job(global fioOptions) FioJob {
	j := FioJob{Name: string(jd.Name), GroupID: jd.GroupID.int(), Error: jd.Error.int(),
		Hostname: string(jd.Hostname), Port: jd.Port.int(), UsrCPU: jd.UsrCPU.f, SysCPU: jd.SysCPU.f}
	if jd.Error.set && j.Error == 0 && jd.Error.f != 0 {
		j.Error = -1 // an error code out of int range is still an error
	}
	if len(jd.Options) > 0 {
		j.Options = map[string]string(jd.Options)
	}
	opt := func(names ...string) string {
		for _, src := range []fioOptions{jd.Options, global} {
			for _, n := range names {
				if v, ok := src[n]; ok {
					return v
				}
			}
		}
		return ""
	}
	j.RW = opt("rw", "readwrite")
	j.BS = opt("bs", "blocksize")
	j.Size = opt("size")
	j.IOEngine = opt("ioengine")
	j.IODepth, _ = strconv.Atoi(opt("iodepth"))
	j.NumJobs, _ = strconv.Atoi(opt("numjobs"))
	switch strings.ToLower(opt("direct")) {
	case "1", "true", "yes", "on":
		j.Direct = true
	}
	j.Read, j.Write, j.Trim, j.Mixed = jd.Read.io(), jd.Write.io(), jd.Trim.io(), jd.Mixed.io()
	return j
}

func (dd *fioDirDoc) io() *FioIO {
	if dd == nil {
		return nil
	}
	io := &FioIO{IOBytes: dd.IOBytes.int64(), BWBytes: dd.BWBytes.f, IOPS: dd.IOPS.f,
		RuntimeMS: dd.Runtime.int64(), TotalIOs: dd.TotalIOs.int64()}
	if !dd.BWBytes.set {
		io.BWBytes = finite(dd.BW.f * 1024) // "bw" is KiB/s in every version
	}
	if !dd.IOKBytes.set && !dd.BWBytes.set {
		// fio < 3.0 (no io_kbytes, no bw_bytes): io_bytes is in KiB.
		io.IOBytes = 0
		if kib := dd.IOBytes.int64(); kib >= math.MinInt64>>10 && kib <= math.MaxInt64>>10 {
			io.IOBytes = kib << 10
		}
	}
	// fio 3 writes ns (*_ns), fio 2 µs; dividing (not multiplying by
	// 1e-3) keeps 1417216 ns at 1417.216 µs exactly.
	clat, clatDiv := dd.ClatNS, 1000.0
	if clat == nil {
		clat, clatDiv = dd.Clat, 1
	}
	lat, latDiv := dd.LatNS, 1000.0
	if lat == nil {
		lat, latDiv = dd.Lat, 1
	}
	if clat != nil {
		io.ClatMeanUS = clat.Mean.f / clatDiv
	}
	if lat != nil {
		io.LatMeanUS = lat.Mean.f / latDiv
	}
	if ps := clat.percentiles(clatDiv); len(ps) > 0 {
		io.PercentileOf, io.Percentiles = "clat", ps
	} else if ps := lat.percentiles(latDiv); len(ps) > 0 {
		io.PercentileOf, io.Percentiles = "lat", ps
	}
	for _, p := range io.Percentiles {
		us := p.US
		switch p.Pct {
		case 50:
			io.P50US = &us
		case 99:
			io.P99US = &us
		case 99.9:
			io.P999US = &us
		}
	}
	return io
}

// percentiles turns fio's map ("99.900000": value) into ascending entries
// in µs, dropping the "0.00" padding of fio 2.x and keys that are no
// percentage.
func (l *fioLatDoc) percentiles(div float64) []FioPercentile {
	if l == nil {
		return nil
	}
	var out []FioPercentile
	for k, v := range l.Percentile {
		p, err := strconv.ParseFloat(strings.TrimSpace(k), 64)
		if err != nil || !(p > 0 && p <= 100) || !v.set {
			continue
		}
		out = append(out, FioPercentile{Pct: p, US: v.f / div})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Pct != out[b].Pct {
			return out[a].Pct < out[b].Pct
		}
		return out[a].US < out[b].US
	})
	// "99.9" and "99.900000" are one percentile: keep the first.
	uniq := out[:0]
	for i, p := range out {
		if i == 0 || p.Pct != out[i-1].Pct {
			uniq = append(uniq, p)
		}
	}
	return uniq
}

func finite(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
}

// fioNum is a number as fio writes it (int or float), also accepting a
// quoted one; anything else (null, objects) reads as unset, zero.
type fioNum struct {
	set bool
	f   float64
	i   int64
	exI bool // i holds the exact integer
}

func (n *fioNum) UnmarshalJSON(b []byte) error {
	*n = fioNum{}
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, `"`) {
		if json.Unmarshal(b, &s) != nil {
			return nil
		}
		s = strings.TrimSpace(s)
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		n.set, n.f, n.i, n.exI = true, float64(i), i, true
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		n.set, n.f = true, f
	}
	return nil
}

// int64 is the value as an integer (truncated), 0 when it does not fit.
func (n fioNum) int64() int64 {
	switch {
	case n.exI:
		return n.i
	case n.set && n.f > -9e18 && n.f < 9e18:
		return int64(n.f)
	}
	return 0
}

func (n fioNum) int() int {
	if v := n.int64(); v >= math.MinInt32 && v <= math.MaxInt32 {
		return int(v)
	}
	return 0
}

// fioStr is a string, or the JSON text of a number or boolean.
type fioStr string

func (s *fioStr) UnmarshalJSON(b []byte) error {
	*s = ""
	var v string
	if json.Unmarshal(b, &v) == nil {
		*s = fioStr(v)
		return nil
	}
	if t := strings.TrimSpace(string(b)); t != "null" && !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		*s = fioStr(t)
	}
	return nil
}

// fioOptions is an options object: fio writes every value as a string;
// other scalars are kept as their JSON text, and a value that is not an
// object reads as no options.
type fioOptions map[string]string

func (o *fioOptions) UnmarshalJSON(b []byte) error {
	*o = nil
	var m map[string]fioStr
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	out := make(fioOptions, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	*o = out
	return nil
}
