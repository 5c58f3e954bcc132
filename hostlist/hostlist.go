// Package hostlist reads and writes host ranges in the syntax pdsh, Slurm
// and ClusterShell share: "gpu-[001-128]", "node[1-3,6]",
// "10.40.[1-4].[11-42]" (several bracket groups: every combination, the
// last varying fastest), "node[1-10/2]" (a step, as ClusterShell writes
// it). Zero padding is kept: "gpu-[08-10]" is gpu-08, gpu-09, gpu-10.
package hostlist

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// MaxHosts bounds what one pattern may expand to: a typo ("[1-1000000]")
// must be an error, not an inventory of a million nodes.
const MaxHosts = 100000

// Expand is every host a comma-separated list of patterns names, in order.
func Expand(list string) ([]string, error) {
	var out []string
	for _, pat := range splitTop(list) {
		pat = strings.TrimSpace(pat)
		if pat == "" {
			continue
		}
		hosts, err := expandOne(pat)
		if err != nil {
			return nil, err
		}
		out = append(out, hosts...)
		if len(out) > MaxHosts {
			return nil, fmt.Errorf("%q names more than %d hosts", list, MaxHosts)
		}
	}
	return out, nil
}

// IsPattern says whether s holds a range to expand.
func IsPattern(s string) bool { return strings.ContainsAny(s, "[]") }

// splitTop splits at commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func expandOne(pat string) ([]string, error) {
	open := strings.IndexByte(pat, '[')
	if open < 0 {
		if strings.ContainsRune(pat, ']') {
			return nil, fmt.Errorf("%q: a ] without its [", pat)
		}
		return []string{pat}, nil
	}
	end := strings.IndexByte(pat[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: a [ without its ]", pat)
	}
	end += open
	prefix, body, rest := pat[:open], pat[open+1:end], pat[end+1:]
	if strings.ContainsRune(prefix, ']') || strings.ContainsRune(body, '[') {
		return nil, fmt.Errorf("%q: brackets do not nest", pat)
	}
	items, err := rangeItems(pat, body)
	if err != nil {
		return nil, err
	}
	tails, err := expandOne(rest)
	if err != nil {
		return nil, err
	}
	if len(items)*len(tails) > MaxHosts {
		return nil, fmt.Errorf("%q names more than %d hosts", pat, MaxHosts)
	}
	out := make([]string, 0, len(items)*len(tails))
	for _, it := range items {
		for _, t := range tails {
			out = append(out, prefix+it+t)
		}
	}
	return out, nil
}

var rangeRe = regexp.MustCompile(`^(\d+)(?:-(\d+)(?:/(\d+))?)?$`)

// rangeItems reads "1-3,6,08-10,1-9/2".
func rangeItems(pat, body string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(body, ",") {
		r = strings.TrimSpace(r)
		m := rangeRe.FindStringSubmatch(r)
		if m == nil {
			return nil, fmt.Errorf("%q: %q is not a number or a range (like 1-4, 01-16, 1-9/2)", pat, r)
		}
		if m[2] == "" {
			out = append(out, m[1])
			continue
		}
		lo, err1 := strconv.Atoi(m[1])
		hi, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q: %q: numbers too large", pat, r)
		}
		if hi < lo {
			return nil, fmt.Errorf("%q: %q runs backwards", pat, r)
		}
		step := 1
		if m[3] != "" {
			if step, _ = strconv.Atoi(m[3]); step < 1 {
				return nil, fmt.Errorf("%q: %q: the step must be at least 1", pat, r)
			}
		}
		if (hi-lo)/step+1+len(out) > MaxHosts {
			return nil, fmt.Errorf("%q: %q names more than %d hosts", pat, r, MaxHosts)
		}
		// A leading zero pads every number to the first's width.
		width := 0
		if len(m[1]) > 1 && m[1][0] == '0' || len(m[1]) == len(m[2]) && len(m[1]) > 1 {
			width = len(m[1])
		}
		for n := lo; n <= hi; n += step {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

var numbered = regexp.MustCompile(`^(.*?)(\d+)([^0-9]*)$`)

// Compress writes names as few patterns as it can, pdsh's dshbak way:
// names that differ only in their last number share one bracket group
// ("gpu-[03,17-19]"); padding is kept, and a name without a number stays
// as it is. Groups come in the order their first name does.
func Compress(names []string) string {
	type num struct {
		text string
		n    int
	}
	type group struct {
		prefix, suffix string
		nums           []num
	}
	var groups []*group
	byKey := map[string]*group{}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		m := numbered.FindStringSubmatch(name)
		if m == nil || len(m[2]) > 9 {
			g := &group{prefix: name}
			groups = append(groups, g)
			continue
		}
		key := m[1] + "\x00" + m[3]
		g, ok := byKey[key]
		if !ok {
			g = &group{prefix: m[1], suffix: m[3]}
			byKey[key] = g
			groups = append(groups, g)
		}
		n, _ := strconv.Atoi(m[2])
		g.nums = append(g.nums, num{m[2], n})
	}
	var parts []string
	for _, g := range groups {
		switch len(g.nums) {
		case 0:
			parts = append(parts, g.prefix)
			continue
		case 1:
			parts = append(parts, g.prefix+g.nums[0].text+g.suffix)
			continue
		}
		sort.SliceStable(g.nums, func(i, j int) bool { return g.nums[i].n < g.nums[j].n })
		var ranges []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1].n == g.nums[j].n+1 && sameWidth(g.nums[i].text, g.nums[j+1].text) {
				j++
			}
			if j > i {
				ranges = append(ranges, g.nums[i].text+"-"+g.nums[j].text)
			} else {
				ranges = append(ranges, g.nums[i].text)
			}
			i = j + 1
		}
		parts = append(parts, g.prefix+"["+strings.Join(ranges, ",")+"]"+g.suffix)
	}
	return strings.Join(parts, ",")
}

// sameWidth: two numbers one range can hold (a padded one only with its
// width; unpadded ones whatever their length).
func sameWidth(a, b string) bool {
	padded := func(s string) bool { return len(s) > 1 && s[0] == '0' }
	return len(a) == len(b) || !padded(a) && !padded(b)
}
