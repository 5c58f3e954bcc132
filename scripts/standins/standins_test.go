package standins

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// run calls Main and returns what it wrote and its status.
func run(t *testing.T, profile, tool string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(profile, tool, args, &o, &e)
	return o.String(), e.String(), code
}

func mustProfile(t *testing.T, name string) *profile {
	t.Helper()
	p, err := lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// qFacts reads a -q sample with plain regexps, independently of parseSMILog: the attached-GPU count, and the
// product names, UUIDs and bus ids in file order.
type qFacts struct {
	attached           int
	names, uuids, buss []string
	driver             string
}

var (
	reAttached = regexp.MustCompile(`(?m)^Attached GPUs\s+: (\d+)$`)
	reDriver   = regexp.MustCompile(`(?m)^Driver Version\s+: (\S+)$`)
	reName     = regexp.MustCompile(`(?m)^    Product Name\s+: (.+)$`)
	reUUID     = regexp.MustCompile(`(?m)^    GPU UUID\s+: (\S+)$`)
	reBus      = regexp.MustCompile(`(?m)^GPU ([0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F])$`)
)

func factsOf(t *testing.T, b []byte) qFacts {
	t.Helper()
	s := string(b)
	var f qFacts
	m := reAttached.FindStringSubmatch(s)
	if m == nil {
		t.Fatal("no Attached GPUs line")
	}
	f.attached, _ = strconv.Atoi(m[1])
	f.driver = reDriver.FindStringSubmatch(s)[1]
	for _, m := range reName.FindAllStringSubmatch(s, -1) {
		f.names = append(f.names, m[1])
	}
	for _, m := range reUUID.FindAllStringSubmatch(s, -1) {
		f.uuids = append(f.uuids, m[1])
	}
	for _, m := range reBus.FindAllStringSubmatch(s, -1) {
		f.buss = append(f.buss, m[1])
	}
	if len(f.names) != f.attached || len(f.uuids) != f.attached || len(f.buss) != f.attached {
		t.Fatalf("sample: %d attached, %d names, %d uuids, %d bus ids", f.attached, len(f.names), len(f.uuids), len(f.buss))
	}
	return f
}

func profilesWith(tool string) []string {
	var names []string
	for _, p := range profiles {
		if p.has(tool) {
			names = append(names, p.name)
		}
	}
	return names
}

func wantNotSimulated(t *testing.T, what, stdout, stderr string, code int) {
	t.Helper()
	if code != ExitNotSimulated || stdout != "" || !strings.Contains(stderr, "is not simulated") ||
		!strings.Contains(stderr, "gpuaccept stand-in (simulated node, profile ") {
		t.Errorf("%s: want the not-simulated answer, got code %d stdout %q stderr %q", what, code, stdout, stderr)
	}
}

func TestProfiles(t *testing.T) {
	names := Profiles()
	if names[0] != "h100" {
		t.Errorf("first profile %q, want h100", names[0])
	}
	for _, want := range []string{"h100", "h100-other-driver", "h100-diag-fail", "h100-ib-down"} {
		if !slices.Contains(names, want) {
			t.Errorf("profile %q missing", want)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("profile %q twice", n)
		}
		seen[n] = true
		p := mustProfile(t, n)
		for _, s := range []string{p.smiQuery, p.smiTopo, p.smiCSV, p.dcgmDiscovery, p.dcgmDiag, p.ibstat, p.ibvDevinfo} {
			if s != "" {
				sample(s) // panics when missing
			}
		}
		if about, err := About(n); err != nil || about == "" {
			t.Errorf("About(%q) = %q, %v", n, about, err)
		}
	}
	tools, err := Tools("h100")
	if err != nil || !slices.Equal(tools, []string{NvidiaSMI, DCGMI, IBStat}) {
		t.Errorf("Tools(h100) = %v, %v; want nvidia-smi, dcgmi, ibstat (no ibv_devinfo)", tools, err)
	}
	if _, err := Tools("nope"); err == nil {
		t.Error("Tools(nope): no error")
	}
	if _, err := About("nope"); err == nil {
		t.Error("About(nope): no error")
	}
	// The brief's four profiles differ from h100 in exactly what they say.
	base := mustProfile(t, "h100")
	for name, want := range map[string]func(p profile) profile{
		"h100-other-driver": func(p profile) profile {
			p.smiQuery, p.smiTopo, p.smiCSV = qH100Other, topoH100One, csvH100Othr
			return p
		},
		"h100-diag-fail": func(p profile) profile { p.dcgmDiag = diagFail; return p },
		"h100-ib-down":   func(p profile) profile { p.ibstat = ibstatH100Down; return p },
	} {
		got := *mustProfile(t, name)
		w := want(*base)
		w.name, w.about = got.name, got.about
		if got != w {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
}

// The embedded samples are the shared ones, unmodified, and SOURCES.md names each.
func TestSamplesAreCopies(t *testing.T) {
	sources, err := samples.ReadFile("samples/SOURCES.md")
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join("..", "..", "..", "shared", "samples")
	_, serr := os.Stat(shared)
	n := 0
	err = fs.WalkDir(samples, "samples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "SOURCES.md" {
			return err
		}
		n++
		rel := strings.TrimPrefix(path, "samples/")
		if !bytes.Contains(sources, []byte("### `"+rel+"`")) {
			t.Errorf("SOURCES.md has no entry for %s", rel)
		}
		if serr != nil {
			return nil
		}
		orig, err := os.ReadFile(filepath.Join(shared, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if got, _ := samples.ReadFile(path); !bytes.Equal(got, orig) {
			t.Errorf("%s differs from shared/samples/%s", rel, rel)
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("walk: %v, %d files", err, n)
	}
	if serr != nil {
		t.Logf("shared samples not here (%v): checked SOURCES.md only", serr)
	}
}

// reListLine is nvidia-smi -L's GPU line; TestListRegexMatchesGenuine holds it against real -L outputs.
var reListLine = regexp.MustCompile(`^GPU (\d+): (\S.*\S) \(UUID: (GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\)$`)

func TestListRegexMatchesGenuine(t *testing.T) {
	for _, name := range []string{
		"nvidia-smi/pkb-L-4xP100.txt", "nvidia-smi/pkb-L-heterogeneous-K80-P100.txt",
		"nvidia-smi/exporter-L-h100-mig-590.48.01.txt", "nvidia-smi/deepops-L-2xA100-MIG-head10.txt",
	} {
		gpus := 0
		for line := range strings.Lines(string(sample(name))) {
			line = strings.TrimSuffix(line, "\n")
			if strings.HasPrefix(line, "  MIG ") {
				continue // MIG device lines; the stand-ins' nodes have MIG disabled
			}
			m := reListLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s: genuine -L line %q does not match the -L pattern", name, line)
				continue
			}
			if m[1] != strconv.Itoa(gpus) {
				t.Errorf("%s: GPU index %s, want %d", name, m[1], gpus)
			}
			gpus++
		}
		if gpus == 0 {
			t.Errorf("%s: no GPU lines", name)
		}
	}
}

func TestNvidiaSMIList(t *testing.T) {
	for _, name := range profilesWith(NvidiaSMI) {
		p := mustProfile(t, name)
		f := factsOf(t, sample(p.smiQuery))
		for _, flag := range []string{"-L", "--list-gpus"} {
			out, errOut, code := run(t, name, NvidiaSMI, flag)
			if code != 0 || errOut != "" {
				t.Fatalf("%s %s: code %d stderr %q", name, flag, code, errOut)
			}
			if !strings.HasSuffix(out, ")\n") {
				t.Errorf("%s %s: output does not end in a newline: %q", name, flag, out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != f.attached {
				t.Fatalf("%s %s: %d lines, -q has %d GPUs", name, flag, len(lines), f.attached)
			}
			for i, line := range lines {
				m := reListLine.FindStringSubmatch(line)
				if m == nil {
					t.Fatalf("%s %s: line %q is not nvidia-smi -L format", name, flag, line)
				}
				if m[1] != strconv.Itoa(i) || m[2] != f.names[i] || m[3] != f.uuids[i] {
					t.Errorf("%s %s: line %d = %q, want GPU %d %q %q", name, flag, i, line, i, f.names[i], f.uuids[i])
				}
			}
		}
	}
}

func TestNvidiaSMIVerbatim(t *testing.T) {
	for _, name := range profilesWith(NvidiaSMI) {
		p := mustProfile(t, name)
		for _, args := range [][]string{{"-q"}, {"--query"}} {
			out, errOut, code := run(t, name, NvidiaSMI, args...)
			if code != 0 || errOut != "" || out != string(p.queryText()) {
				t.Errorf("%s %v: code %d stderr %q, output equal to %s: %v", name, args, code, errOut, p.smiQuery, out == string(p.queryText()))
			}
		}
		for _, args := range [][]string{{"topo", "-m"}, {"topo", "--matrix"}} {
			out, errOut, code := run(t, name, NvidiaSMI, args...)
			if p.smiTopo == "" {
				wantNotSimulated(t, name+" topo", out, errOut, code)
				continue
			}
			if code != 0 || errOut != "" || out != string(sample(p.smiTopo)) {
				t.Errorf("%s %v: code %d stderr %q, verbatim %v", name, args, code, errOut, out == string(sample(p.smiTopo)))
			}
		}
	}
}

// The fields the brief asks for, and the shape each csv cell must have (with units).
var requiredFields = []struct{ name, header, value, nounits string }{
	{"index", "index", `\d+`, `\d+`},
	{"name", "name", `NVIDIA \S.*\S`, `NVIDIA \S.*\S`},
	{"uuid", "uuid", `GPU-[0-9a-f-]{36}`, `GPU-[0-9a-f-]{36}`},
	{"serial", "serial", `\d{13}`, `\d{13}`},
	{"pci.bus_id", "pci.bus_id", `[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]`, `[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]`},
	{"memory.total", "memory.total [MiB]", `\d+ MiB`, `\d+`},
	{"memory.used", "memory.used [MiB]", `\d+ MiB`, `\d+`},
	{"memory.free", "memory.free [MiB]", `\d+ MiB`, `\d+`},
	{"driver_version", "driver_version", `\d+\.\d+\.\d+`, `\d+\.\d+\.\d+`},
	{"vbios_version", "vbios_version", `[0-9A-F]{2}(\.[0-9A-F]{2}){4}`, `[0-9A-F]{2}(\.[0-9A-F]{2}){4}`},
	{"pstate", "pstate", `P\d+`, `P\d+`},
	{"temperature.gpu", "temperature.gpu", `\d+`, `\d+`},
	{"power.limit", "power.limit [W]", `\d+\.\d{2} W`, `\d+\.\d{2}`},
	{"power.max_limit", "power.max_limit [W]", `\d+\.\d{2} W`, `\d+\.\d{2}`}, // preflight's, for GPU-004
	{"persistence_mode", "persistence_mode", `Enabled|Disabled`, `Enabled|Disabled`},
	{"compute_mode", "compute_mode", `Default|Exclusive_Process|Prohibited`, `Default|Exclusive_Process|Prohibited`},
	{"ecc.mode.current", "ecc.mode.current", `Enabled|Disabled|\[N/A\]`, `Enabled|Disabled|\[N/A\]`},
	{"mig.mode.current", "mig.mode.current", `Enabled|Disabled|\[N/A\]`, `Enabled|Disabled|\[N/A\]`},
	{"pcie.link.gen.max", "pcie.link.gen.max", `\d`, `\d`},
	{"pcie.link.width.max", "pcie.link.width.max", `\d+`, `\d+`},
	{"clocks.max.sm", "clocks.max.sm [MHz]", `\d+ MHz`, `\d+`},
}

func TestNvidiaSMIQueryGPU(t *testing.T) {
	var names, heads []string
	for _, f := range requiredFields {
		names, heads = append(names, f.name), append(heads, f.header)
	}
	query := strings.Join(names, ",")
	for _, name := range profilesWith(NvidiaSMI) {
		p := mustProfile(t, name)
		f := factsOf(t, sample(p.smiQuery))
		for _, tc := range []struct {
			args            []string
			header, nounits bool
		}{
			{[]string{"--query-gpu=" + query, "--format=csv"}, true, false},
			{[]string{"--query-gpu", query, "--format", "csv"}, true, false},
			{[]string{"--format=csv,noheader", "--query-gpu=" + query}, false, false},
			{[]string{"--query-gpu=" + query, "--format=csv,nounits"}, true, true},
			{[]string{"--query-gpu=" + query, "--format=csv,nounits,noheader"}, false, true},
			{[]string{"--query-gpu=" + query, "--format=csv,noheader,nounits"}, false, true},
		} {
			out, errOut, code := run(t, name, NvidiaSMI, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("%s %v: code %d stderr %q", name, tc.args, code, errOut)
			}
			if !strings.HasSuffix(out, "\n") {
				t.Errorf("%s %v: no final newline", name, tc.args)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if tc.header {
				if lines[0] != strings.Join(heads, ", ") {
					t.Errorf("%s %v: header\n %q\nwant\n %q", name, tc.args, lines[0], strings.Join(heads, ", "))
				}
				lines = lines[1:]
			}
			if len(lines) != f.attached {
				t.Fatalf("%s %v: %d rows for %d GPUs", name, tc.args, len(lines), f.attached)
			}
			for i, line := range lines {
				cells := strings.Split(line, ", ")
				if len(cells) != len(requiredFields) {
					t.Fatalf("%s %v: row %d has %d cells, want %d: %q", name, tc.args, i, len(cells), len(requiredFields), line)
				}
				for j, rf := range requiredFields {
					pat := rf.value
					if tc.nounits {
						pat = rf.nounits
					}
					if !regexp.MustCompile(`^(` + pat + `)$`).MatchString(cells[j]) {
						t.Errorf("%s %v: GPU %d %s = %q, want /%s/", name, tc.args, i, rf.name, cells[j], pat)
					}
				}
				want := map[int]string{0: strconv.Itoa(i), 1: f.names[i], 2: f.uuids[i], 4: f.buss[i], 8: f.driver}
				for j, w := range want {
					if cells[j] != w {
						t.Errorf("%s %v: GPU %d %s = %q, -q says %q", name, tc.args, i, requiredFields[j].name, cells[j], w)
					}
				}
			}
		}
	}
}

// Every header the stand-in derives is spelled as the genuine 590.48.01 capture spells it.
func TestQueryGPUHeadersMatchGenuine(t *testing.T) {
	g, err := parseCSVSample(sample(csvH100Othr))
	if err != nil {
		t.Fatal(err)
	}
	heads := strings.Split(strings.SplitN(string(sample(csvH100Othr)), "\n", 2)[0], ", ")
	checked := 0
	for _, qf := range qFields {
		if j := slices.Index(g.names, qf.name); j >= 0 {
			checked++
			if qf.header() != heads[j] {
				t.Errorf("header %q, genuine %q", qf.header(), heads[j])
			}
		}
	}
	if checked < len(qFields)-2 {
		t.Errorf("only %d of %d derived fields are in the genuine capture", checked, len(qFields))
	}
}

// The -q -> csv derivation reproduces the genuine csv of the same GPU captured at the same moment, cell for cell.
func TestQueryGPUDerivationMatchesGenuine(t *testing.T) {
	l, err := parseSMILog(sample(qH100Other))
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseCSVSample(sample(csvH100Othr))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.rows) != len(l.gpus) {
		t.Fatalf("%d csv rows, %d -q GPUs", len(g.rows), len(l.gpus))
	}
	for _, qf := range qFields {
		j := slices.Index(g.names, qf.name)
		if j < 0 {
			continue
		}
		got, ok := qf.value(l, 0)
		if !ok || got != g.rows[0][j] {
			t.Errorf("%s: derived %q (found %v), genuine %q", qf.name, got, ok, g.rows[0][j])
		}
	}
	// And for the other -q samples every derived field is present in the -q text.
	for _, q := range []string{qH100, qA10} {
		l, err := parseSMILog(sample(q))
		if err != nil {
			t.Fatal(err)
		}
		for _, qf := range qFields {
			for i := range l.gpus {
				if _, ok := qf.value(l, i); !ok {
					t.Errorf("%s: GPU %d has no %s", q, i, qf.name)
				}
			}
		}
	}
}

// Rows look like the genuine PerfKitBenchmarker capture of --query-gpu=index,power.draw,timestamp.
func TestQueryGPULikePKB(t *testing.T) {
	pkb := strings.Split(strings.TrimSuffix(string(sample("nvidia-smi/pkb-query-gpu-index-powerdraw-timestamp-csv.txt")), "\n"), "\n")
	row := regexp.MustCompile(`^\d+, \d+\.\d{2} W(, |$)`)
	for _, l := range pkb[1:] {
		if !row.MatchString(l) {
			t.Fatalf("the pattern does not fit genuine row %q", l)
		}
	}
	for _, name := range profilesWith(NvidiaSMI) {
		out, _, code := run(t, name, NvidiaSMI, "--query-gpu=index,power.draw", "--format=csv")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != 0 || !strings.HasPrefix(pkb[0], lines[0]+", ") {
			t.Fatalf("%s: code %d header %q, genuine %q", name, code, lines[0], pkb[0])
		}
		for _, l := range lines[1:] {
			if !row.MatchString(l) {
				t.Errorf("%s: row %q unlike genuine %q", name, l, pkb[1])
			}
		}
	}
}

func TestQueryGPUGenuineCSVProfile(t *testing.T) {
	g, _ := parseCSVSample(sample(csvH100Othr))
	// All ~210 captured fields at once reproduce the capture's two lines exactly.
	out, errOut, code := run(t, "h100-other-driver", NvidiaSMI, "--query-gpu="+strings.Join(g.names, ","), "--format=csv")
	if code != 0 || errOut != "" || out != string(sample(csvH100Othr)) {
		t.Errorf("all captured fields: code %d stderr %q, equal to the capture: %v", code, errOut, out == string(sample(csvH100Othr)))
	}
	out, _, _ = run(t, "h100-other-driver", NvidiaSMI, "--query-gpu=memory.total,fan.speed,edpp_multiplier,compute_cap,timestamp", "--format=csv,nounits,noheader")
	if want := "81559, [N/A], 100.00, 9.0, 2026/07/14 08:12:38.696\n"; out != want {
		t.Errorf("nounits row %q, want %q", out, want)
	}
}

func TestNvidiaSMIErrors(t *testing.T) {
	for _, name := range profilesWith(NvidiaSMI) {
		for _, tc := range []struct{ args []string }{
			{[]string{"--query-gpu=bogus", "--format=csv"}},
			{[]string{"--query-gpu=index,bogus,name", "--format=csv"}},
			{[]string{"--query-gpu=cuda_version", "--format=csv,noheader"}}, // genuine capture: invalid
			{[]string{"--query-gpu=index, name", "--format=csv"}},
		} {
			field := strings.Split(strings.TrimPrefix(tc.args[0], "--query-gpu="), ",")
			bad := field[len(field)-1]
			for _, f := range field {
				if !slices.Contains(realFieldNames(), f) {
					bad = f
					break
				}
			}
			out, errOut, code := run(t, name, NvidiaSMI, tc.args...)
			if want := `Field "` + bad + `" is not a valid field to query.` + "\n\n"; out != want || errOut != "" || code != 2 {
				t.Errorf("%s %v: code %d stdout %q stderr %q, want code 2 stdout %q", name, tc.args, code, out, errOut, want)
			}
		}
		for _, opt := range []string{"--bogus", "-format=csv", "-lms100", "-Q"} {
			out, errOut, code := run(t, name, NvidiaSMI, "-L", opt)
			want := "ERROR: Option " + opt + " is not recognized. Please run 'nvidia-smi -h' for help.\n\n"
			if out != want || errOut != "" || code != 2 {
				t.Errorf("%s -L %s: code %d stdout %q stderr %q, want %q", name, opt, code, out, errOut, want)
			}
		}
		for _, args := range [][]string{
			nil, {"-h"}, {"-L", "-q"}, {"-i", "0", "-q"}, {"--query-gpu=index"}, {"--format=csv"},
			{"--query-gpu=index", "--format=xml"}, {"--query-gpu=index", "--format=noheader"}, {"--query-gpu=", "--format=csv"},
			{"--query-gpu=gpu_name", "--format=csv"}, {"topo"}, {"topo", "-p2p", "r"}, {"nvlink", "-s"}, {"--query-gpu"},
		} {
			out, errOut, code := run(t, name, NvidiaSMI, args...)
			wantNotSimulated(t, name+" "+strings.Join(args, " "), out, errOut, code)
		}
	}
	// A real field that the 535 -q text cannot give (only the 590 capture has it).
	out, errOut, code := run(t, "h100", NvidiaSMI, "--query-gpu=index,compute_cap", "--format=csv")
	wantNotSimulated(t, "h100 compute_cap", out, errOut, code)
}

func TestDCGMI(t *testing.T) {
	for _, name := range profilesWith(DCGMI) {
		p := mustProfile(t, name)
		for _, args := range [][]string{{"discovery", "-l"}, {"discovery", "--list"}} {
			out, errOut, code := run(t, name, DCGMI, args...)
			if p.dcgmDiscovery == "" {
				wantNotSimulated(t, name+" discovery", out, errOut, code)
				continue
			}
			if code != 0 || errOut != "" || out != string(sample(p.dcgmDiscovery)) {
				t.Errorf("%s %v: code %d stderr %q verbatim %v", name, args, code, errOut, out == string(sample(p.dcgmDiscovery)))
			}
		}
		wantCode := 0
		if name == "h100-diag-fail" {
			wantCode = 226
		}
		for _, args := range [][]string{
			{"diag", "-r", "1"}, {"diag", "-r", "2"}, {"diag", "-r", "3"}, {"diag", "-r", "4"},
			{"diag", "-r", "2", "-j"}, {"diag", "-j", "-r", "3"}, {"diag", "--run", "1", "--json"},
			{"diag", "-r", "long"}, {"diag", "-r", "2", "-p", "pcie.gpu_nvlinks_expected_up=12"}, {"diag", "-r", "2", "-i", "0"},
		} {
			out, errOut, code := run(t, name, DCGMI, args...)
			if code != wantCode || errOut != "" || out != string(sample(p.dcgmDiag)) {
				t.Errorf("%s %v: code %d (want %d) stderr %q verbatim %v", name, args, code, wantCode, errOut, out == string(sample(p.dcgmDiag)))
			}
		}
		for _, args := range [][]string{
			nil, {"-v"}, {"diag"}, {"diag", "-r"}, {"diag", "-r", "9"}, {"diag", "-r", "0"}, {"diag", "-r", "1", "--bogus"},
			{"discovery"}, {"discovery", "-c"}, {"discovery", "-l", "-v"}, {"health", "-c"}, {"nvlink", "-s"},
		} {
			out, errOut, code := run(t, name, DCGMI, args...)
			wantNotSimulated(t, name+" dcgmi "+strings.Join(args, " "), out, errOut, code)
		}
		out, errOut, code := run(t, name, DCGMI, "bogus", "-l")
		if code != 255 || errOut != "" || !strings.HasPrefix(out, "ERROR: Invalid subsystem.\n\n") || !strings.HasSuffix(out, "Usage: dcgmi\n") {
			t.Errorf("%s dcgmi bogus: code %d stdout %q stderr %q", name, code, out, errOut)
		}
	}
	out, errOut, code := run(t, "h100-no-dcgm", DCGMI, "diag", "-r", "1")
	if code != 127 || out != "" || errOut != "bash: dcgmi: command not found\n" {
		t.Errorf("h100-no-dcgm: code %d stdout %q stderr %q", code, out, errOut)
	}
}

func TestDiagFailed(t *testing.T) {
	for name, want := range map[string]bool{
		diagPass: false, diagFail: true, diagDCGM4: false,
		"dcgmi/discovery-l-8x-h800.txt": false,
	} {
		if got := diagFailed(sample(name)); got != want {
			t.Errorf("diagFailed(%s) = %v, want %v", name, got, want)
		}
	}
	for table, want := range map[string]bool{
		"| GPU Memory                | Fail - GPU 3                                   |\n": true,
		"|                           | GPU0: Fail                                     |\n": true,
		"| Persistence Mode          | Warn                                           |\n": false,
		"| Failure Count             | 0                                              |\n": false,
	} {
		if got := diagFailed([]byte(table)); got != want {
			t.Errorf("diagFailed(%q) = %v, want %v", table, got, want)
		}
	}
}

func TestDiagWait(t *testing.T) {
	t.Setenv(DiagSecondsEnv, "0.2")
	start := time.Now()
	if _, _, code := run(t, "h100", DCGMI, "diag", "-r", "1"); code != 0 {
		t.Fatalf("code %d", code)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("diag answered after %v, want >= 200ms", d)
	}
	start = time.Now()
	if _, _, code := run(t, "h100", DCGMI, "discovery", "-l"); code != 0 || time.Since(start) > 100*time.Millisecond {
		t.Errorf("discovery waited %v (code %d): only diag waits", time.Since(start), code)
	}
	for _, bad := range []string{"x", "-1", "1e9"} {
		t.Setenv(DiagSecondsEnv, bad)
		out, errOut, code := run(t, "h100", DCGMI, "diag", "-r", "1")
		if code != ExitNotSimulated || out != "" || !strings.Contains(errOut, DiagSecondsEnv) {
			t.Errorf("%s=%q: code %d stdout %q stderr %q", DiagSecondsEnv, bad, code, out, errOut)
		}
	}
}

func TestIB(t *testing.T) {
	for _, name := range Profiles() {
		p := mustProfile(t, name)
		for tool, src := range map[string]string{IBStat: p.ibstat, IBVDevinfo: p.ibvDevinfo} {
			out, errOut, code := run(t, name, tool)
			switch {
			case src == "":
				if code != 127 || out != "" || errOut != "bash: "+tool+": command not found\n" {
					t.Errorf("%s %s: code %d stdout %q stderr %q, want not installed", name, tool, code, out, errOut)
				}
				continue
			case src == ibstatPanic:
				if code != 255 || out+errOut != string(sample(src)) || !strings.HasPrefix(errOut, "ibpanic: [1400444] main: ") ||
					!strings.HasSuffix(out, "Link layer: InfiniBand\n") {
					t.Errorf("%s %s: code %d, stdout+stderr verbatim %v, stderr %q", name, tool, code, out+errOut == string(sample(src)), errOut)
				}
			default:
				if code != 0 || errOut != "" || out != string(sample(src)) {
					t.Errorf("%s %s: code %d stderr %q verbatim %v", name, tool, code, errOut, out == string(sample(src)))
				}
			}
			out, errOut, code = run(t, name, tool, "-v")
			wantNotSimulated(t, name+" "+tool+" -v", out, errOut, code)
		}
	}
}

func TestMainAndCommand(t *testing.T) {
	if _, errOut, code := run(t, "nope", NvidiaSMI, "-L"); code != ExitNotSimulated || !strings.Contains(errOut, "unknown stand-in profile") {
		t.Errorf("unknown profile: code %d stderr %q", code, errOut)
	}
	if _, errOut, code := run(t, "h100", "rocm-smi"); code != ExitNotSimulated || !strings.Contains(errOut, "unknown tool") {
		t.Errorf("unknown tool: code %d stderr %q", code, errOut)
	}
	cmd := func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		c := Command(args, &o, &e)
		return o.String(), e.String(), c
	}
	want, _, _ := run(t, "h100-other-driver", NvidiaSMI, "-L")
	for _, args := range [][]string{
		{"--profile", "h100-other-driver", "nvidia-smi", "-L"},
		{"--profile=h100-other-driver", "nvidia-smi", "-L"},
		{"--profile", "h100", "--profile", "h100-other-driver", "nvidia-smi", "-L"},
	} {
		if out, errOut, code := cmd(args...); out != want || errOut != "" || code != 0 {
			t.Errorf("Command%v: code %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	if out, _, _ := cmd("nvidia-smi", "-L"); !strings.Contains(out, "GPU 7: NVIDIA H100 80GB HBM3") {
		t.Errorf("default profile is not h100: %q", out)
	}
	// Everything after the tool is the tool's.
	if out, _, code := cmd("nvidia-smi", "--profile", "h100"); code != 2 || !strings.HasPrefix(out, "ERROR: Option --profile is not recognized.") {
		t.Errorf("tool args: code %d stdout %q", code, out)
	}
	for _, args := range [][]string{nil, {"--profile"}, {"--bogus", "nvidia-smi"}} {
		if _, errOut, code := cmd(args...); code != ExitNotSimulated || !strings.HasPrefix(errOut, "usage: standin") {
			t.Errorf("Command%v: code %d stderr %q", args, code, errOut)
		}
	}
	out, _, code := cmd("--list-profiles")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != len(Profiles()) || !strings.HasPrefix(lines[0], "h100\tnvidia-smi,dcgmi,ibstat\t") {
		t.Errorf("--list-profiles: code %d\n%s", code, out)
	}
}

// ---- Install: real wrappers, run with os/exec ----

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// standinBinary builds cmd/standin once per test run.
func standinBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "standins-test-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "standin")
		out, err := exec.Command(gobin, "build", "-o", buildBin, "gpuaccept/scripts/standins/cmd/standin").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out) + err.Error())
		}
	})
	if buildErr != nil {
		t.Fatalf("go build cmd/standin: %v", buildErr)
	}
	return buildBin
}

// invocations are run through the wrappers and compared with Main.
var invocations = []struct {
	tool string
	args []string
}{
	{NvidiaSMI, []string{"-L"}},
	{NvidiaSMI, []string{"-q"}},
	{NvidiaSMI, []string{"topo", "-m"}},
	{NvidiaSMI, []string{"--query-gpu=index,name,uuid,memory.total,power.limit", "--format=csv,noheader"}},
	{NvidiaSMI, []string{"--query-gpu=bogus", "--format=csv"}},
	{NvidiaSMI, []string{"--bogus"}},
	{NvidiaSMI, nil},
	{DCGMI, []string{"discovery", "-l"}},
	{DCGMI, []string{"diag", "-r", "2", "-j"}},
	{DCGMI, []string{"bogus"}},
	{IBStat, nil},
	{IBVDevinfo, nil},
}

type result struct {
	stdout, stderr string
	code           int
}

func runWrapper(t *testing.T, path string, args []string, env ...string) result {
	t.Helper()
	cmd := exec.Command(path, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s: %v", path, err)
	}
	return result{o.String(), e.String(), cmd.ProcessState.ExitCode()}
}

func checkInstalled(t *testing.T, dir, profile string) {
	t.Helper()
	tools, _ := Tools(profile)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := append(slices.Clone(tools), ProfileFile)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: files %v, want %v", profile, got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ProfileFile)); err != nil || string(b) != profile+"\n" {
		t.Errorf("%s: PROFILE = %q, %v", profile, b, err)
	}
	for _, tool := range tools {
		fi, err := os.Stat(filepath.Join(dir, tool))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %s: %v mode %v", profile, tool, err, fi.Mode())
		}
	}
}

func TestInstallWrappers(t *testing.T) {
	bin := standinBinary(t)
	for _, profile := range Profiles() {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "bin", "sub")
			if err := Install(dir, profile, []string{bin}); err != nil {
				t.Fatal(err)
			}
			checkInstalled(t, dir, profile)
			b, _ := os.ReadFile(filepath.Join(dir, NvidiaSMI))
			want := "#!/bin/sh\n# gpuaccept stand-in for nvidia-smi (simulated node, profile " + profile + ")\n" +
				"exec '" + bin + "' '--profile' '" + profile + "' 'nvidia-smi' \"$@\"\n"
			if string(b) != want {
				t.Errorf("wrapper:\n%s\nwant:\n%s", b, want)
			}
			p := mustProfile(t, profile)
			for _, inv := range invocations {
				var o, e bytes.Buffer
				code := Main(profile, inv.tool, inv.args, &o, &e)
				want := result{o.String(), e.String(), code}
				var got result
				if p.has(inv.tool) {
					got = runWrapper(t, filepath.Join(dir, inv.tool), inv.args)
				} else {
					// Not installed: the shell's own answer, found through PATH.
					got = runWrapper(t, "/bin/sh", []string{"-c", inv.tool + ` "$@"`, "sh"}, "PATH="+dir)
					if got.code != 127 || got.stdout != "" || !strings.Contains(got.stderr, inv.tool) {
						t.Errorf("%s %v not installed: %+v", inv.tool, inv.args, got)
					}
					continue
				}
				if got != want {
					t.Errorf("%s %v through the wrapper: code %d stdout %d bytes stderr %q; Main: code %d stdout %d bytes stderr %q",
						inv.tool, inv.args, got.code, len(got.stdout), got.stderr, want.code, len(want.stdout), want.stderr)
				}
			}
			// Through PATH, as the agent runs them.
			got := runWrapper(t, "/bin/sh", []string{"-c", "nvidia-smi -L"}, "PATH="+dir+":/usr/bin:/bin")
			wantL, _, _ := run(t, profile, NvidiaSMI, "-L")
			if got.stdout != wantL || got.code != 0 {
				t.Errorf("nvidia-smi -L on PATH: %+v", got)
			}
		})
	}
}

// argv0 words with quotes, spaces and $ survive the wrapper, and a multi-word argv0 (gpuaccept standin) works.
func TestInstallQuoting(t *testing.T) {
	bin := standinBinary(t)
	odd := filepath.Join(t.TempDir(), `it's a "dir" $HOME`, "standin")
	if err := os.MkdirAll(filepath.Dir(odd), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, b, 0o755); err != nil {
		t.Fatal(err)
	}
	wantOut, _, _ := run(t, "h100-ib-down", IBStat)
	for _, argv0 := range [][]string{
		{odd},
		{"/bin/sh", "-c", `exec "$0" "$@"`, bin}, // a prefix of several words, like ["/path/gpuaccept", "standin"]
	} {
		dir := t.TempDir()
		if err := Install(dir, "h100-ib-down", argv0); err != nil {
			t.Fatal(err)
		}
		got := runWrapper(t, filepath.Join(dir, IBStat), nil)
		if got.stdout != wantOut || got.code != 0 || got.stderr != "" {
			t.Errorf("argv0 %q: %+v", argv0, got)
		}
		got = runWrapper(t, filepath.Join(dir, NvidiaSMI), []string{"--query-gpu=index, name", "--format=csv"})
		if got.stdout != "Field \" name\" is not a valid field to query.\n\n" || got.code != 2 {
			t.Errorf("argv0 %q: an argument with a space: %+v", argv0, got)
		}
		got = runWrapper(t, filepath.Join(dir, NvidiaSMI), []string{"it's $x"})
		if got.stdout != "ERROR: Option it's $x is not recognized. Please run 'nvidia-smi -h' for help.\n\n" {
			t.Errorf("argv0 %q: argument passed through as %q", argv0, got.stdout)
		}
	}
}

func TestInstallReplaceAndErrors(t *testing.T) {
	dir := t.TempDir()
	bin := "/nonexistent/standin" // the wrappers are not run here
	if err := Install(dir, "h100-ibv-devinfo", []string{bin}); err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, dir, "h100-ibv-devinfo")
	if err := Install(dir, "h100-no-dcgm", []string{bin}); err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, dir, "h100-no-dcgm") // stale dcgmi and ibv_devinfo wrappers removed
	if b, _ := os.ReadFile(filepath.Join(dir, NvidiaSMI)); !strings.Contains(string(b), "'h100-no-dcgm'") {
		t.Errorf("nvidia-smi wrapper not rewritten: %s", b)
	}
	// A file that is not a wrapper is left alone.
	foreign := filepath.Join(dir, DCGMI)
	if err := os.WriteFile(foreign, []byte("#!/bin/sh\necho real\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Install(dir, "h100-no-dcgm", []string{bin}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("foreign dcgmi removed: %v", err)
	}
	for _, tc := range []struct {
		profile string
		argv0   []string
	}{
		{"nope", []string{bin}}, {"h100", nil}, {"h100", []string{""}}, {"h100", []string{bin, "a\nb"}},
	} {
		if err := Install(t.TempDir(), tc.profile, tc.argv0); err == nil {
			t.Errorf("Install(%q, %q): no error", tc.profile, tc.argv0)
		}
	}
	if err := Install(filepath.Join(foreign, "sub"), "h100", []string{bin}); err == nil {
		t.Error("Install under a file: no error")
	}
}

// The wrapper execs the stand-in, so killing the process a test started ends the diagnostic at once (no shell
// left holding it, no orphan writing on).
func TestInstallKillMidDiag(t *testing.T) {
	bin := standinBinary(t)
	dir := t.TempDir()
	if err := Install(dir, "h100", []string{bin}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, DCGMI), "diag", "-r", "3")
	cmd.Env = append(os.Environ(), DiagSecondsEnv+"=30")
	var o bytes.Buffer
	cmd.Stdout = &o
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait took %v after kill: something still holds stdout", d)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || o.Len() != 0 {
		t.Errorf("killed mid-diag: err %v, %d bytes out", err, o.Len())
	}
}

// TestIdleClocksChangeOnlyTheReasons: a profile replaying a capture with
// idle clocks changes the values of the clock event reasons and nothing
// else; the capture's other lines are byte for byte the same.
func TestIdleClocksChangeOnlyTheReasons(t *testing.T) {
	raw := strings.Split(string(sample(qH100)), "\n")
	idle := strings.Split(string(idleClocks(sample(qH100))), "\n")
	if len(raw) != len(idle) {
		t.Fatalf("%d lines became %d", len(raw), len(idle))
	}
	changed := 0
	for i := range raw {
		if raw[i] == idle[i] {
			continue
		}
		changed++
		rn, rv, _ := strings.Cut(raw[i], ":")
		in, iv, _ := strings.Cut(idle[i], ":")
		if rn != in || strings.TrimSpace(rv) == "" || (strings.TrimSpace(iv) != "Active" && strings.TrimSpace(iv) != "Not Active") {
			t.Errorf("line %d: %q became %q", i+1, raw[i], idle[i])
		}
	}
	// The capture has one GPU under load (00000000:75:00.0: SW Power Cap,
	// HW Power Brake and SW Thermal Slowdown active, Idle not).
	if changed != 4 {
		t.Errorf("%d lines changed, want the 4 of the loaded GPU", changed)
	}
}
