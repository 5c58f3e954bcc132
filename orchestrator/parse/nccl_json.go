package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// The -J / --output_file JSON of nccl-tests (src/util.cu, JSON_FILE_VERSION
// 1 and 2), written by rank 0 with hand-rolled printf code:
//
//	{"version":2, "start_time":"...", "args":[argv...], "env":[...],
//	 "nccl_version":23007,
//	 "config":{"nthreads":1,"ngpus":1,"minimum_bytes":8,"maximum_bytes":..,
//	           "step_factor":2 | "step_bytes":N, "warmup_iters":5,
//	           "iterations":20,"aggregated_iterations":1,"validation":1,
//	           "graph":0,"blocking_collectives":"false",...,
//	           "devices":[{"rank":0,"group":0,"pid":1,"hostname":"h",
//	                       "device":0,"device_hex":"0000:04:00",
//	                       "device_info":"NVIDIA H100 80GB HBM3"}]},
//	 "results":[{"size":8,"count":2,"type":"float","redop":"sum",
//	             "root":"    -1",
//	             "out_of_place":{"time":1.0,"alg_bw":0.0,"bus_bw":0.0,
//	                             "nwrong":0.0}|null,
//	             "in_place":{...,"nwrong":null},
//	             "actual_iterations":20,"experiment_name":""}],
//	 "out_of_bounds":{"count":0,"okay":"true"},
//	 "average_bus_bandwidth":{"bandwidth":1.5,"okay":"unchecked"},
//	 "errors":[...], "end_time":"..."}
//
// Quirks handled: booleans are the strings "true"/"false"; root is a
// %6i-padded string; NaN is written as the string "nan" but Inf as a bare
// inf (invalid JSON); "cpu_time" replaces "time" with -C; a run that dies
// leaves the file cut short, without "end_time".

type ncclJSONDoc struct {
	Version     *ncclNum         `json:"version"`
	Args        []string         `json:"args"`
	NCCLVersion *ncclNum         `json:"nccl_version"`
	Config      *ncclJSONConfig  `json:"config"`
	Results     []ncclJSONResult `json:"results"`
	OutOfBounds *struct {
		Count ncclNum `json:"count"`
		Okay  ncclNum `json:"okay"`
	} `json:"out_of_bounds"`
	AvgBusBW *struct {
		Bandwidth ncclNum `json:"bandwidth"`
		Okay      ncclNum `json:"okay"`
	} `json:"average_bus_bandwidth"`
	Errors  []json.RawMessage `json:"errors"`
	EndTime *string           `json:"end_time"`
}

type ncclJSONConfig struct {
	NThreads   ncclNum `json:"nthreads"`
	NGpus      ncclNum `json:"ngpus"`
	MinBytes   ncclNum `json:"minimum_bytes"`
	MaxBytes   ncclNum `json:"maximum_bytes"`
	StepFactor ncclNum `json:"step_factor"`
	StepBytes  ncclNum `json:"step_bytes"`
	Warmup     ncclNum `json:"warmup_iters"`
	Iters      ncclNum `json:"iterations"`
	AggIters   ncclNum `json:"aggregated_iterations"`
	Validation ncclNum `json:"validation"`
	Graph      ncclNum `json:"graph"`
	Devices    []struct {
		Rank     ncclNum `json:"rank"`
		Group    ncclNum `json:"group"`
		PID      ncclNum `json:"pid"`
		Hostname string  `json:"hostname"`
		Device   ncclNum `json:"device"`
		Info     string  `json:"device_info"`
	} `json:"devices"`
}

type ncclJSONResult struct {
	Size       ncclNum       `json:"size"`
	Count      ncclNum       `json:"count"`
	Type       string        `json:"type"`
	Redop      string        `json:"redop"`
	Root       ncclNum       `json:"root"`
	OutOfPlace *ncclJSONHalf `json:"out_of_place"`
	InPlace    *ncclJSONHalf `json:"in_place"`
}

type ncclJSONHalf struct {
	Time    ncclNum `json:"time"`
	CPUTime ncclNum `json:"cpu_time"`
	AlgBW   ncclNum `json:"alg_bw"`
	BusBW   ncclNum `json:"bus_bw"`
	NWrong  ncclNum `json:"nwrong"`
}

// ncclNum accepts what nccl-tests writes where a number belongs: a number,
// a string holding one ("    -1", "nan"), "true"/"false", or null.
type ncclNum struct {
	set  bool // a finite number (or boolean) was read
	v    float64
	text string // the string form, trimmed, when it was a string
}

func (n *ncclNum) UnmarshalJSON(b []byte) error {
	*n = ncclNum{}
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		s = strings.TrimSpace(s)
		n.text = s
		switch s {
		case "true":
			n.set, n.v = true, 1
			return nil
		case "false":
			n.set = true
			return nil
		}
	}
	if v, ok := ncclFloat(s); ok {
		n.set, n.v = true, v
	}
	return nil
}

func (n ncclNum) int64() (int64, bool) {
	if !n.set || n.v < -1e18 || n.v > 1e18 || n.v != float64(int64(n.v)) {
		return 0, false
	}
	return int64(n.v), true
}

func (n ncclNum) int() int {
	v, ok := n.int64()
	if !ok || v < -1<<31 || v >= 1<<31 {
		return 0
	}
	return int(v)
}

// ncclLooksJSON: -J output is one JSON object; text output never starts
// with "{".
func ncclLooksJSON(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(normalize(text)), "{")
}

var ncclBareNonFinite = regexp.MustCompile(`([:,\[]\s*)-?(?:inf|nan)\b`)

func ncclFromJSON(text string) (NCCL, error) {
	raw := strings.TrimSpace(normalize(text))
	var doc ncclJSONDoc
	var bad error
	err := json.Unmarshal([]byte(raw), &doc)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		// printf("%lf") writes inf bare; a killed run leaves the file cut.
		raw = ncclBareNonFinite.ReplaceAllString(raw, "${1}null")
		doc = ncclJSONDoc{}
		if err = json.Unmarshal([]byte(raw), &doc); errors.As(err, &syn) {
			fixed, ok := ncclCloseTruncatedJSON(raw)
			doc = ncclJSONDoc{}
			if err = json.Unmarshal([]byte(fixed), &doc); !ok || errors.As(err, &syn) {
				return NCCL{}, fmt.Errorf("%s: %w: JSON syntax error at byte %d: %v", ncclTool, ErrNotRecognized, syn.Offset, syn)
			}
			bad = fmt.Errorf("%s: %w: JSON output is truncated (the run did not finish)", ncclTool, ErrMalformed)
		}
	}
	if !doc.isNCCL() {
		return NCCL{}, fmt.Errorf("%s: %w: JSON has none of config, results, nccl_version", ncclTool, ErrNotRecognized)
	}
	if err != nil && bad == nil {
		bad = fmt.Errorf("%s: %w: JSON field of unexpected type: %v", ncclTool, ErrMalformed, err)
	}
	return doc.toNCCL(bad)
}

// isNCCL looks for keys only nccl-tests writes; "results" or "config"
// alone are too common (dcgmi -j has them) to decide.
func (d *ncclJSONDoc) isNCCL() bool {
	if d.NCCLVersion != nil || d.AvgBusBW != nil || d.OutOfBounds != nil {
		return true
	}
	if c := d.Config; c != nil && (c.NThreads.set || c.MinBytes.set || c.Iters.set) {
		return true
	}
	for _, r := range d.Results {
		if r.OutOfPlace != nil || r.InPlace != nil {
			return true
		}
	}
	return false
}

// toNCCL maps the document onto the same NCCL value the text gives.
func (d *ncclJSONDoc) toNCCL(bad error) (NCCL, error) {
	n := NCCL{Ranks: []NCCLRank{}, Rows: []NCCLRow{}, Errors: []NCCLError{}}
	if d.NCCLVersion != nil {
		if v, ok := d.NCCLVersion.int64(); ok {
			n.NCCLVersion = ncclVersionFromCode(v)
		}
	}
	if len(d.Args) > 0 {
		if m := ncclPerfRe.FindStringSubmatch(path.Base(d.Args[0])); m != nil {
			n.Collective = m[1]
		}
	}
	d.config(&n)
	for _, r := range d.Results {
		// in_place is written last: a row without it was cut off
		// mid-way by a truncation and its numbers are incomplete.
		if r.InPlace != nil {
			n.Rows = append(n.Rows, r.row())
		}
	}
	failed := d.footer(&n)
	for _, e := range d.Errors {
		var s string
		if json.Unmarshal(e, &s) == nil && strings.TrimSpace(s) != "" {
			n.Errors = append(n.Errors, NCCLError{Message: strings.TrimSpace(s)})
		}
	}
	if bad == nil && d.OutOfBounds == nil {
		bad = fmt.Errorf("%s: %w: JSON has no out_of_bounds summary (run did not finish)", ncclTool, ErrMalformed)
	}
	ncclFinish(&n, bad == nil && !failed, true)
	if len(n.Errors) > 0 {
		return n, ncclToolFailed(n.Errors)
	}
	return n, bad
}

// config fills Params (under the text header's names) and Ranks.
func (d *ncclJSONDoc) config(n *NCCL) {
	c := d.Config
	if c == nil {
		return
	}
	n.Params = map[string]string{}
	for key, v := range map[string]ncclNum{
		"nThread": c.NThreads, "nGpus": c.NGpus, "minBytes": c.MinBytes, "maxBytes": c.MaxBytes,
		"warmup iters": c.Warmup, "iters": c.Iters, "agg iters": c.AggIters,
		"validation": c.Validation, "graph": c.Graph,
	} {
		if i, ok := v.int64(); ok {
			n.Params[key] = strconv.FormatInt(i, 10)
		}
	}
	if i, ok := c.StepFactor.int64(); ok {
		n.Params["step"] = fmt.Sprintf("%d(factor)", i)
	} else if i, ok := c.StepBytes.int64(); ok {
		n.Params["step"] = fmt.Sprintf("%d(bytes)", i)
	}
	for _, dev := range c.Devices {
		n.Ranks = append(n.Ranks, NCCLRank{Rank: dev.Rank.int(), Host: dev.Hostname, Device: dev.Device.int(),
			Name: strings.TrimSpace(dev.Info), PID: dev.PID.int(), Group: dev.Group.int()})
	}
}

// footer fills the summary and reports whether it says the run failed.
func (d *ncclJSONDoc) footer(n *NCCL) bool {
	failed := false
	if o := d.OutOfBounds; o != nil {
		n.OutOfBounds = o.Count.int()
		failed = o.Okay.set && o.Okay.v == 0
	}
	if a := d.AvgBusBW; a != nil {
		n.AvgBusBW = a.Bandwidth.v
		failed = failed || (a.Okay.text == "false") // "unchecked" without -c
	}
	return failed
}

func (r ncclJSONResult) row() NCCLRow {
	size, _ := r.Size.int64()
	count, _ := r.Count.int64()
	row := NCCLRow{Size: size, Count: count, Type: r.Type, Redop: strings.TrimSpace(r.Redop)}
	if r.Root.set {
		root := r.Root.int()
		row.Root = &root
	}
	row.OOP, row.IP = r.OutOfPlace.result(), r.InPlace.result()
	return row
}

// result maps one half; nwrong null means the check was not run (N/A).
func (h *ncclJSONHalf) result() NCCLResult {
	if h == nil {
		return NCCLResult{}
	}
	res := NCCLResult{TimeUS: h.Time.v, AlgBW: h.AlgBW.v, BusBW: h.BusBW.v}
	if !h.Time.set && h.CPUTime.set {
		res.TimeUS = h.CPUTime.v
	}
	if w, ok := h.NWrong.int64(); ok && h.NWrong.text == "" {
		res.Wrong = &w
	}
	return res
}

// ncclCloseTruncatedJSON turns a JSON text cut short into a valid one by
// keeping everything up to the last complete element and closing the
// containers still open there.
func ncclCloseTruncatedJSON(s string) (string, bool) {
	cut := ncclLastCompleteCut(s)
	if cut <= 0 {
		return "", false
	}
	stack := ncclOpenContainers(s[:cut])
	var b strings.Builder
	b.WriteString(strings.TrimRight(s[:cut], " \t\n,"))
	for i := len(stack) - 1; i >= 0; i-- {
		b.WriteByte(stack[i])
	}
	return b.String(), true
}

// ncclLastCompleteCut is the offset after the last complete element: just
// after a closing bracket or just before a separating comma, outside
// strings.
func ncclLastCompleteCut(s string) int {
	cut, inStr, esc := -1, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			inStr, esc = ncclStringStep(c, esc)
		case c == '"':
			inStr = true
		case c == '}' || c == ']':
			cut = i + 1
		case c == ',':
			cut = i
		}
	}
	return cut
}

// ncclOpenContainers lists the closers of the containers open at the end
// of s, outermost first.
func ncclOpenContainers(s string) []byte {
	var stack []byte
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			inStr, esc = ncclStringStep(c, esc)
		case c == '"':
			inStr = true
		case c == '{':
			stack = append(stack, '}')
		case c == '[':
			stack = append(stack, ']')
		case (c == '}' || c == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	return stack
}

// ncclStringStep advances the in-string state by one byte.
func ncclStringStep(c byte, esc bool) (inStr, escNext bool) {
	switch {
	case esc:
		return true, false
	case c == '\\':
		return true, true
	case c == '"':
		return false, false
	}
	return true, false
}
