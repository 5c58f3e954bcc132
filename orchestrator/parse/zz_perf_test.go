package parse

import (
	"strings"
	"testing"
	"time"
)

func TestZZPerf(t *testing.T) {
	inputs := map[string]string{
		"tabs":    "\tGPU0\tGPU1\tCPU Affinity\nGPU0" + strings.Repeat("\t", 1<<20) + "X\n",
		"pipes":   "| Diagnostic | Result |\n" + strings.Repeat("|  | continuation text here that is long enough to be a chunk of text |\n", 20000),
		"warn":    "| Diagnostic | Result |\n+-----  Hardware  ---+---+\n| t | Pass |\n| Warning | x |\n" + strings.Repeat("|  | continuation text here that is long enough to be a chunk of text |\n", 20000),
		"nest":    strings.Repeat("[", 1<<20),
		"nestobj": strings.Repeat(`{"a":`, 1<<18),
		"bs":      strings.Repeat("a\b", 1<<20),
		"esc":     strings.Repeat("\x1b[", 1<<19),
		"cr":      strings.Repeat("\r", 1<<20) + "x",
		"crsp":    strings.Repeat("\r ", 1<<19) + "x",
		"q":       "Driver Version : 1\nGPU 0000:00:00.0\n" + strings.Repeat("    ", 1) + strings.Repeat("a\n    ", 100000),
		"qdeep": "Driver Version : 1\nGPU 0000:00:00.0\n" + func() string {
			var b strings.Builder
			for i := 1; i < 3000; i++ {
				b.WriteString(strings.Repeat(" ", i) + "s\n")
			}
			return b.String()
		}(),
		"csv":    "a,b\n" + strings.Repeat("1,2\n", 200000),
		"ibv":    "hca_id: x\n" + strings.Repeat("port: 1\n", 100000),
		"ibstat": "CA 'x'\n" + strings.Repeat("\tPort 1:\n", 100000),
		"gpulist": "| Diagnostic | Result |\n+-----  Hardware  ---+---+\n| t | Pass - GPUs: " + func() string {
			var b strings.Builder
			for i := 0; i < 150000; i++ {
				b.WriteString(strings.Repeat("1", 1))
				b.WriteString(", ")
			}
			return b.String()
		}() + " |\n",
		"gpulist2": "| Diagnostic | Result |\n+-----  Hardware  ---+---+\n| t | Pass |\n" + func() string {
			var b strings.Builder
			for i := 0; i < 30000; i++ {
				b.WriteString("|  | GPU")
				b.WriteString(strings.Repeat("7", 1+i%5))
				b.WriteString(": Pass |\n")
			}
			return b.String()
		}(),
		"jsonwarn": `{"name":"t","results":[` + strings.Repeat(`{"entity_group":"GPU","entity_id":1,"status":"Fail","warnings":[{"warning":"w"}]},`, 20000) + `{}],"test_summary":{"status":"Fail","warnings":[` + strings.Repeat(`{"warning":"x"},`, 20000) + `{}]}}`,
		"jsonent": `{"name":"t","results":[` + func() string {
			var b strings.Builder
			for i := 0; i < 50000; i++ {
				b.WriteString(`{"entity_group":"GPU","entity_id":`)
				b.WriteString(strings.Repeat("9", 1+i%6))
				b.WriteString(`,"status":"Pass"},`)
			}
			return b.String()
		}() + `{}]}`,
		"disc":      "9 GPUs found.\n| GPU ID | x |\n" + strings.Repeat("| 1 | Name: x |\n|  | PCI Bus ID: y |\n", 50000),
		"qsections": "Driver Version : 1\n" + strings.Repeat("GPU 0000:00:00.0\n    Product Name : x\n", 50000),
		"L":         strings.Repeat("GPU 0: x (UUID: y)\n  MIG a Device 0: (UUID: z)\n", 1),
		"manyGPU": func() string {
			var b strings.Builder
			for i := 0; i < 100000; i++ {
				b.WriteString("GPU 1")
				b.WriteString(strings.Repeat("0", 0))
				b.WriteString(": x\n")
			}
			return b.String()
		}(),
	}
	for name, in := range inputs {
		for pn, run := range parsers {
			st := time.Now()
			run(in)
			if d := time.Since(st); d > 500*time.Millisecond {
				t.Errorf("%s on %s: %v", pn, name, d)
			}
		}
	}
}
