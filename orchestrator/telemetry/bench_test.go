package telemetry

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A node's day: 8 GPUs sampled every 5 s (138,240 rows) of the genuine
// H200 rows, idle and under load by turns of an hour, in the members a
// coordinator appends (one per start: four restarts). Reports rows/s read
// and the gzip bytes each row takes in the bundle.
func BenchmarkReadDay(b *testing.B) {
	load := strings.Split(project(b, sample(b, "nvidia-smi",
		"h200-580.159.04-query-gpu-telemetry-csv-bf16-gemm-load.txt"))[0], ", ")
	idle := strings.Split(nounitsIdle(b), ", ")
	for i, c := range load {
		if n, _, ok := strings.Cut(c, " "); ok && !strings.HasPrefix(c, "[") && strings.Contains(Fields[i], ".") &&
			!strings.HasPrefix(Fields[i], "pci.") && Fields[i] != "driver_version" {
			load[i] = n // nounits, as the sampler asks
		}
	}
	const gpus, rows = 8, 138240
	var parts []string
	var text strings.Builder
	for k := range rows / gpus {
		d := time.Duration(k) * 5 * time.Second
		if k%(rows/gpus/4) == 0 {
			if text.Len() > 0 {
				parts = append(parts, text.String())
				text.Reset()
			}
			text.WriteString(line(d, TagStart, "interval=5000 fields=47"))
		}
		src := idle
		if (d/time.Hour)%2 == 1 {
			src = load
		}
		for g := range gpus {
			c := append([]string(nil), src...)
			c[col["index"]] = fmt.Sprint(g)
			c[col["pci.bus_id"]] = fmt.Sprintf("00000000:%02X:00.0", 0x18+g)
			// The figures move from sample to sample, as real ones do, so
			// the gzip bytes are not those of one repeated row.
			h := (k*7919 + g*104729) % 1000
			c[col["timestamp"]] = t0.Add(d).Format("2006/01/02 15:04:05.000")
			c[col["temperature.gpu"]] = fmt.Sprint(40 + h%30)
			c[col["power.draw"]] = fmt.Sprintf("%.2f", 82+float64(h)*0.61)
			c[col["power.draw.instant"]] = fmt.Sprintf("%.2f", 80+float64(h)*0.63)
			c[col["clocks.current.sm"]] = fmt.Sprint(1485 + h%46)
			c[col["utilization.gpu"]] = fmt.Sprint(h % 101)
			text.WriteString(line(d+time.Duration(g)*time.Millisecond, TagGPU, strings.Join(c, ", ")))
		}
	}
	parts = append(parts, text.String())
	data := members(b, parts...)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		s, err := Read(bytes.NewReader(data))
		if err != nil || len(s.GPUs) != rows || s.Bad != 0 {
			b.Fatalf("%d rows, %d bad, %v", len(s.GPUs), s.Bad, err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(len(data))/rows, "gz-bytes/row")
	// What a read series holds in memory per row (the judge holds a
	// node's series at a time).
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, _ := Read(bytes.NewReader(data))
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/rows, "heap-bytes/row")
	runtime.KeepAlive(s)
}
