package parse

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fio samples are read on their own (not through loadSamples), like the
// nccl-tests ones, so the shared sample tables stay untouched; see
// SOURCES.md there.
const fioSamplesDir = samplesRoot + "/fio"

func loadFioSamples(tb testing.TB) map[string]string {
	tb.Helper()
	if st, err := os.Stat(fioSamplesDir); err != nil || !st.IsDir() {
		tb.Fatalf("sample directory %s is missing (want the shared samples checked out next to the module, at /work/shared/samples): %v", fioSamplesDir, err)
	}
	files, err := filepath.Glob(filepath.Join(fioSamplesDir, "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no samples in %s: %v", fioSamplesDir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatalf("read sample: %v", err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

func fioSample(t *testing.T, name string) string {
	t.Helper()
	s, ok := loadFioSamples(t)[name]
	if !ok {
		t.Fatalf("sample %s missing", name)
	}
	return s
}

const (
	fioSB      = "sb-fio-3.16-randrw-nvme-libaio-group_reporting.json.txt"
	fioPKBHist = "pkb-fio-hist-clat-percentiles.json.txt"
	fioPKBOld  = "pkb-fio-parser-sample-result.json.txt"
)

// near compares floats that went through a unit conversion.
func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// fioLat checks a direction's p50/p99/p99.9 (µs) and where they came from.
func fioLat(t *testing.T, what string, io *FioIO, of string, n int, p50, p99, p999 float64) {
	t.Helper()
	if io == nil {
		t.Fatalf("%s: direction missing", what)
	}
	eq(t, what+" percentile of", io.PercentileOf, of)
	eq(t, what+" percentiles", len(io.Percentiles), n)
	for name, pair := range map[string]struct {
		got  *float64
		want float64
	}{"p50": {io.P50US, p50}, "p99": {io.P99US, p99}, "p99.9": {io.P999US, p999}} {
		if pair.got == nil {
			t.Errorf("%s %s missing", what, name)
			continue
		}
		near(t, what+" "+name, *pair.got, pair.want)
	}
	for i := 1; i < len(io.Percentiles); i++ {
		if io.Percentiles[i-1].Pct >= io.Percentiles[i].Pct {
			t.Errorf("%s percentiles not ascending: %v", what, io.Percentiles)
		}
	}
}

// fioIO checks a direction's throughput figures.
func fioIO(t *testing.T, what string, io *FioIO, ioBytes int64, bw, iops float64, runtime, total int64) {
	t.Helper()
	if io == nil {
		t.Fatalf("%s: direction missing", what)
	}
	eq(t, what+" io_bytes", io.IOBytes, ioBytes)
	near(t, what+" bw_bytes", io.BWBytes, bw)
	near(t, what+" iops", io.IOPS, iops)
	eq(t, what+" runtime", io.RuntimeMS, runtime)
	eq(t, what+" total_ios", io.TotalIOs, total)
}

func fioJobNames(jobs []FioJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

// fioSampleWants: every file in the fio sample directory, with values read
// off the file by hand.
var fioSampleWants = map[string]func(t *testing.T, r FioResult){
	// fio-3.16, group_reporting: one job for numjobs=4; lat_percentiles=1
	// puts the percentiles under lat_ns, clat_ns has only min/max/mean.
	fioSB: func(t *testing.T, r FioResult) {
		eq(t, "version", r.Version, "fio-3.16")
		eq(t, "timestamp", r.Timestamp, int64(1626763278))
		eq(t, "timestamp_ms", r.TimestampMS, int64(1626763278577))
		eq(t, "time", r.Time, "Tue Jul 20 06:41:18 2021")
		eq(t, "global options", len(r.GlobalOptions), 12)
		eq(t, "global filename", r.GlobalOptions["filename"], "/dev/nvme0n1")
		eq(t, "global ramp_time", r.GlobalOptions["ramp_time"], "10s")
		eq(t, "jobs", fioJobNames(r.Jobs), []string{"rand_read_write"})
		j := r.Jobs[0]
		eq(t, "error", j.Error, 0)
		eq(t, "job options", j.Options, map[string]string{"name": "rand_read", "rw": "randrw", "bs": "4096", "time_based": "1"})
		eq(t, "typed options", [7]any{j.RW, j.BS, j.Size, j.IODepth, j.NumJobs, j.Direct, j.IOEngine},
			[7]any{"randrw", "4096", "", 64, 4, true, "libaio"})
		fioIO(t, "read", j.Read, 10463010816, 348743777, 85138.890741, 30002, 2554337)
		fioIO(t, "write", j.Write, 10454208512, 348450387, 85066.128925, 30002, 2552154)
		fioIO(t, "trim", j.Trim, 0, 0, 0, 0, 0)
		eq(t, "mixed", j.Mixed, (*FioIO)(nil))
		fioLat(t, "read", j.Read, "lat", 17, 1417.216, 2244.608, 3620.864)
		fioLat(t, "write", j.Write, "lat", 17, 1531.904, 2072.576, 2605.056)
		near(t, "read clat mean", j.Read.ClatMeanUS, 1444.476063469)
		near(t, "read lat mean", j.Read.LatMeanUS, 1446.562147113)
		near(t, "write clat mean", j.Write.ClatMeanUS, 1558.511433458)
		near(t, "usr_cpu", j.UsrCPU, 4.833172)
		eq(t, "disk util", r.DiskUtil, []FioDiskUtil{{Name: "nvme0n1", Util: 99.840351, ReadIOs: 3004914, WriteIOs: 3003760}})
		near(t, "ReadBW", r.ReadBW(), 348743777)
		near(t, "WriteBW", r.WriteBW(), 348450387)
	},
	// fio-2.17: io_bytes in KiB and bw in KiB/s (no bw_bytes), clat in µs
	// with "0.00" padding keys; "filename" twice in global options.
	fioPKBHist: func(t *testing.T, r FioResult) {
		eq(t, "version", r.Version, "fio-2.17")
		eq(t, "timestamp", r.Timestamp, int64(1506559552))
		eq(t, "time", r.Time, "Thu Sep 28 00:45:52 2017")
		eq(t, "global options (12 keys, filename twice)", len(r.GlobalOptions), 11)
		eq(t, "global filename", r.GlobalOptions["filename"], "/dev/disk/by-id/google-pkb-7fb0c9d8-0-data-0-0")
		eq(t, "global write_hist_log", r.GlobalOptions["write_hist_log"], "pkb_fio_avg_1506559526.49")
		eq(t, "jobs", fioJobNames(r.Jobs), []string{"rand_16k_read_100%-io-depth-1-num-jobs-2", "rand_16k_write_100%-io-depth-1-num-jobs-2"})
		rd, wr := r.Jobs[0], r.Jobs[1]
		eq(t, "groupids", []int{rd.GroupID, wr.GroupID}, []int{0, 1})
		eq(t, "read typed options", [7]any{rd.RW, rd.BS, rd.Size, rd.IODepth, rd.NumJobs, rd.Direct, rd.IOEngine},
			[7]any{"randread", "16k", "100%", 1, 2, true, "libaio"})
		eq(t, "write rw", wr.RW, "randwrite")
		fioIO(t, "read job read", rd.Read, 1294256*1024, 129386*1024, 8086.673998, 10003, 80891)
		fioIO(t, "read job write", rd.Write, 0, 0, 0, 0, 0)
		fioIO(t, "write job write", wr.Write, 393280*1024, 39312*1024, 2457.017193, 10004, 24580)
		fioLat(t, "read job read", rd.Read, "clat", 19, 96, 1352, 1896)
		fioLat(t, "write job write", wr.Write, "clat", 19, 548, 2384, 5728)
		eq(t, "read p99.99", rd.Read.Percentiles[18], FioPercentile{Pct: 99.99, US: 5408})
		near(t, "read clat mean", rd.Read.ClatMeanUS, 238.357679)
		near(t, "write lat mean", wr.Write.LatMeanUS, 810.977136)
		eq(t, "disk util", r.DiskUtil, []FioDiskUtil{})
		near(t, "ReadBW", r.ReadBW(), 129386*1024)
		near(t, "WriteBW", r.WriteBW(), 39312*1024)
	},
	// fio-2.1.4: no timestamp, no options, no total_ios, integer iops.
	fioPKBOld: func(t *testing.T, r FioResult) {
		eq(t, "version", r.Version, "fio-2.1.4")
		eq(t, "timestamp", r.Timestamp, int64(0))
		eq(t, "global options", r.GlobalOptions, map[string]string{})
		eq(t, "jobs", fioJobNames(r.Jobs), []string{"sequential_write", "sequential_read", "random_write_test", "random_read_test", "random_read_test_parallel"})
		for _, j := range r.Jobs {
			eq(t, j.Name+" options", j.Options, map[string]string(nil))
			eq(t, j.Name+" rw", j.RW, "")
		}
		fioIO(t, "sequential_write write", r.Jobs[0].Write, 361984*1024, 68118*1024, 133, 5314, 0)
		fioLat(t, "sequential_write write", r.Jobs[0].Write, "clat", 19, 444416, 823296, 872448)
		near(t, "sequential_write clat mean", r.Jobs[0].Write.ClatMeanUS, 477734.84)
		fioIO(t, "sequential_read read", r.Jobs[1].Read, 361984*1024, 129836*1024, 253, 2788, 0)
		fioIO(t, "random_write_test write", r.Jobs[2].Write, 36244*1024, 6443*1024, 1610, 5625, 0)
		fioIO(t, "random_read_test read", r.Jobs[3].Read, 36244*1024, 1269*1024, 317, 28540, 0)
		fioLat(t, "random_read_test read", r.Jobs[3].Read, "clat", 19, 3280, 3728, 6880)
		fioIO(t, "random_read_test_parallel read", r.Jobs[4].Read, 36244*1024, 1292*1024, 323, 28045, 0)
		eq(t, "disk util", r.DiskUtil, []FioDiskUtil{{Name: "sdb", Util: 97.54, ReadIOs: 19464, WriteIOs: 10508}})
		near(t, "ReadBW", r.ReadBW(), (129836+1269+1292)*1024)
		near(t, "WriteBW", r.WriteBW(), (68118+6443)*1024)
	},
}

func TestFioSamples(t *testing.T) {
	samples := loadFioSamples(t)
	for name := range fioSampleWants {
		if _, ok := samples[name]; !ok {
			t.Errorf("expected sample %s is missing from %s", name, fioSamplesDir)
		}
	}
	for _, name := range sortedKeys(samples) {
		check, ok := fioSampleWants[name]
		if !ok {
			t.Errorf("sample %s has no entry in fioSampleWants: add its expected values", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			r, err := Fio(samples[name])
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			eq(t, "ok", r.OK, true)
			eq(t, "documents", r.Documents, 1)
			eq(t, "client", r.Client, false)
			eq(t, "notes", r.Notes, []string(nil))
			check(t, r)
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("result does not marshal: %v", err)
			}
		})
	}
}

// TestFioSamplesOnlyOwnParser: no other parser takes fio's JSON for its
// tool's, and Fio takes no other tool's output.
func TestFioSamplesOnlyOwnParser(t *testing.T) {
	for name, text := range loadFioSamples(t) {
		for pname, run := range parsers {
			if _, err := run(text); !errors.Is(err, ErrNotRecognized) {
				t.Errorf("%s accepted fio sample %s: err = %v", pname, name, err)
			}
		}
		if _, err := NCCLTests(text); !errors.Is(err, ErrNotRecognized) {
			t.Errorf("NCCLTests accepted fio sample %s: err = %v", name, err)
		}
	}
	others := map[string]string{"nccl -J JSON": ncclJSONSample}
	for _, s := range loadSamples(t) {
		others[s.key] = s.text
	}
	for name, text := range loadNCCLSamples(t) {
		others["nccl-tests/"+name] = text
	}
	for name, text := range others {
		r, err := Fio(text)
		if !errors.Is(err, ErrNotRecognized) {
			t.Errorf("Fio accepted %s: err = %v", name, err)
		}
		if len(r.Jobs) > 0 || r.Documents > 0 || r.OK {
			t.Errorf("Fio returned data for %s: %+v", name, r)
		}
	}
}

// fioNormalOutput is the shape of fio's default (text) report.
const fioNormalOutput = `rand_read: (g=0): rw=randrw, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=64
...
fio-3.16
Starting 4 threads
Jobs: 4 (f=4): [m(4)][100.0%][r=333MiB/s,w=332MiB/s][r=85.2k,w=85.1k IOPS][eta 00m:00s]
rand_read: (groupid=0, jobs=4): err= 0: pid=1234: Tue Jul 20 06:41:18 2021
  read: IOPS=85.1k, BW=333MiB/s (349MB/s)(9978MiB/30002msec)
    slat (nsec): min=1332, max=48691, avg=2032.59, stdev=864.92
     lat (usec): min=280, max=10177, avg=1446.56, stdev=300.72
     lat percentiles (usec):
     |  1.00th=[  873],  5.00th=[ 1037], 10.00th=[ 1123], 20.00th=[ 1221],
     | 99.00th=[ 2245], 99.50th=[ 2409], 99.90th=[ 3621], 99.95th=[ 4359],
   bw (  KiB/s): min=291288, max=380288, per=99.99%, avg=340567.05, stdev=6222.34, samples=240

Run status group 0 (all jobs):
   READ: bw=333MiB/s (349MB/s), 333MiB/s-333MiB/s (349MB/s-349MB/s), io=9978MiB (10.5GB), run=30002-30002msec

Disk stats (read/write):
  nvme0n1: ios=3004914/3003760, merge=0/0, ticks=4269143/4598453, in_queue=11104, util=99.84%
`

func TestFioNotRecognized(t *testing.T) {
	for name, in := range map[string]string{
		"empty":             "",
		"blank":             "\n \t\n",
		"fio normal text":   fioNormalOutput,
		"fio terse":         "3;fio-3.16;rand_read;0;0;10217784;340570;85138;30002;1332;48691;2032.588341;864.921965\n",
		"random json":       `{"foo": [1, 2, {"bar": "baz"}]}`,
		"json array":        `[{"jobname": "x"}]`,
		"jobs without name": `{"jobs": [{"name": "x", "error": 0}]}`,
		"other version":     `{"fio version": 3, "jobs": []}`,
		"dcgmi json":        `{"DCGM Diagnostic": {"test_categories": []}, "version": "4.0"}`,
		"broken json":       "{\"fio\": [",
		"binary":            "\x00\x01\x02\xff\xfe\x1b[31m{",
		"shell error":       "bash: fio: command not found\n",
	} {
		r, err := Fio(in)
		if !errors.Is(err, ErrNotRecognized) {
			t.Errorf("%s: err = %v, want ErrNotRecognized", name, err)
		}
		if len(r.Jobs) > 0 || r.OK {
			t.Errorf("%s: returned data %+v", name, r)
		}
	}
}

// fioSmall is a minimal fio 3.x report; %ERR% is replaced by the job's
// error code.
const fioSmall = `{
  "fio version" : "fio-3.36",
  "timestamp" : 1700000000,
  "global options" : { "ioengine" : "io_uring", "direct" : "1" },
  "jobs" : [
    {
      "jobname" : "seqread",
      "groupid" : 0,
      "error" : %ERR%,
      "job options" : { "rw" : "read", "bs" : "1M", "iodepth" : "32", "size" : "10G" },
      "read" : {
        "io_bytes" : 1048576000, "io_kbytes" : 1024000, "bw_bytes" : 104857600, "bw" : 102400,
        "iops" : 100.0, "runtime" : 10000, "total_ios" : 1000,
        "clat_ns" : { "min" : 1000, "max" : 90000, "mean" : 2500.5,
          "percentile" : { "50.000000" : 2048, "99.000000" : 8192, "99.900000" : 16384 } },
        "lat_ns" : { "min" : 1100, "max" : 91000, "mean" : 2600.5 }
      }
    },
    {
      "jobname" : "seqwrite",
      "groupid" : 0,
      "error" : 0,
      "job options" : { "rw" : "write", "bs" : "1M" },
      "write" : { "io_bytes" : 524288000, "io_kbytes" : 512000, "bw_bytes" : 52428800, "bw" : 51200,
        "iops" : 50, "runtime" : 10000, "total_ios" : 500 }
    }
  ],
  "disk_util" : [ { "name" : "nvme0n1", "util" : 50 } ]
}
`

func fioSmallWith(errCode string) string { return strings.Replace(fioSmall, "%ERR%", errCode, 1) }

func TestFioErrorJob(t *testing.T) {
	r, err := Fio(fioSmallWith("5"))
	if !errors.Is(err, ErrToolFailed) {
		t.Fatalf("err = %v, want ErrToolFailed", err)
	}
	if !strings.Contains(err.Error(), `job "seqread" error 5`) {
		t.Errorf("error does not name the job and code: %v", err)
	}
	eq(t, "ok", r.OK, false)
	eq(t, "jobs (still parsed)", fioJobNames(r.Jobs), []string{"seqread", "seqwrite"})
	eq(t, "errors", []int{r.Jobs[0].Error, r.Jobs[1].Error}, []int{5, 0})
	near(t, "ReadBW", r.ReadBW(), 104857600)
	near(t, "WriteBW", r.WriteBW(), 52428800)

	r, err = Fio(fioSmallWith("0"))
	if err != nil || !r.OK {
		t.Fatalf("clean run: ok=%v err=%v", r.OK, err)
	}
	j := r.Jobs[0]
	eq(t, "typed options", [7]any{j.RW, j.BS, j.Size, j.IODepth, j.NumJobs, j.Direct, j.IOEngine},
		[7]any{"read", "1M", "10G", 32, 0, true, "io_uring"})
	fioLat(t, "read", j.Read, "clat", 3, 2.048, 8.192, 16.384)
	near(t, "clat mean", j.Read.ClatMeanUS, 2.5005)
	near(t, "lat mean", j.Read.LatMeanUS, 2.6005)
	eq(t, "no read in write job", r.Jobs[1].Read, (*FioIO)(nil))
	eq(t, "write job percentiles", r.Jobs[1].Write.PercentileOf, "")
	eq(t, "write job p99", r.Jobs[1].Write.P99US, (*float64)(nil))

	// An error code as a float or a string is still an error.
	for _, code := range []string{"5.0", `"5"`, "-1", "1e300"} {
		if _, err := Fio(fioSmallWith(code)); !errors.Is(err, ErrToolFailed) {
			t.Errorf("error %s: err = %v, want ErrToolFailed", code, err)
		}
	}
}

// TestFioTextAround: fio prints warnings before the report (and a client
// banner, or errors after it); they are kept as notes.
func TestFioTextAround(t *testing.T) {
	base := fioSample(t, fioSB)
	before := "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1\n" +
		"fio: this platform does not support process shared mutexes, forcing use of threads. Use the 'thread' option to get rid of this warning.\n" +
		"{ not json either\n"
	after := "fio: file hash not empty on exit\n"
	for name, in := range map[string]string{
		"before":        before + base,
		"before, after": before + base + after,
		"CRLF":          strings.ReplaceAll(before+base, "\n", "\r\n"),
		"BOM and ANSI":  "\ufeff\x1b[33m" + before + "\x1b[0m" + base,
	} {
		r, err := Fio(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		eq(t, name+" jobs", fioJobNames(r.Jobs), []string{"rand_read_write"})
		near(t, name+" ReadBW", r.ReadBW(), 348743777)
		if len(r.Notes) < 3 || !strings.HasPrefix(r.Notes[0], "note: both iodepth") || r.Notes[2] != "{ not json either" {
			t.Errorf("%s notes = %q", name, r.Notes)
		}
		if strings.Contains(name, "after") && r.Notes[len(r.Notes)-1] != "fio: file hash not empty on exit" {
			t.Errorf("%s: trailing text not kept: %q", name, r.Notes)
		}
	}
}

// fioClient follows client.c (fio_client_json_init, handle_ts): the jobs
// of every server under "client_stats" with "hostname" and "port", then an
// "All clients" sum when more than one server reported. Constructed - the
// shared samples have no --client run.
const fioClient = `hostname=node1, be=0, 64-bit, os=Linux, arch=x86-64, fio=fio-3.28, flags=1
hostname=node2, be=0, 64-bit, os=Linux, arch=x86-64, fio=fio-3.28, flags=1
<node1> note: both iodepth >= 1 and synchronous I/O engine are selected

{
  "fio version" : "fio-3.28",
  "timestamp" : 1650000000,
  "time" : "Fri Apr 15 05:20:00 2022",
  "global options" : { "rw" : "randread", "bs" : "4k" },
  "client_stats" : [
    { "jobname" : "job1", "groupid" : 0, "error" : 0,
      "read" : { "io_bytes" : 4096000, "io_kbytes" : 4000, "bw_bytes" : 409600, "bw" : 400, "iops" : 100, "runtime" : 10000, "total_ios" : 1000 },
      "hostname" : "node1", "port" : 8765 },
    { "jobname" : "job1", "groupid" : 0, "error" : 0,
      "read" : { "io_bytes" : 8192000, "io_kbytes" : 8000, "bw_bytes" : 819200, "bw" : 800, "iops" : 200, "runtime" : 10000, "total_ios" : 2000 },
      "hostname" : "node2", "port" : 8765 },
    { "jobname" : "All clients", "groupid" : 0, "error" : 0,
      "read" : { "io_bytes" : 12288000, "io_kbytes" : 12000, "bw_bytes" : 1228800, "bw" : 1200, "iops" : 300, "runtime" : 10000, "total_ios" : 3000 },
      "hostname" : "node2", "port" : 8765 }
  ],
  "disk_util" : [
    { "name" : "sda", "read_ios" : 1000, "write_ios" : 0, "util" : 10.5, "hostname" : "node1", "port" : 8765 },
    { "name" : "sda", "read_ios" : 2000, "write_ios" : 0, "util" : 20.5, "hostname" : "node2", "port" : 8765 }
  ]
}
`

func TestFioClientStats(t *testing.T) {
	r, err := Fio(fioClient)
	if err != nil || !r.OK {
		t.Fatalf("ok=%v err=%v", r.OK, err)
	}
	eq(t, "client", r.Client, true)
	eq(t, "jobs", len(r.Jobs), 2)
	eq(t, "hosts", []string{r.Jobs[0].Hostname, r.Jobs[1].Hostname}, []string{"node1", "node2"})
	eq(t, "port", r.Jobs[0].Port, 8765)
	eq(t, "rw from global options", r.Jobs[0].RW, "randread")
	eq(t, "all clients", fioJobNames(r.AllClients), []string{"All clients"})
	near(t, "ReadBW (All clients not counted twice)", r.ReadBW(), 409600+819200)
	eq(t, "disk hosts", []string{r.DiskUtil[0].Hostname, r.DiskUtil[1].Hostname}, []string{"node1", "node2"})
	eq(t, "notes", len(r.Notes), 3)

	// A failure on one server fails the run and names the server.
	failed := strings.Replace(fioClient, `"error" : 0,
      "read" : { "io_bytes" : 8192000`, `"error" : 110,
      "read" : { "io_bytes" : 8192000`, 1)
	r, err = Fio(failed)
	if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "on node2") || r.OK {
		t.Errorf("failed server: ok=%v err=%v", r.OK, err)
	}

	// With one server fio adds no sum: a job of that name is a job.
	one := `{"fio version": "fio-3.28", "client_stats": [{"jobname": "All clients", "error": 0, "hostname": "h"}]}`
	r, err = Fio(one)
	if err != nil || len(r.Jobs) != 1 || len(r.AllClients) != 0 {
		t.Errorf("single client: jobs=%d all=%d err=%v", len(r.Jobs), len(r.AllClients), err)
	}
}

func TestFioVariants(t *testing.T) {
	// Numbers as floats and quoted strings; fio 2.x units.
	r, err := Fio(`{"fio version": "fio-2.2.10", "jobs": [{"jobname": "j", "error": "0",
		"read": {"io_bytes": 2048.0, "bw": "1024", "iops": "10.5", "runtime": 2000.0, "total_ios": "21",
		"clat": {"mean": "3.5", "percentile": {"99.000000": 7.0, "0.00": 0, "junk": 1, "150": 9}},
		"lat": {"mean": 4}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	fioIO(t, "read", r.Jobs[0].Read, 2048*1024, 1024*1024, 10.5, 2000, 21)
	eq(t, "percentiles", r.Jobs[0].Read.Percentiles, []FioPercentile{{Pct: 99, US: 7}})
	near(t, "clat mean", r.Jobs[0].Read.ClatMeanUS, 3.5)

	// unified_rw_reporting: one "mixed" direction, not counted as read.
	r, err = Fio(`{"fio version": "fio-3.36", "jobs": [{"jobname": "m", "error": 0,
		"mixed": {"io_bytes": 100, "io_kbytes": 0, "bw_bytes": 10, "bw": 0, "iops": 1, "runtime": 10000, "total_ios": 10}}]}`)
	if err != nil || r.Jobs[0].Mixed == nil || r.Jobs[0].Mixed.BWBytes != 10 || r.ReadBW() != 0 {
		t.Errorf("mixed: %+v %v", r.Jobs, err)
	}

	// json+: histogram bins next to the percentiles are ignored.
	plus := strings.Replace(fioSmallWith("0"), `"percentile" : {`, `"bins" : { "1000" : 3, "2048" : 900, "16384" : 97 }, "percentile" : {`, 1)
	r, err = Fio(plus)
	if err != nil || *r.Jobs[0].Read.P99US != 8.192 {
		t.Errorf("json+: %v", err)
	}

	// Two reports appended to one file: both are read.
	r, err = Fio(fioSample(t, fioSB) + "\n" + fioSmallWith("0"))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "documents", r.Documents, 2)
	eq(t, "version (first report)", r.Version, "fio-3.16")
	eq(t, "jobs of both", fioJobNames(r.Jobs), []string{"rand_read_write", "seqread", "seqwrite"})
	eq(t, "iodepth from each report's options", []int{r.Jobs[0].IODepth, r.Jobs[1].IODepth}, []int{64, 32})
	eq(t, "disks of both", len(r.DiskUtil), 2)
	if _, err := Fio(fioSmallWith("0") + fioSmallWith("5")); !errors.Is(err, ErrToolFailed) {
		t.Errorf("an error in the second report: err = %v", err)
	}

	// Malformed: cut short, no jobs, wrong types.
	for name, in := range map[string]string{
		"cut short":  fioSmallWith("0")[:400],
		"no jobs":    `{"fio version": "fio-3.36", "jobs": []}`,
		"jobs typed": `{"fio version": "fio-3.36", "jobs": {"jobname": "x"}}`,
		"read typed": `{"fio version": "fio-3.36", "jobs": [{"jobname": "x", "error": 0, "read": 5}]}`,
	} {
		r, err := Fio(in)
		if !errors.Is(err, ErrMalformed) || r.OK {
			t.Errorf("%s: ok=%v err=%v, want ErrMalformed", name, r.OK, err)
		}
	}
	r, err = Fio(fioSample(t, fioSB) + fioSmallWith("0")[:400])
	if !errors.Is(err, ErrMalformed) || len(r.Jobs) != 1 || r.OK {
		t.Errorf("second report cut short: jobs=%d ok=%v err=%v", len(r.Jobs), r.OK, err)
	}
}

// TestFioLargeInputs: text full of lines opening objects, and reports with
// thousands of jobs, are read (candidate JSON starts are bounded, so the
// search stays linear: BenchmarkFioLargeInputs shows the time).
func TestFioLargeInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	job := `{"jobname": "j", "error": 0, "read": {"io_bytes": 1, "io_kbytes": 0, "bw_bytes": 1, "bw": 0, "iops": 1, "runtime": 1, "total_ios": 1}},`
	inputs := map[string]string{
		"nested opens":    strings.Repeat("{\"a\":\n", 1<<15),
		"brace lines":     strings.Repeat("{\n", 1<<15),
		"many small json": strings.Repeat("{\"a\": 1}\n", 1<<13),
		"many jobs":       `{"fio version": "fio-3.36", "jobs": [` + strings.Repeat(job+"\n", 5000) + job[:len(job)-1] + `]}`,
		"cut many jobs":   `{"fio version": "fio-3.36", "jobs": [` + strings.Repeat("\n"+job, 5000),
	}
	for _, name := range sortedKeys(inputs) {
		r, err := Fio(inputs[name])
		if name == "many jobs" && (err != nil || len(r.Jobs) != 5001) {
			t.Errorf("many jobs: %d jobs, err %v", len(r.Jobs), err)
		}
	}
}

func BenchmarkFioLargeInputs(b *testing.B) {
	text := strings.Repeat("{\"a\":\n", 1<<15)
	for b.Loop() {
		_, _ = Fio(text)
	}
}
