package phases

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseCkptWrite reads checkpoint.sh write's output; dir is the node's
// checkpoint directory.
func parseCkptWrite(out, dir string) (CkptSave, error) {
	res := CkptSave{Dir: dir}
	lines, err := ckptLines(out)
	for _, f := range lines {
		switch f[0] {
		case "generator":
			res.Generator = f[1]
		case "hasher":
			res.Hasher = f[1]
		case "free":
			res.Free, _ = strconv.ParseInt(f[1], 10, 64)
		case "ceiling":
			res.CeilingGBs = ckptRate(f)
		case "shard":
			s, serr := ckptShardLine(f, dir)
			if serr != nil {
				return res, serr
			}
			res.Shards = append(res.Shards, s)
			res.Bytes += s.Bytes
		case "manifest":
			res.Manifest = f[1]
		case "seconds":
			res.Seconds, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if res.Seconds > 0 {
		res.GBs = float64(res.Bytes) / 1e9 / res.Seconds
	}
	return res, err
}

// parseCkptRestore reads checkpoint.sh restore's output; dir is the
// writer's checkpoint directory.
func parseCkptRestore(out, dir string) (CkptRestore, error) {
	res := CkptRestore{Dir: dir}
	lines, err := ckptLines(out)
	for _, f := range lines {
		switch f[0] {
		case "hasher":
			res.Hasher = f[1]
		case "expect":
			k, _ := strconv.Atoi(f[1])
			if k >= 0 && k < 1<<16 && len(f) > 2 {
				for len(res.Manifest) <= k {
					res.Manifest = append(res.Manifest, "")
				}
				res.Manifest[k] = f[2]
			}
		case "ceiling":
			res.CeilingGBs = ckptRate(f)
		case "cache":
			res.Cache = f[1]
			if len(f) > 2 {
				if n, perr := strconv.ParseInt(f[2], 10, 64); perr == nil {
					res.Resident = &n
				}
			}
		case "shard":
			s, serr := ckptShardLine(f, dir)
			if serr != nil {
				return res, serr
			}
			res.Shards = append(res.Shards, s)
			res.Bytes += s.Bytes
		case "missing":
			k, _ := strconv.Atoi(f[1])
			res.Shards = append(res.Shards, CkptShard{Index: k, File: fmt.Sprintf("%s/shard-%d.bin", dir, k),
				Error: strings.Join(f[2:], " ")})
		case "seconds":
			res.Seconds, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if res.Seconds > 0 {
		res.GBs = float64(res.Bytes) / 1e9 / res.Seconds
	}
	return res, err
}

// ckptLines splits the script's output into fields, one fact a line; a
// known word without its value is an error.
func ckptLines(out string) ([][]string, error) {
	want := map[string]int{"generator": 2, "hasher": 2, "free": 2, "ceiling": 3, "shard": 5, "manifest": 2, "seconds": 2,
		"expect": 3, "cache": 2, "missing": 2}
	var lines [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, known := want[f[0]]
		if !known {
			continue
		}
		if len(f) < n {
			return lines, fmt.Errorf("checkpoint: output not understood: %q", line)
		}
		lines = append(lines, f)
	}
	return lines, nil
}

func ckptShardLine(f []string, dir string) (CkptShard, error) {
	k, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	secs, err3 := strconv.ParseFloat(f[4], 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return CkptShard{}, fmt.Errorf("checkpoint: output not understood: %q: %w", strings.Join(f, " "), err)
	}
	return CkptShard{Index: k, File: fmt.Sprintf("%s/shard-%d.bin", dir, k), Bytes: n, SHA256: f[3], Seconds: secs}, nil
}

// ckptRate: GB/s of a "ceiling BYTES SECONDS" line.
func ckptRate(f []string) float64 {
	n, _ := strconv.ParseFloat(f[1], 64)
	s, _ := strconv.ParseFloat(f[2], 64)
	if s <= 0 {
		return 0
	}
	return n / 1e9 / s
}
