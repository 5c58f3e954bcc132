package standins

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// jsonReport writes nccl-tests' -J report (JSON file version 1) the way nccl-tests does, by hand and in the
// same order as nccl_perf.c: compact, booleans as the strings "true"/"false", root as a %6i string, doubles as
// %lf. A nil *jsonReport (no -J, or not a .json path) writes nothing.
type jsonReport struct {
	f     *os.File
	b     *bufio.Writer
	stack []jsonState
}

type jsonState int

const (
	jsonKeyed jsonState = iota
	jsonObjEmpty
	jsonObjSome
	jsonListEmpty
	jsonListSome
)

const jsonTimeFormat = "2006-01-02 15:04:05"

// openJSON creates the report file as nccl-tests does: only a .json path (any case), created exclusively,
// trying PATH.0, PATH.1, ... when it exists; "# Writing JSON output to" (or why not) goes to out.
func openJSON(p, argv0 string, args []string, env environ, out io.Writer) *jsonReport {
	if p == "" {
		return nil
	}
	dot := strings.LastIndexByte(p, '.')
	if dot < 0 || strings.Contains(p[dot:], "/") || !strings.EqualFold(p[dot:], ".json") {
		return nil
	}
	try := p
	var f *os.File
	for n := 0; ; n++ {
		var err error
		f, err = os.OpenFile(try, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			fmt.Fprintf(out, "# skipping json output; %s not accessible\n", try)
			return nil
		}
		try = fmt.Sprintf("%s.%d", p, n)
	}
	fmt.Fprintf(out, "# Writing JSON output to %s\n", try)
	j := &jsonReport{f: f, b: bufio.NewWriter(f)}
	j.startObject()
	j.key("version")
	j.int(1)
	j.key("start_time")
	j.str(time.Now().Format(jsonTimeFormat))
	j.key("args")
	j.startList()
	for _, a := range append([]string{argv0}, args...) {
		j.str(a)
	}
	j.endList()
	j.key("env")
	j.startList()
	for _, e := range env {
		j.str(e)
	}
	j.endList()
	j.key("nccl_version")
	j.int(0) // no NCCL here
	return j
}

func (j *jsonReport) config(o perfOpts) {
	if j == nil {
		return
	}
	j.key("config")
	j.startObject()
	for _, kv := range []struct {
		k string
		v int64
	}{{"nthreads", o.nThreads}, {"ngpus", o.nGpus}, {"minimum_bytes", o.minBytes}, {"maximum_bytes", o.maxBytes}} {
		j.key(kv.k)
		j.int(kv.v)
	}
	if o.stepFactor > 1 {
		j.key("step_factor")
		j.int(o.stepFactor)
	} else {
		j.key("step_bytes")
		j.int(o.stepBytes)
	}
	for _, kv := range []struct {
		k string
		v int64
	}{{"warmup_iters", o.warmup}, {"iterations", o.iters}, {"aggregated_iterations", o.agg}, {"validation", o.datacheck}, {"graph", o.graph}} {
		j.key(kv.k)
		j.int(kv.v)
	}
	j.key("blocking_collectives")
	j.bool(o.blocking != 0)
	j.key("parallel_init")
	j.bool(o.parallelInit != 0)
}

// devices lists the ranks and closes "config".
func (j *jsonReport) devices(ranks []modelRank) {
	if j == nil {
		return
	}
	j.key("devices")
	j.startList()
	for r, rk := range ranks {
		j.startObject()
		j.key("rank")
		j.int(int64(r))
		j.key("group")
		j.int(0)
		j.key("pid")
		j.int(int64(rk.pid))
		j.key("hostname")
		j.str(rk.host)
		j.key("device")
		j.int(rk.device)
		j.key("device_hex")
		j.str("0000:00:00")
		j.key("device_info")
		j.str(ModelDeviceName)
		j.endObject()
	}
	j.endList()
	j.endObject()
}

func (j *jsonReport) startResults() {
	if j == nil {
		return
	}
	j.key("results")
	j.startList()
}

func (j *jsonReport) rowStart(size, count int64, typ, op string) {
	if j == nil {
		return
	}
	j.startObject()
	j.key("size")
	j.int(size)
	j.key("count")
	j.int(count)
	j.key("type")
	j.str(typ)
	j.key("redop")
	j.str(op)
	j.key("root")
	j.str(fmt.Sprintf("%6d", -1))
}

func (j *jsonReport) rowHalf(outOfPlace, cputime bool, timeUsec, algBW, busBW float64, checked bool) {
	if j == nil {
		return
	}
	j.key(map[bool]string{true: "out_of_place", false: "in_place"}[outOfPlace])
	j.startObject()
	j.key(map[bool]string{true: "cpu_time", false: "time"}[cputime])
	j.double(timeUsec)
	j.key("alg_bw")
	j.double(algBW)
	j.key("bus_bw")
	j.double(busBW)
	j.key("nwrong")
	if checked {
		j.double(0)
	} else {
		j.null()
	}
	j.endObject()
}

func (j *jsonReport) rowEnd(iters int64) {
	if j == nil {
		return
	}
	j.key("actual_iterations")
	j.int(iters)
	j.key("experiment_name")
	j.str("")
	j.endObject()
}

func (j *jsonReport) endResults() {
	if j == nil {
		return
	}
	j.endList()
}

func (j *jsonReport) footer(bw, minBW float64, failed bool) {
	if j == nil {
		return
	}
	j.key("out_of_bounds")
	j.startObject()
	j.key("count")
	j.int(0)
	j.key("okay")
	j.bool(true)
	j.endObject()
	j.key("average_bus_bandwidth")
	j.startObject()
	j.key("bandwidth")
	j.double(bw)
	j.key("okay")
	if minBW == -1 {
		j.str("unchecked")
	} else {
		j.bool(!failed)
	}
	j.endObject()
}

// finish writes the (empty) errors, the end time, and closes the file.
func (j *jsonReport) finish() {
	if j == nil {
		return
	}
	j.key("errors")
	j.startList()
	j.str("")
	j.endList()
	j.close()
}

// abort closes "config" and the report, as nccl-tests does when a rank cannot start.
func (j *jsonReport) abort() {
	if j == nil {
		return
	}
	j.endObject()
	j.close()
}

func (j *jsonReport) close() {
	j.key("end_time")
	j.str(time.Now().Format(jsonTimeFormat))
	j.endObject()
	j.b.WriteByte('\n')
	j.b.Flush()
	j.f.Close()
}

// The writer: nccl-tests' jsonKey/jsonStartObject/... state machine.

func (j *jsonReport) value() {
	if len(j.stack) == 0 {
		return
	}
	switch top := &j.stack[len(j.stack)-1]; *top {
	case jsonListEmpty:
		*top = jsonListSome
	case jsonListSome:
		j.b.WriteByte(',')
	case jsonKeyed:
		j.stack = j.stack[:len(j.stack)-1]
	}
}

func (j *jsonReport) key(k string) {
	top := &j.stack[len(j.stack)-1]
	if *top == jsonObjEmpty {
		*top = jsonObjSome
	} else {
		j.b.WriteByte(',')
	}
	j.sanitized(k)
	j.b.WriteByte(':')
	j.stack = append(j.stack, jsonKeyed)
}

func (j *jsonReport) startObject() {
	j.value()
	j.b.WriteByte('{')
	j.stack = append(j.stack, jsonObjEmpty)
}

func (j *jsonReport) endObject() {
	j.stack = j.stack[:len(j.stack)-1]
	j.b.WriteByte('}')
}

func (j *jsonReport) startList() {
	j.value()
	j.b.WriteByte('[')
	j.stack = append(j.stack, jsonListEmpty)
}

func (j *jsonReport) endList() {
	j.stack = j.stack[:len(j.stack)-1]
	j.b.WriteByte(']')
}

func (j *jsonReport) null() {
	j.value()
	j.b.WriteString("null")
}

func (j *jsonReport) str(s string) {
	j.value()
	j.sanitized(s)
}

func (j *jsonReport) bool(b bool) { j.str(strconv.FormatBool(b)) } // nccl-tests writes booleans as strings

func (j *jsonReport) int(v int64) {
	j.value()
	j.b.WriteString(strconv.FormatInt(v, 10))
}

func (j *jsonReport) double(v float64) {
	j.value()
	if v != v {
		j.b.WriteString(`"nan"`)
		return
	}
	j.b.WriteString(strconv.FormatFloat(v, 'f', 6, 64))
}

// sanitized is nccl-tests' jsonSanitized: ", \ and / escaped, newline and tab as \n and \t, and the string cut at
// the first other control character or non-ASCII byte.
func (j *jsonReport) sanitized(s string) {
	j.b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '/':
			j.b.WriteByte('\\')
			j.b.WriteByte(c)
		case c == '\n':
			j.b.WriteString(`\n`)
		case c == '\t':
			j.b.WriteString(`\t`)
		case c >= 0x7f || c <= 0x1f:
			i = len(s)
		default:
			j.b.WriteByte(c)
		}
	}
	j.b.WriteByte('"')
}
