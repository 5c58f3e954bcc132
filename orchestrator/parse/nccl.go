package parse

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// NCCL is what one nccl-tests run (all_reduce_perf and friends) reported,
// read from its stdout (any version from 2.0 to 2.19) or from its -J JSON
// file. The JSON field names are part of the CLI's output
// (`gpuaccept parse nccl-tests FILE`); do not rename them.
type NCCL struct {
	// OK is false when the run reported any failure: a row with #wrong > 0,
	// "Out of bounds values : N FAILED", "Avg bus bandwidth : X FAILED", an
	// error line from nccl-tests, NCCL (WARN) or the launcher, or a table
	// that stops before its footer.
	OK bool `json:"ok"`
	// Collective is "all_reduce", "all_gather", ... taken from the
	// "# Collective test starting:" line or the command line when printed,
	// otherwise inferred from the columns (see ncclInferCollective).
	Collective string `json:"collective"`
	// Version is the nccl-tests version ("2.18.2"), printed since 2.17.4.
	Version string `json:"version"`
	// NCCLVersion is the NCCL library version ("2.30.7").
	NCCLVersion string            `json:"nccl_version,omitempty"`
	Ranks       []NCCLRank        `json:"ranks"`
	Rows        []NCCLRow         `json:"rows"`
	AvgBusBW    float64           `json:"avg_busbw"`
	OutOfBounds int               `json:"out_of_bounds"`
	Errors      []NCCLError       `json:"errors"`
	Params      map[string]string `json:"params,omitempty"`
	// Algorithms keeps, verbatim, the NCCL INFO lines that name the
	// algorithm or protocol NCCL used or was told to use.
	Algorithms []string `json:"algorithms,omitempty"`
}

// NCCLRank is one "#  Rank  0 Group  0 Pid 1234 on host device 0 [..] name" line.
type NCCLRank struct {
	Rank   int    `json:"rank"`
	Host   string `json:"host"`
	Device int    `json:"device"`
	Name   string `json:"name,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Group  int    `json:"group,omitempty"`
}

// NCCLRow is one message size of the results table.
type NCCLRow struct {
	Size  int64  `json:"size"`
	Count int64  `json:"count"`
	Type  string `json:"type"`
	Redop string `json:"redop,omitempty"`
	// Root is nil when the table has no root column.
	Root *int       `json:"root,omitempty"`
	OOP  NCCLResult `json:"oop"`
	IP   NCCLResult `json:"ip"`
}

// NCCLResult is the out-of-place or in-place half of a row.
type NCCLResult struct {
	TimeUS float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw"`
	BusBW  float64 `json:"busbw"`
	// Wrong is the "#wrong" count; nil when the tool printed N/A (validation
	// off, or no in-place check as in sendrecv) or the table has the old
	// float "error" column instead.
	Wrong *int64 `json:"wrong"`
	// Error is the old (≤ 2.10) max-deviation column, e.g. 2e-07; nil when
	// absent or N/A.
	Error *float64 `json:"error,omitempty"`
}

// NCCLError is a failure reported by nccl-tests, NCCL or the launcher.
type NCCLError struct {
	Host    string `json:"host,omitempty"`
	Message string `json:"message"`
}

const ncclTool = "nccl-tests"

// NCCLTests parses nccl-tests output: the text a *_perf binary prints
// (possibly under mpirun --tag-output or srun -l, interleaved with NCCL
// INFO and MPI lines) or the JSON file written with -J.
//
// Errors: ErrNotRecognized when the text is not nccl-tests output;
// ErrToolFailed when nccl-tests, NCCL or the launcher reported an error;
// ErrMalformed when a line could not be read or the output is truncated.
// Whatever was parsed is returned next to ErrToolFailed and ErrMalformed.
func NCCLTests(text string) (NCCL, error) {
	if ncclLooksJSON(text) {
		return ncclFromJSON(text)
	}
	return ncclFromText(text)
}

// ncclFinish fills what both input forms derive the same way: the
// collective when nothing named it, and the OK verdict.
func ncclFinish(n *NCCL, complete bool, hasRedopCol bool) {
	if n.Collective == "" {
		n.Collective = ncclInferCollective(n, hasRedopCol)
	}
	n.OK = complete && len(n.Rows) > 0 && n.OutOfBounds == 0 && len(n.Errors) == 0 && !ncclAnyWrong(n.Rows)
}

// ncclAnyWrong reports a row whose data check found corrupted elements.
func ncclAnyWrong(rows []NCCLRow) bool {
	for _, r := range rows {
		for _, w := range []*int64{r.OOP.Wrong, r.IP.Wrong} {
			if w != nil && *w != 0 {
				return true
			}
		}
	}
	return false
}

// ncclVersionFromCode turns NCCL_VERSION_CODE into "major.minor.patch".
// NCCL changed the encoding in 2.9: before it was major*1000+minor*100+patch
// (2406 = 2.4.6), since then major*10000+minor*100+patch (23007 = 2.30.7).
func ncclVersionFromCode(code int64) string {
	switch {
	case code <= 0:
		return ""
	case code >= 10000:
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	default:
		return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
	}
}

// ncclTypeSize is the element size of the nccl-tests type names, used to
// tell a collective from the bytes-per-element ratio of its rows.
var ncclTypeSize = map[string]int64{
	"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1,
	"half": 2, "float16": 2, "bfloat16": 2, "bf16": 2,
	"int32": 4, "int": 4, "uint32": 4, "float": 4, "float32": 4,
	"int64": 8, "uint64": 8, "double": 8, "float64": 8,
}

// ncclInferCollective guesses the collective from the table alone, for the
// older outputs that never print the binary's name. It uses what differs
// between the test programs:
//   - bytes per element: size = count*typesize for all_reduce, broadcast,
//     reduce and sendrecv, but count*typesize*nranks for all_gather,
//     reduce_scatter and alltoall;
//   - a root >= 0 only for rooted collectives (broadcast, reduce);
//   - busbw/algbw = 2(n-1)/n > 1 only for all_reduce;
//   - the redop column: absent for old all_gather, blank for old alltoall.
//
// It returns "" when the columns do not decide (2-rank all_reduce and
// sendrecv look the same when validation is off).
func ncclInferCollective(n *NCCL, hasRedopCol bool) string {
	r, ok := ncclLargestRow(n.Rows)
	if !ok {
		return ""
	}
	ts, known := ncclTypeSize[strings.ToLower(r.Type)]
	// The bound keeps count*ts from overflowing (to 0 or negative) on junk.
	if !known || r.Count > math.MaxInt64/ts || r.Size%(r.Count*ts) != 0 {
		return ""
	}
	redop := r.Redop != "" && r.Redop != "none"
	if r.Size/(r.Count*ts) > 1 {
		switch {
		case r.Root != nil && *r.Root >= 0:
			return ""
		case redop:
			return "reduce_scatter"
		case !hasRedopCol:
			return "all_gather"
		case r.Redop == "":
			return "alltoall"
		}
		return ""
	}
	switch {
	case r.Root != nil && *r.Root >= 0 && redop:
		return "reduce"
	case r.Root != nil && *r.Root >= 0:
		return "broadcast"
	case r.OOP.AlgBW > 0 && r.OOP.BusBW/r.OOP.AlgBW > 1.05:
		return "all_reduce"
	case ncclInPlaceUnchecked(n.Rows):
		return "sendrecv"
	case redop:
		return "all_reduce"
	}
	return ""
}

// ncclLargestRow picks the largest non-empty message: its bandwidths are
// far from the rounding that makes small rows print 0.00.
func ncclLargestRow(rows []NCCLRow) (NCCLRow, bool) {
	var best NCCLRow
	found := false
	for _, r := range rows {
		if r.Size > 0 && r.Count > 0 && (!found || r.Size > best.Size) {
			best, found = r, true
		}
	}
	return best, found
}

// ncclInPlaceUnchecked: sendrecv checks its out-of-place result but prints
// N/A for in-place, which no other collective does.
func ncclInPlaceUnchecked(rows []NCCLRow) bool {
	for _, r := range rows {
		if r.OOP.Wrong != nil && r.IP.Wrong == nil && r.IP.Error == nil {
			return true
		}
	}
	return false
}

// ncclParseInt reads a decimal integer token.
func ncclParseInt(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
