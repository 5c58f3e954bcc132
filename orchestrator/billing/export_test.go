package billing

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readFile(t *testing.T, name string, o Options) *Export {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ex, err := Read(f, o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ex
}

// Each fixture bills gpu-01 and gpu-02 one hour of an 8-GPU node on
// 2026-12-06 (see testdata/README.md).
func TestReadFormats(t *testing.T) {
	h := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	day := h("2026-12-06T00:00:00Z")
	for _, c := range []struct {
		file     string
		opts     Options
		format   Format
		lines    int
		resource string
		start    time.Time
		end      time.Time
		cost     float64
		currency string
		team     string
		hours    float64 // node-hours its first line bills on an 8-GPU node (a line without a unit: its span)
		warn     string
	}{
		{"aws-cur.csv", Options{}, AWSLegacy, 2, "i-0a1b2c3d4e5f60001", h("2026-12-06T08:00:00Z"), h("2026-12-06T09:00:00Z"), 98.32, "USD", "ml", 1, WarnSkipped},
		{"aws-cur2.csv", Options{}, AWSCUR2, 2, "i-0a1b2c3d4e5f60001", h("2026-12-06T08:00:00Z"), h("2026-12-06T09:00:00Z"), 98.32, "USD", "ml", 1, ""},
		{"gcp.csv", Options{}, GCP, 2, "//compute.googleapis.com/projects/gpu-trial/zones/us-central1-a/instances/1234567890123456789",
			h("2026-12-06T08:00:00Z"), h("2026-12-06T09:00:00Z"), 88.49, "USD", "ml", 1, WarnSkipped},
		{"azure-ea.csv", Options{}, Azure, 2, "/subscriptions/11111111-12ab-34dc-56ef-123456abcdef/resourceGroups/gpu-trial/providers/Microsoft.Compute/virtualMachines/gpu-01",
			day, day.Add(24 * time.Hour), 196.64, "USD", "ml", 2, WarnSkipped},
		{"azure-usage-bom.csv", Options{}, AzureLegacy, 2, "/subscriptions/11111111-12ab-34dc-56ef-123456abcdef/resourceGroups/gpu-trial/providers/Microsoft.Compute/virtualMachines/gpu-01",
			day, day.Add(24 * time.Hour), 196.64, "USD", "ml", 2, ""},
		{"azure-usage-german.csv", Options{}, AzureLegacy, 2, "/subscriptions/11111111-12ab-34dc-56ef-123456abcdef/resourceGroups/gpu-trial/providers/Microsoft.Compute/virtualMachines/gpu-01",
			day, day.Add(24 * time.Hour), 196.64, "USD", "ml", 2, ""},
		{"generic.csv", Options{}, Generic, 2, "gpu-01", h("2026-12-06T08:00:00Z"), h("2026-12-06T09:00:00Z"), 19.92, "EUR", "ml", 1, ""},
		{"generic.json", Options{Columns: &Columns{Resource: "instance", Start: "from", End: "to", Quantity: "hours", Cost: "amount",
			Currency: "ccy", Tags: "labels"}}, GenericJSON, 2, "gpu-01", h("2026-12-06T07:00:00Z"), h("2026-12-06T08:00:00Z"), 19.92, "EUR", "ml", 1, ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			ex := readFile(t, c.file, c.opts)
			if ex.Format != c.format || len(ex.Lines) != c.lines || ex.Currency != c.currency {
				t.Fatalf("format %s, %d lines, %q; want %s, %d, %q", ex.Format, len(ex.Lines), ex.Currency, c.format, c.lines, c.currency)
			}
			l := ex.Lines[0]
			if l.Resource != c.resource || !l.Start.Equal(c.start) || !l.End.Equal(c.end) || l.Cost != c.cost || l.Tags["team"] != c.team {
				t.Errorf("first line %+v", l)
			}
			if secs, ok := l.NodeSeconds(ex.Format, 8); !ok || secs != c.hours*3600 {
				t.Errorf("billed %v s (%v), want %v h", secs, ok, c.hours)
			}
			var codes []string
			for _, w := range ex.Warnings {
				codes = append(codes, w.Code)
			}
			if got := strings.Join(codes, ","); got != c.warn {
				t.Errorf("warnings %q (%v), want %q", got, ex.Warnings, c.warn)
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	gen := "resource,start,end,quantity,unit,cost,currency\n"
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"unknown columns", "host,from,until,price\ngpu-01,a,b,1\n", `unknown export format: its columns ("host", "from", "until", "price")`},
		{"mixed currencies", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,1,USD\nb,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,1,EUR\n",
			"mixed currencies: EUR (line 3 first), USD (line 2 first)"},
		{"empty cost", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,,USD\n", "line 2: cost: empty"},
		{"decimal comma", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,\"19,92\",USD\n", "line 2: cost: \"19,92\": a decimal or thousands comma"},
		{"named zone", gen + "a,2026-12-06 08:00:00 PST,2026-12-06 09:00:00 PST,1,h,1,USD\n", "line 2: usage start: \"2026-12-06 08:00:00 PST\" is no time"},
		{"ends before it starts", gen + "a,2026-12-06T09:00:00Z,2026-12-06T08:00:00Z,1,h,1,USD\n", "line 2: usage ends"},
		{"no end", "resource,start,cost\na,2026-12-06T09:00:00Z,1\n", "line 2: a usage start with a time of day but no usage end"},
		{"NaN", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,NaN,h,1,USD\n", "line 2: quantity: \"NaN\" is not a number"},
		{"short row", gen + "a,2026-12-06T08:00:00Z\n", "wrong number of fields"},
		// Summed, such figures reached +Inf: a table printed
		// -9223372036854775808s and JSON could not hold the result.
		{"a quantity past a node-year", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1e306,days,1,USD\n",
			"line 2: quantity: 1e+306 days is more time than a node-year on one line"},
		{"367 node-days", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,367,d,1,USD\n", "line 2: quantity: 367 d"},
		{"a GPU unit past 64 GPU-years", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1e300,GPU-hours,1,USD\n",
			"line 2: quantity: 1e+300 GPU-hours"},
		{"a quantity of another unit past the bound", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1e300,GB,1,USD\n",
			"line 2: quantity: 1e+300 GB is beyond"},
		{"a span past a node-year without a unit", "resource,start,end,cost\na,2006-12-06T08:00:00Z,2026-12-06T09:00:00Z,1\n",
			"line 2: no unit, and its span"},
		{"a cost past the bound", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,-1e300,USD\n",
			"line 2: cost: -1e+300 is beyond 1e+12"},
		{"a currency that is no code", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,1,\x1b[2J\n",
			`line 2: currency "?[2J" is not a 3-letter ISO 4217 code`},
		{"a currency word", gen + "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,1,dollars\n", `currency "dollars"`},
		{"mapped column missing", gen, `billing.columns names columns the export lacks: tags ("labels")`},
		{"JSON without keys", `[{"x": 1}]`, `JSON object 1: no resource ("resource"), start ("start"), cost ("cost")`},
		{"JSON cut", `[{"resource":"a","start":"2026-12-06","cost":1}`, "JSON: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{}
			if c.name == "mapped column missing" {
				o.Columns = &Columns{Tags: "labels"}
			}
			_, err := Read(strings.NewReader(c.in), o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// A line number is the file's line, where a record's quoted field holds
// a line break or blank lines lead the file.
func TestReadNamesTheFilesLine(t *testing.T) {
	gen := "resource,start,end,quantity,unit,cost,currency,item\n"
	ok := "a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,1,usd,\"an H100 node,\nbilled by the hour\"\n"
	ex, err := Read(strings.NewReader("\n\n"+gen+ok+ok), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Lines[0].Row != 4 || ex.Lines[1].Row != 6 || ex.Currency != "USD" {
		t.Errorf("lines %d and %d in %q, want 4 and 6 in USD", ex.Lines[0].Row, ex.Lines[1].Row, ex.Currency)
	}
	bad := "b,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,,USD,x\n"
	if _, err := Read(strings.NewReader(gen+ok+bad), Options{}); err == nil || !strings.Contains(err.Error(), "line 4: cost: empty") {
		t.Errorf("error %v, want line 4", err)
	}
	if _, err := Read(strings.NewReader("\n"+gen+ok+"c,\"x\"y\n"), Options{}); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("a CSV error: %v, want line 5", err)
	}
	if _, err := Read(strings.NewReader("\n\nhost,from\n"), Options{}); err == nil || !strings.Contains(err.Error(), "line 3: unknown export format") {
		t.Errorf("the header's error: %v, want line 3", err)
	}
}

func TestReadWarnsOfTimesWithoutZone(t *testing.T) {
	in := "resource,start,end,quantity,unit,cost\na,2026-12-06 08:00:00,2026-12-06 09:00:00,1,h,1\n"
	ex, err := Read(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Warnings) != 1 || ex.Warnings[0].Code != WarnNoZone || !strings.Contains(ex.Warnings[0].Text, "line 2 first") {
		t.Fatalf("warnings %v", ex.Warnings)
	}
	if want := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC); !ex.Lines[0].Start.Equal(want) {
		t.Errorf("start %v", ex.Lines[0].Start)
	}
}

func TestReadOffsetsAreConverted(t *testing.T) {
	in := "resource,start,end,quantity,unit,cost\na,2026-12-06T09:00:00+01:00,2026-12-06T10:00:00+01:00,1,h,1\n"
	ex, err := Read(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC); !ex.Lines[0].Start.Equal(want) || len(ex.Warnings) != 0 {
		t.Errorf("start %v, warnings %v", ex.Lines[0].Start, ex.Warnings)
	}
}

func TestReadIsBounded(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("resource,start,end,quantity,unit,cost\n")
	for range 50 {
		b.WriteString("a,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,1\n")
	}
	if _, err := Read(bytes.NewReader(b.Bytes()), Options{MaxBytes: 200}); err == nil || !strings.Contains(err.Error(), "larger than 200 bytes") {
		t.Errorf("bytes: %v", err)
	}
	if _, err := Read(bytes.NewReader(b.Bytes()), Options{MaxLines: 10}); err == nil || !strings.Contains(err.Error(), "more than 10 lines") {
		t.Errorf("lines: %v", err)
	}
	if ex, err := Read(bytes.NewReader(b.Bytes()), Options{MaxBytes: int64(b.Len())}); err != nil || len(ex.Lines) != 50 {
		t.Errorf("an export of exactly the bound: %v", err)
	}
}

func TestTimeUnit(t *testing.T) {
	for _, c := range []struct {
		unit   string
		secs   float64
		perGPU bool
		ok     bool
	}{
		{"Hrs", 3600, false, true}, {"10 Hours", 36000, false, true}, {"1 Hour", 3600, false, true},
		{"seconds", 1, false, true}, {"GPU-hours", 3600, true, true}, {"gpu-hour", 3600, true, true},
		{"GB-Mo", 0, false, false}, {"", 0, false, false}, {"requests", 0, false, false},
	} {
		secs, perGPU, ok := TimeUnit(c.unit)
		if secs != c.secs || perGPU != c.perGPU || ok != c.ok {
			t.Errorf("%q: %v %v %v", c.unit, secs, perGPU, ok)
		}
	}
}

// FuzzRead: an export is someone else's file; nothing in it may panic
// the reader, and what it returns holds together.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.*"))
	for _, p := range files {
		if strings.HasSuffix(p, ".md") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\xef\xbb\xbfresource,start,cost\na,2026-12-06,1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ex, err := Read(bytes.NewReader(b), Options{MaxBytes: 1 << 16, MaxLines: 1000})
		if err != nil {
			return
		}
		for _, l := range ex.Lines {
			if l.End.Before(l.Start) {
				t.Fatalf("line %d ends before it starts", l.Row)
			}
			if !(math.Abs(l.Cost) <= maxLineCost) || math.IsNaN(l.Quantity) || math.IsInf(l.Quantity, 0) {
				t.Fatalf("line %d: cost %v, quantity %v", l.Row, l.Cost, l.Quantity)
			}
			if l.Currency != "" && !isoCurrency(l.Currency) {
				t.Fatalf("line %d: currency %q", l.Row, l.Currency)
			}
			if ex.Currency != "" && l.Currency != "" && !strings.EqualFold(strings.TrimSpace(l.Currency), ex.Currency) {
				t.Fatalf("line %d in %q, export in %q", l.Row, l.Currency, ex.Currency)
			}
		}
		if len(ex.Lines) > 1000 {
			t.Fatalf("%d lines past the bound", len(ex.Lines))
		}
	})
}

func TestNodeSecondsWithoutUnit(t *testing.T) {
	day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	span := Line{Start: day.Add(8 * time.Hour), End: day.Add(9*time.Hour + 30*time.Minute)}
	if s, ok := span.NodeSeconds(Generic, 8); !ok || s != 5400 {
		t.Errorf("a span: %v %v", s, ok)
	}
	daily := Line{Start: day, End: day.Add(24 * time.Hour), Daily: true}
	if s, ok := daily.NodeSeconds(Azure, 8); ok {
		t.Errorf("a day without a unit billed %v s", s)
	}
	gcpGPU := Line{Unit: "seconds", Quantity: 28800, Item: "Nvidia H100 80GB GPU running in Americas"}
	if s, ok := gcpGPU.NodeSeconds(GCP, 8); !ok || s != 3600 {
		t.Errorf("Google's GPU SKU counts per GPU: %v %v", s, ok)
	}
}
