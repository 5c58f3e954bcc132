package parse

import (
	"fmt"
	"math"
	"strings"
)

// row reads one results line. Columns are taken by token, not by text
// position: nccl-tests pads with printf widths that values outgrow (times
// of 100000 us and more, a 17 GB size) and log viewers re-flow the header,
// but values are always separated by at least one space.
//
// The tail (two halves of time algbw busbw #wrong|error) has a fixed token
// count known from the header; what precedes it is size, count, type and
// then 0-2 of redop and root. Those are told apart by value, not position,
// because old alltoall prints an all-blank redop that vanishes from the
// token list.
func (p *ncclText) row(f []string) (NCCLRow, string) {
	c := p.cols
	if c == nil {
		c = &ncclDefaultColumns
	}
	tail := len(c.oop) + len(c.ip)
	if c.timestamp {
		tail += 2
	}
	lead := len(f) - tail
	if lead < 3 {
		return NCCLRow{}, fmt.Sprintf("row has %d columns, want at least %d (truncated row?)", len(f), tail+3)
	}
	if lead > 5 {
		return NCCLRow{}, fmt.Sprintf("row has %d columns, more than the header's %d allow", len(f), tail+5)
	}
	r, err := ncclRowLead(f[:lead])
	if err != "" {
		return NCCLRow{}, err
	}
	if r.OOP, err = ncclHalf(c.oop, f[lead:lead+len(c.oop)]); err != "" {
		return NCCLRow{}, "out-of-place: " + err
	}
	if r.IP, err = ncclHalf(c.ip, f[lead+len(c.oop):lead+len(c.oop)+len(c.ip)]); err != "" {
		return NCCLRow{}, "in-place: " + err
	}
	return r, ""
}

// ncclRowLead reads size, count, type and the optional redop and root.
func ncclRowLead(f []string) (NCCLRow, string) {
	var r NCCLRow
	var ok bool
	if r.Size, ok = ncclParseInt(f[0]); !ok || r.Size < 0 {
		return r, "bad size " + f[0]
	}
	if r.Count, ok = ncclParseInt(f[1]); !ok || r.Count < 0 {
		return r, "bad count " + f[1]
	}
	r.Type = f[2]
	if _, isNum := ncclFloat(r.Type); isNum {
		return r, "bad type " + r.Type
	}
	for _, tok := range f[3:] {
		if root, isInt := ncclAtoi(tok); isInt {
			if r.Root != nil {
				return r, "two root values"
			}
			r.Root = &root
			continue
		}
		if r.Redop != "" || r.Root != nil { // redop is printed before root
			return r, "unexpected value " + tok
		}
		r.Redop = tok
	}
	return r, ""
}

// ncclHalf reads one half of a row by the header's column names. Columns
// it has no field for (the per-iteration statistics of 2.19) are skipped.
func ncclHalf(names, vals []string) (NCCLResult, string) {
	var res NCCLResult
	for i, name := range names {
		v := vals[i]
		var ok bool
		switch name {
		case "time", "cputime":
			res.TimeUS, ok = ncclFloat(v)
		case "algbw":
			res.AlgBW, ok = ncclFloat(v)
		case "busbw":
			res.BusBW, ok = ncclFloat(v)
		case "#wrong", "wrong":
			res.Wrong, ok = ncclWrong(v)
		case "error":
			res.Error, ok = ncclErrorCol(v)
		default:
			ok = true
		}
		if !ok {
			return res, fmt.Sprintf("bad %s value %q", name, v)
		}
	}
	return res, ""
}

// ncclWrong reads "#wrong": printed with %6g of a double, so a large
// count shows as "1.23457e+06"; "N/A" when the check was not run.
func ncclWrong(v string) (*int64, bool) {
	if strings.EqualFold(v, "N/A") {
		return nil, true
	}
	f, ok := ncclFloat(v)
	if !ok || f < 0 || f > math.MaxInt64/2 {
		return nil, false
	}
	n := int64(f)
	return &n, true
}

// ncclErrorCol reads the old float "error" column (max deviation).
func ncclErrorCol(v string) (*float64, bool) {
	if strings.EqualFold(v, "N/A") {
		return nil, true
	}
	f, ok := ncclFloat(v)
	if !ok {
		return nil, false
	}
	return &f, true
}

// ncclToolFailed wraps ErrToolFailed with the first reported failure.
func ncclToolFailed(errs []NCCLError) error {
	first := errs[0].Message
	if errs[0].Host != "" {
		first = errs[0].Host + ": " + first
	}
	more := ""
	if len(errs) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return fmt.Errorf("%s: %w: %s%s", ncclTool, ErrToolFailed, clip(first), more)
}
