package parse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Layouts and failure modes the shared samples do not cover, written after
// the tools' own print formats (dcgmi's Diag.cpp stencils, nvidia-smi and
// ibstat messages seen in public bug reports).

func wantErr(t *testing.T, err, sentinel error, contains string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
	if contains != "" && !strings.Contains(err.Error(), contains) {
		t.Errorf("err = %q, want it to mention %q", err, contains)
	}
}

func TestNvidiaSmiListVariants(t *testing.T) {
	t.Run("driver failure", func(t *testing.T) {
		gpus, err := NvidiaSmiList("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n")
		wantErr(t, err, ErrToolFailed, "couldn't communicate")
		eq(t, "gpus", len(gpus), 0)
	})
	t.Run("no devices", func(t *testing.T) {
		gpus := ok(NvidiaSmiList("No devices were found\n")).must(t)
		eq(t, "gpus", gpus, []GPU{})
	})
	t.Run("GPU lost mid-list keeps the others", func(t *testing.T) {
		gpus, err := NvidiaSmiList("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n" +
			"Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n" +
			"GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-c)\n")
		wantErr(t, err, ErrToolFailed, "line 2: Unable to determine the device handle")
		eq(t, "indexes", []int{gpus[0].Index, gpus[1].Index}, []int{0, 2})
	})
	t.Run("old MIG format, name with parentheses, no UUID", func(t *testing.T) {
		gpus := ok(NvidiaSmiList("GPU 0: A100-SXM4-40GB (UUID: GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2)\n" +
			"  MIG 1g.5gb Device 0: (UUID: MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/1/0)\n" +
			"GPU 1: NVIDIA GeForce RTX 3080 (LHR) (UUID: GPU-1)\n" +
			"GPU 2: Tesla T4\n")).must(t)
		eq(t, "MIG", gpus[0].MIG, []MIGDevice{{Index: 0, Profile: "1g.5gb", UUID: "MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/1/0"}})
		eq(t, "name with parentheses", gpus[1].Name, "NVIDIA GeForce RTX 3080 (LHR)")
		eq(t, "no UUID", []string{gpus[2].Name, gpus[2].UUID}, []string{"Tesla T4", ""})
	})
	for name, in := range map[string]string{
		"unterminated UUID":  "GPU 0: NVIDIA A100 (UUID: GPU-x\n",
		"duplicate index":    "GPU 0: A (UUID: GPU-a)\nGPU 0: B (UUID: GPU-b)\n",
		"MIG before any GPU": "  MIG 1g.10gb Device 0: (UUID: MIG-a)\nGPU 0: A (UUID: GPU-a)\n",
		"empty name":         "GPU 0:  (UUID: GPU-a)\n",
		"huge index":         "GPU 99999999999999999999: A (UUID: GPU-a)\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NvidiaSmiList(in)
			wantErr(t, err, ErrMalformed, "line ")
		})
	}
}

func TestNvidiaSmiQueryCSVVariants(t *testing.T) {
	t.Run("nounits and trailing prompt", func(t *testing.T) {
		c := ok(NvidiaSmiQueryCSV("name, memory.total [MiB]\nNVIDIA A10, 23028\nNVIDIA A10, 23028\nuser@host:~$\n")).must(t)
		eq(t, "header", c.Header, []string{"name", "memory.total"})
		eq(t, "rows", c.Rows, []map[string]string{{"name": "NVIDIA A10", "memory.total": "23028"}, {"name": "NVIDIA A10", "memory.total": "23028"}})
	})
	t.Run("spaces lost after commas", func(t *testing.T) {
		c := ok(NvidiaSmiQueryCSV("index,name\n0,NVIDIA A10\n")).must(t)
		eq(t, "row", c.Rows[0], map[string]string{"index": "0", "name": "NVIDIA A10"})
	})
	t.Run("short row mid-table", func(t *testing.T) {
		c, err := NvidiaSmiQueryCSV("index, power.draw [W], timestamp\n0, 16.48 W, t\n0, 17.00 W\n0, 18.00 W, t\n")
		wantErr(t, err, ErrMalformed, "line 3: 2 cells, header has 3")
		eq(t, "rows before it", len(c.Rows), 1)
	})
	t.Run("invalid field", func(t *testing.T) {
		_, err := NvidiaSmiQueryCSV("Field \"memory.totl\" is not a valid field to query.\n")
		wantErr(t, err, ErrToolFailed, "memory.totl")
	})
	t.Run("noheader is not guessable", func(t *testing.T) {
		_, err := NvidiaSmiQueryCSV("NVIDIA A10, 23028 MiB\n")
		wantErr(t, err, ErrNotRecognized, "")
	})
}

func TestNvidiaSmiTopoVariants(t *testing.T) {
	t.Run("dedented capture", func(t *testing.T) {
		tp := ok(NvidiaSmiTopo("GPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\t0-7\t0\nGPU1\tNV4\t X \t0-7\t0\n")).must(t)
		eq(t, "devices", tp.Devices, []string{"GPU0", "GPU1"})
		eq(t, "NVLinked", tp.NVLinked(), true)
		eq(t, "cpu", tp.CPUAffinity, map[string]string{"GPU0": "0-7", "GPU1": "0-7"})
	})
	t.Run("rows missing", func(t *testing.T) {
		tp, err := NvidiaSmiTopo("\tGPU0\tGPU1\tNIC0\nGPU0\t X \tSYS\tPIX\nGPU1\tSYS\t X \tSYS\n")
		wantErr(t, err, ErrMalformed, "no matrix row for column NIC0")
		eq(t, "links kept", tp.Links["GPU0"]["NIC0"], "PIX")
	})
	t.Run("row not in header", func(t *testing.T) {
		_, err := NvidiaSmiTopo("\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU9\tSYS\t X \n")
		wantErr(t, err, ErrMalformed, `line 3: row "GPU9" is not a column of the header`)
	})
	t.Run("short row", func(t *testing.T) {
		_, err := NvidiaSmiTopo("\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\n")
		wantErr(t, err, ErrMalformed, "row GPU1 has 1 link cells, header has 2 devices")
	})
}

func TestNvidiaSmiQVariants(t *testing.T) {
	head := "==============NVSMI LOG==============\n\nDriver Version : 550.54.15\nCUDA Version : 12.4\n\nAttached GPUs : 2\n"
	t.Run("cut after the header", func(t *testing.T) {
		_, err := NvidiaSmiQ(head)
		wantErr(t, err, ErrMalformed, "no GPU section follows")
	})
	t.Run("bad memory unit", func(t *testing.T) {
		_, err := NvidiaSmiQ(head + "GPU 00000000:01:00.0\n    Product Name : X\n    FB Memory Usage\n        Total : 80 GB\n")
		wantErr(t, err, ErrMalformed, "FB Memory Usage.Total")
	})
	t.Run("repeated keys are numbered", func(t *testing.T) {
		q := ok(NvidiaSmiQ(head + "GPU 00000000:01:00.0\n    Product Name : X\n    Processes\n" +
			"        Process ID : 1\n            Name : a\n        Process ID : 2\n            Name : b\n")).must(t)
		f := q.GPUs[0].Fields
		eq(t, "processes", []string{f["Processes.Process ID"], f["Processes.Name"], f["Processes.Process ID#2"], f["Processes.Name#2"]}, []string{"1", "a", "2", "b"})
	})
	t.Run("driver failure", func(t *testing.T) {
		_, err := NvidiaSmiQ("Failed to initialize NVML: Driver/library version mismatch\n")
		wantErr(t, err, ErrToolFailed, "version mismatch")
	})
}

func TestDCGMDiscoveryVariants(t *testing.T) {
	t.Run("switches and CPUs", func(t *testing.T) {
		devs := ok(DCGMDiscovery("1 GPU found.\n+--------+----+\n| GPU ID | Device Information |\n+--------+----+\n" +
			"| 0      | Name: NVIDIA GH200 480GB |\n|        | PCI Bus ID: 00000009:01:00.0 |\n|        | Device UUID: GPU-1 |\n+--------+----+\n" +
			"2 NvSwitches found.\n+-----------+\n| Switch ID |\n+-----------+\n| 0         |\n| 1         |\n+-----------+\n" +
			"1 CPU found.\n+--------+----+\n| CPU ID | Device Information |\n+--------+----+\n| 0      | Name: Grace TH500 |\n+--------+----+\n")).must(t)
		eq(t, "devices", devs, []DCGMDevice{
			{ID: 0, Name: "NVIDIA GH200 480GB", BusID: "00000009:01:00.0", UUID: "GPU-1", Kind: "gpu"},
			{ID: 0, Kind: "nvswitch"}, {ID: 1, Kind: "nvswitch"},
			{ID: 0, Name: "Grace TH500", Kind: "cpu"},
		})
	})
	t.Run("fewer rows than announced", func(t *testing.T) {
		devs, err := DCGMDiscovery("2 GPUs found.\n| GPU ID | Device Information |\n| 0      | Name: A |\n")
		wantErr(t, err, ErrMalformed, "announces 2 gpu entities, the table lists 1")
		eq(t, "devices kept", len(devs), 1)
	})
}

// dcgmi diag table rendering, after the stencils in dcgmi/Diag.cpp.
const (
	diagBorder = "+---------------------------+------------------------------------------------+"
	diagHeader = diagBorder + "\n| Diagnostic                | Result                                         |\n" +
		"+===========================+================================================+"
)

func diagRow(name, value string) string { return fmt.Sprintf("| %-25s | %-46s |", name, value) }

func diagCategory(name string) string {
	seg := "-----  " + name + "  "
	return "+" + seg + strings.Repeat("-", 27-len(seg)) + "+" + strings.Repeat("-", 48) + "+"
}

// diagNote splits msg into 45-character rows as DisplayVerboseInfo does.
func diagNote(name, msg string) []string {
	var rows []string
	for i := 0; i < len(msg); i += diagChunk {
		end := min(i+diagChunk, len(msg))
		label := ""
		if i == 0 {
			label = name
		}
		rows = append(rows, diagRow(label, msg[i:end]))
	}
	return rows
}

func renderDiag(rows ...[]string) string {
	var all []string
	all = append(all, "Successfully ran diagnostic for group.", diagHeader)
	for _, r := range rows {
		all = append(all, r...)
	}
	return strings.Join(append(all, diagBorder), "\n") + "\n"
}

func TestDCGMDiagTextVariants(t *testing.T) {
	// The message wraps mid-word ("R|estart") and right before a space.
	msg := "GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to create CUDA context."
	t.Run("3.x mixed per-GPU result with wrapped warning", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag(
			[]string{diagCategory("Hardware"), diagRow("GPU Memory", "Pass - GPU: 1"), diagRow("", "Fail - GPU: 0")},
			diagNote("Warning", msg),
			diagNote("Info", "GPU 1 GPU to Host bandwidth:  12.33 GB/s, GPU  1 Host to GPU bandwidth:  13.15 GB/s"),
		))).must(t)
		eq(t, "OK", d.OK, false)
		eq(t, "errors", len(d.Errors), 0)
		tt := d.Tests[0]
		eq(t, "test", []string{tt.Category, tt.Name, tt.Status}, []string{"Hardware", "GPU Memory", StatusFail})
		eq(t, "GPUs", tt.GPUs, []DiagGPU{{GPU: 1, Status: StatusPass}, {GPU: 0, Status: StatusFail, Warnings: []string{msg}}})
		eq(t, "info", tt.Info, []string{"GPU 1 GPU to Host bandwidth:  12.33 GB/s, GPU  1 Host to GPU bandwidth:  13.15 GB/s"})
	})
	// A per-GPU result after a multi-row warning is the test's, not more of
	// the warning (it was folded into the message, and the GPU's result
	// lost).
	t.Run("per-GPU results after a wrapped warning", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag(
			[]string{diagCategory("Hardware"), diagRow("Memory", "Fail"), diagRow("", "GPU0: Fail")},
			diagNote("Warning: GPU0", msg),
			[]string{diagRow("", "GPU1: Pass"), diagRow("", "GPU2: Pass")},
			[]string{diagCategory("Stress"), diagRow("Targeted Stress", "Fail - GPU: 3")},
			diagNote("Warning", "GPU 3 Thermal violations totaling 17.0 seconds"),
			[]string{diagRow("", "Pass - GPUs: 0, 1, 2")},
		))).must(t)
		mem := d.Tests[0]
		eq(t, "memory GPUs", mem.GPUs, []DiagGPU{{GPU: 0, Status: StatusFail, Warnings: []string{msg}}, {GPU: 1, Status: StatusPass}, {GPU: 2, Status: StatusPass}})
		stress := d.Tests[1]
		eq(t, "stress GPUs", stress.GPUs, []DiagGPU{{GPU: 3, Status: StatusFail, Warnings: []string{"GPU 3 Thermal violations totaling 17.0 seconds"}},
			{GPU: 0, Status: StatusPass}, {GPU: 1, Status: StatusPass}, {GPU: 2, Status: StatusPass}})
	})
	t.Run("3.x Fail - All attributes the warning to its GPU", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag(
			[]string{diagCategory("Integration"), diagRow("PCIe", "Fail - All")},
			diagNote("Warning", "GPU 3 PCIe replay rate exceeded"),
			[]string{diagCategory("Stress"), diagRow("Targeted Power", "Warn - All"), diagRow("SM Stress", "Skip - All")},
		))).must(t)
		eq(t, "tests", diagSummary(d), []string{"Integration/PCIe=Fail", "Stress/Targeted Power=Warn", "Stress/SM Stress=Skip"})
		eq(t, "PCIe GPUs", d.Tests[0].GPUs, []DiagGPU{{GPU: 3, Status: StatusFail, Warnings: []string{"GPU 3 PCIe replay rate exceeded"}}})
		eq(t, "OK", d.OK, false)
	})
	t.Run("warn and skip alone keep OK", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag([]string{diagCategory("Stress"), diagRow("Targeted Power", "Warn - All"), diagRow("Memtest", "Skip - All")}))).must(t)
		eq(t, "OK", d.OK, true)
	})
	t.Run("deployment warning without a GPU becomes info", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag(
			[]string{"|-----  Deployment  --------+------------------------------------------------|", diagRow("Persistence Mode", "Fail")},
			diagNote("Warning", `Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.`),
		))).must(t)
		eq(t, "info", d.Tests[0].Info, []string{`Warning: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.`})
	})
	t.Run("4.x per-entity rows and Warning: GPU1", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag(
			[]string{"|-----  Metadata  ----------+------------------------------------------------|", diagRow("DCGM Version", "4.2.3"),
				diagRow("Driver Version Detected", "570.148.08"), diagRow("GPU Device IDs Detected", "26b9, 26b9"),
				"|-----  Deployment  --------+------------------------------------------------|",
				diagRow("software", "Fail"), diagRow("", "GPU0: Pass"), diagRow("", "GPU1: Fail"), diagRow("", "CPU0: Pass")},
			diagNote("Warning: GPU1", "Persistence mode for GPU 1 is disabled."),
		))).must(t)
		eq(t, "version", d.Version, "4.2.3")
		tt := d.Tests[0]
		eq(t, "status", tt.Status, StatusFail)
		eq(t, "GPUs", tt.GPUs, []DiagGPU{{GPU: 0, Status: StatusPass}, {GPU: 1, Status: StatusFail, Warnings: []string{"Persistence mode for GPU 1 is disabled."}}})
		eq(t, "info", tt.Info, []string{"CPU0: Pass"})
	})
	t.Run("wrapped GPU list", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag([]string{diagCategory("Hardware"),
			diagRow("GPU Memory", "Pass - GPUs: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"), diagRow("", "11, 12")}))).must(t)
		eq(t, "GPUs", len(d.Tests[0].GPUs), 13)
	})
	t.Run("unknown status", func(t *testing.T) {
		d := ok(DCGMDiag(renderDiag([]string{diagCategory("Hardware"), diagRow("GPU Memory", "Exploded")}))).must(t)
		eq(t, "status kept as printed", d.Tests[0].Status, "Exploded")
		eq(t, "OK", d.OK, false)
		if len(d.Errors) != 1 || !strings.Contains(d.Errors[0], `unrecognized status "Exploded"`) {
			t.Errorf("errors = %q", d.Errors)
		}
	})
	t.Run("error only", func(t *testing.T) {
		d := ok(DCGMDiag("Error: Unable to complete diagnostic for group 2147483647. Return: (-21) Host engine connection invalid/disconnected.\n")).must(t)
		eq(t, "OK", d.OK, false)
		eq(t, "tests", len(d.Tests), 0)
		eq(t, "errors", len(d.Errors), 1)
	})
}

const diag3xJSON = `{
	"DCGM GPU Diagnostic" : {
		"test_categories" : [
			{ "category" : "Deployment", "tests" : [
				{ "name" : "Denylist", "results" : [ { "status" : "Pass" } ] },
				{ "name" : "Persistence Mode", "results" : [ { "status" : "Fail", "gpu_ids" : 0,
					"warnings" : [ { "warnings" : "Persistence mode for GPU 0 is disabled.", "error_id" : 29 } ] } ] }
			] },
			{ "category" : "Hardware", "tests" : [
				{ "name" : "GPU Memory", "results" : [
					{ "gpu_ids" : "0", "status" : "Pass", "info" : "Allocated 95% of memory" },
					{ "gpu_ids" : "1", "status" : "Fail", "warnings" : [ { "warning" : "GPU 1 memory errors", "error_id" : 12 } ] }
				] }
			] }
		]
	},
	"version" : "3.3.5",
	"Driver Version Detected" : "550.54.15",
	"GPU Device IDs" : [ "20b5", "20b5" ]
}`

const diag4xJSON = `{
	"DCGM Diagnostic" : { "test_categories" : [
		{ "category" : "Hardware", "tests" : [
			{ "name" : "memory",
			  "results" : [
				{ "entity_group" : "GPU", "entity_group_id" : 1, "entity_id" : 0, "status" : "Pass", "info" : [ "ok" ] },
				{ "entity_group" : "GPU", "entity_group_id" : 1, "entity_id" : 1, "status" : "Warn",
				  "warnings" : [ { "warning" : "GPU 1 is hot", "error_id" : 1 } ] },
				{ "entity_group" : "CPU", "entity_group_id" : 7, "entity_id" : 0, "status" : "Pass" }
			  ],
			  "test_summary" : { "status" : "Warn", "warnings" : [ { "warning" : "GPU 1 is hot" } ] } }
		] }
	] },
	"metadata" : { "version" : "4.1.0", "Driver Version Detected" : "570.86.15" }
}`

func TestDCGMDiagJSONVariants(t *testing.T) {
	t.Run("3.x document", func(t *testing.T) {
		d := ok(DCGMDiag(diag3xJSON)).must(t)
		checkDiagHead(t, d, false, "3.3.5", "json", 0)
		eq(t, "tests", diagSummary(d), []string{"Deployment/Denylist=Pass", "Deployment/Persistence Mode=Fail", "Hardware/GPU Memory=Fail"})
		eq(t, "persistence GPUs", d.Tests[1].GPUs, []DiagGPU{{GPU: 0, Status: StatusFail, Warnings: []string{"Persistence mode for GPU 0 is disabled."}}})
		eq(t, "memory GPUs", d.Tests[2].GPUs, []DiagGPU{{GPU: 0, Status: StatusPass}, {GPU: 1, Status: StatusFail, Warnings: []string{"GPU 1 memory errors"}}})
		eq(t, "memory info", d.Tests[2].Info, []string{"GPU0: Allocated 95% of memory"})
	})
	t.Run("4.x document", func(t *testing.T) {
		d := ok(DCGMDiag(diag4xJSON)).must(t)
		checkDiagHead(t, d, true, "4.1.0", "json", 0)
		tt := d.Tests[0]
		eq(t, "test", []string{tt.Category, tt.Name, tt.Status}, []string{"Hardware", "memory", StatusWarn})
		eq(t, "GPUs", tt.GPUs, []DiagGPU{{GPU: 0, Status: StatusPass}, {GPU: 1, Status: StatusWarn, Warnings: []string{"GPU 1 is hot"}}})
		eq(t, "info (summary warning not repeated)", tt.Info, []string{"GPU0: ok", "CPU0: Pass"})
	})
	t.Run("noise around the document", func(t *testing.T) {
		d := ok(DCGMDiag("$ dcgmi diag -r 2 -j\n" + diag4xJSON + "\nuser@node:~$ \n")).must(t)
		eq(t, "same as clean", d, ok(DCGMDiag(diag4xJSON)).must(t))
	})
	t.Run("truncated document", func(t *testing.T) {
		cut := diag3xJSON[:strings.Index(diag3xJSON, `"category" : "Hardware"`)]
		d := ok(DCGMDiag(cut)).must(t)
		eq(t, "tests before the cut", diagSummary(d), []string{"Deployment/Denylist=Pass", "Deployment/Persistence Mode=Fail"})
		if len(d.Errors) != 1 || !strings.Contains(d.Errors[0], "truncated") {
			t.Errorf("errors = %q, want one describing the truncation", d.Errors)
		}
	})
	t.Run("truncated passing run is not OK", func(t *testing.T) {
		cut := diag4xJSON[:strings.Index(diag4xJSON, `"metadata"`)]
		d := ok(DCGMDiag(cut)).must(t)
		eq(t, "OK", d.OK, false)
		eq(t, "tests", len(d.Tests), 1)
	})
	t.Run("runtime error", func(t *testing.T) {
		d := ok(DCGMDiag(`{ "DCGM GPU Diagnostic" : { "runtime_error" : "Error: Diagnostic could not be run while DCGM is paused.", "version" : "3.3.5" } }`)).must(t)
		checkDiagHead(t, d, false, "3.3.5", "json", 1)
		eq(t, "error", d.Errors[0], "runtime_error: Error: Diagnostic could not be run while DCGM is paused.")
	})
}

func TestIBVariants(t *testing.T) {
	t.Run("ibstat port list cut short", func(t *testing.T) {
		devs, err := IBStat("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 2\n\tPort 1:\n\t\tState: Active\n\t\tRate: 400\n")
		wantErr(t, err, ErrMalformed, "declares 2 ports but lists 1")
		eq(t, "kept", len(devs), 1)
	})
	t.Run("ibstat port field outside a port", func(t *testing.T) {
		_, err := IBStat("CA 'mlx5_0'\n\tState: Active\n")
		wantErr(t, err, ErrMalformed, "line 2")
	})
	t.Run("ibstat panics before any CA", func(t *testing.T) {
		devs, err := IBStat("ibpanic: [1234] main: can't list IB device names: (2) No such file or directory\n")
		wantErr(t, err, ErrToolFailed, "can't list IB device names")
		eq(t, "devices", len(devs), 0)
	})
	t.Run("ibv_devinfo without devices", func(t *testing.T) {
		devs := ok(IBVDevinfo("No IB devices found\n")).must(t)
		eq(t, "devices", devs, []IBDevice{})
	})
	t.Run("ibv_devinfo library failure", func(t *testing.T) {
		_, err := IBVDevinfo("Failed to get IB devices list: Function not implemented\n")
		wantErr(t, err, ErrToolFailed, "Function not implemented")
	})
	t.Run("both tools describe one HCA the same way", func(t *testing.T) {
		stat := ok(IBStat("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n" +
			"\tNode GUID: 0x946dae0300cde72c\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n" +
			"\t\tBase lid: 75\n\t\tLink layer: InfiniBand\n")).must(t)
		dev := ok(IBVDevinfo("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n" +
			"\tnode_guid:\t\t\t946d:ae03:00cd:e72c\n\tvendor_id:\t\t\t0x02c9\n\tvendor_part_id:\t\t\t4129\n" +
			"\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tport_lid:\t\t75\n" +
			"\t\t\tlink_layer:\t\tInfiniBand\n\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t100.0 Gbps (128)\n" +
			"\t\t\tphys_state:\t\tLINK_UP (5)\n")).must(t)
		eq(t, "ibv_devinfo vs ibstat", dev, stat)
	})
}
