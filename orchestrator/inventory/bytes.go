package inventory

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// byteUnits are the suffixes a size may carry, lower-cased: decimal (k, KB,
// G, ...) and binary (KiB, Gi, ...), as providers and tools mix both.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
	"p": 1e15, "pb": 1e15, "pi": 1 << 50, "pib": 1 << 50,
}

// decimalNumber is what a size's number may look like. The exponent is
// bounded: big.Rat would otherwise build 10^999999999 for "1e999999999".
var decimalNumber = regexp.MustCompile(`^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,2})?$`)

// ParseBytes reads a size: "1GiB", "512MiB", "8G", "1.5 TB", "1e9" or a
// plain number of bytes. Units are case-insensitive; K, M, G, T, P (with
// or without B) are powers of 1000, Ki..Pi (with or without B) of 1024.
func ParseBytes(s string) (Bytes, error) {
	in := strings.TrimSpace(s)
	if strings.HasPrefix(in, "-") {
		return 0, fmt.Errorf("must not be negative, got %q", short(s))
	}
	num, unit := splitUnit(in)
	r, err := parseDecimal(strings.TrimSpace(num))
	if err != nil {
		return 0, fmt.Errorf("expected a size such as \"1GiB\", \"512MiB\" or \"8G\", got %q", short(s))
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("expected a size such as \"1GiB\", \"512MiB\" or \"8G\", got %q: unknown unit %q", short(s), short(unit))
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of bytes", short(s))
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%q is too large", short(s))
	}
	return Bytes(r.Num().Int64()), nil
}

// splitUnit splits "512MiB" into "512" and "MiB": the unit is the trailing
// run of letters ("1e9" has none: it ends in a digit).
func splitUnit(s string) (num, unit string) {
	i := len(s)
	for i > 0 && isLetter(s[i-1]) {
		i--
	}
	return s[:i], s[i:]
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// parseDecimal reads a non-negative decimal number exactly, so that
// "1.5GiB" is exactly 1610612736 bytes.
func parseDecimal(s string) (*big.Rat, error) {
	if !decimalNumber.MatchString(s) {
		return nil, fmt.Errorf("not a number: %q", s)
	}
	r, ok := new(big.Rat).SetString(strings.TrimPrefix(s, "+"))
	if !ok {
		return nil, fmt.Errorf("not a number: %q", s)
	}
	return r, nil
}

// String writes b in the unit that divides it exactly with the smallest
// count ("1GiB", "8GB", "1000B"), so a size prints as it was meant.
func (b Bytes) String() string {
	n := int64(b)
	best, bestUnit := n, "B"
	for _, u := range []struct {
		name string
		size int64
	}{
		{"KB", 1e3}, {"KiB", 1 << 10}, {"MB", 1e6}, {"MiB", 1 << 20}, {"GB", 1e9},
		{"GiB", 1 << 30}, {"TB", 1e12}, {"TiB", 1 << 40}, {"PB", 1e15}, {"PiB", 1 << 50},
	} {
		if n > 0 && n%u.size == 0 && n/u.size < best {
			best, bestUnit = n/u.size, u.name
		}
	}
	return strconv.FormatInt(best, 10) + bestUnit
}
