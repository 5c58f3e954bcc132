package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// decode reads data with viper, applies the environment overrides and
// decodes strictly into an Inventory. Type errors are recorded in c; the
// Inventory is returned, partly filled, whenever viper could read the
// file, so that validation can still report what else is wrong.
func decode(data []byte, c *collector, env lookupEnv) *Inventory {
	v := viper.New()
	v.SetConfigType("yaml")
	if err := guard(func() error { return v.ReadConfig(bytes.NewReader(data)) }); err != nil {
		// The tree walk has read the same bytes with the same parser;
		// what viper refuses (duplicate keys) is already reported.
		if c.empty() {
			c.addAt(0, "", "cannot read: "+err.Error())
		}
		return nil
	}
	applyEnv(v, c, env)
	var inv Inventory
	err := guard(func() error { return v.UnmarshalExact(&inv, strictDecoding) })
	if err != nil {
		reportDecodeError(err, c)
	}
	return &inv
}

// strictDecoding turns off viper's weak typing ("8" is not an int, "yes"
// is not a bool) and replaces its hooks with ours.
func strictDecoding(dc *mapstructure.DecoderConfig) {
	dc.WeaklyTypedInput = false
	dc.DecodeHook = strictHook
	dc.ErrorUnused = true
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	bytesType     = reflect.TypeFor[Bytes]()
	autoType      = reflect.TypeFor[Auto]()
	slurmTimeType = reflect.TypeFor[SlurmTime]()
)

// strictHook converts the strings that stand for durations and sizes, and
// stops the decoder's silent conversions: it truncates 8.5 to an int and
// wraps an out-of-range integer.
func strictHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	switch {
	case to == durationType:
		return toDuration(data)
	case to == slurmTimeType:
		return toSlurmTime(data)
	case to == bytesType:
		return toBytes(data)
	case to == autoType:
		// true and false are YAML's booleans; auto is a word.
		if b, ok := data.(bool); ok {
			return fmt.Sprint(b), nil
		}
	case isInt(to.Kind()):
		return toInt(data)
	}
	return data, nil
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

const durationExample = `a duration such as "30s", "5m" or "1h30m"`

func toDuration(data any) (any, error) {
	switch d := data.(type) {
	case string:
		s := strings.TrimSpace(d)
		v, err := time.ParseDuration(s)
		switch {
		case err == nil:
			return v, nil
		case isDigits(s) && s != "0":
			return nil, fmt.Errorf("expected %s, got %q: %s", durationExample, short(d), needsUnit(s))
		}
		return nil, fmt.Errorf("expected %s, got %q", durationExample, short(d))
	case int:
		if d == 0 {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("expected %s, got %d: %s", durationExample, d, needsUnit(fmt.Sprint(d)))
	case float64, uint64:
		return nil, fmt.Errorf("expected %s, got %v: a duration needs a unit", durationExample, d)
	}
	return data, nil
}

// needsUnit explains a bare number: guessing seconds (or nanoseconds, as
// Go would) would be wrong for someone.
func needsUnit(n string) string {
	return fmt.Sprintf("a duration needs a unit, e.g. %q", short(n)+"s")
}

func toBytes(data any) (any, error) {
	switch d := data.(type) {
	case string:
		return ParseBytes(d)
	case int:
		if d < 0 {
			return nil, fmt.Errorf("must not be negative, got %d", d)
		}
		return Bytes(d), nil
	case float64:
		return floatBytes(d)
	case uint64:
		return nil, fmt.Errorf("%d bytes is too large", d)
	}
	return data, nil
}

// floatBytes accepts YAML's 1e9 (a float) when it is a whole number.
func floatBytes(f float64) (Bytes, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("expected a size, got %v", f)
	case f < 0:
		return 0, fmt.Errorf("must not be negative, got %v", f)
	case f != math.Trunc(f):
		return 0, fmt.Errorf("a size in bytes must be a whole number, got %v", f)
	case f >= math.MaxInt64:
		return 0, fmt.Errorf("%v bytes is too large", f)
	}
	return Bytes(f), nil
}

func toInt(data any) (any, error) {
	switch d := data.(type) {
	case float64:
		return nil, fmt.Errorf("expected an integer, got %v", d)
	case uint64:
		return nil, fmt.Errorf("%d is too large", d)
	}
	return data, nil
}

// reportDecodeError records each of the decoder's errors against its key,
// unless the tree walk already reported that key or a key above it.
func reportDecodeError(err error, c *collector) {
	var leaves []error
	flatten(err, &leaves)
	for _, leaf := range leaves {
		var de *mapstructure.DecodeError
		if !errors.As(leaf, &de) {
			if c.empty() {
				c.addAt(0, "", leaf.Error())
			}
			continue
		}
		key := decoderPath(de.Name())
		inner := de.Unwrap()
		if rest, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
			reportUnknownKeys(key, rest, c)
			continue
		}
		if c.blocked(c.idx.canonical(key)) {
			continue
		}
		c.add(key, decodeMessage(key, inner, c))
	}
}

// flatten collects the leaves of a tree of joined and wrapped errors; each
// leaf is one key's problem.
func flatten(err error, out *[]error) {
	switch e := err.(type) {
	case *mapstructure.DecodeError:
		*out = append(*out, e)
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			flatten(x, out)
		}
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			flatten(inner, out)
		} else {
			*out = append(*out, err)
		}
	default:
		*out = append(*out, err)
	}
}

// decoderPath turns the decoder's map keys, labels[rack], into the dotted
// form used everywhere else, labels.rack; list indexes stay.
func decoderPath(name string) string {
	var b strings.Builder
	for name != "" {
		i := strings.IndexByte(name, '[')
		if i < 0 {
			b.WriteString(name)
			break
		}
		j := strings.IndexByte(name[i:], ']')
		if j < 0 {
			b.WriteString(name)
			break
		}
		b.WriteString(name[:i])
		inside := name[i+1 : i+j]
		if isDigits(inside) {
			b.WriteString("[" + inside + "]")
		} else {
			b.WriteString("." + inside)
		}
		name = name[i+j+1:]
	}
	return b.String()
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// reportUnknownKeys covers keys the walk did not see: it reports every
// key it does not know, so this is a safety net.
func reportUnknownKeys(parent, keys string, c *collector) {
	for _, k := range strings.Split(keys, ", ") {
		key := c.idx.canonical(joinKey(parent, k))
		if !c.blocked(key) {
			c.add(key, "unknown key")
		}
	}
}

// decodeMessage rewrites the decoder's "expected type 'int', got
// unconvertible type 'string'" in the inventory's terms, quoting the value
// as written and saying how to fix the usual mistakes.
func decodeMessage(key string, inner error, c *collector) string {
	var ute *mapstructure.UnconvertibleTypeError
	if !errors.As(inner, &ute) {
		return inner.Error()
	}
	wantType := ute.Expected.Type()
	text, fromFile := c.idx.text(c.idx.canonical(key))
	if _, fromEnv := c.env[strings.ToLower(key)]; fromEnv {
		fromFile = false
	}
	if !fromFile {
		text = fmt.Sprint(ute.Value)
	}
	msg := "expected " + want(wantType) + ", got " + describe(ute.Value, text)
	return msg + fixHint(wantType, ute.Value, text, fromFile)
}

// describe is a value for "got ...": strings quoted, so that "8" and 8
// read differently.
func describe(v any, text string) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("%q", short(text))
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return short(text)
}

// fixHint says how to write the value so it decodes, for the two usual
// mistakes: a version written as a number, a number written in quotes.
func fixHint(t reflect.Type, v any, text string, fromFile bool) string {
	if !fromFile {
		return ""
	}
	s, isString := v.(string)
	switch {
	case t.Kind() == reflect.String && !isString:
		return fmt.Sprintf("; quote it: %q", text)
	case isString && decodesAs(t, s):
		return "; remove the quotes"
	}
	return ""
}

// decodesAs reports whether s, unquoted, would be a value of type t.
func decodesAs(t reflect.Type, s string) bool {
	switch t.Kind() {
	case reflect.Bool:
		return s == "true" || s == "false"
	case reflect.Int, reflect.Int64:
		return isDigits(strings.TrimPrefix(s, "-"))
	case reflect.Float64:
		_, err := parseDecimal(s)
		return err == nil
	}
	return false
}

// want names a type for "expected ...".
func want(t reflect.Type) string {
	switch t {
	case durationType:
		return durationExample
	case slurmTimeType:
		return slurmTimeExample
	case bytesType:
		return `a size such as "1GiB", "512MiB" or 1073741824`
	}
	switch t.Kind() {
	case reflect.Pointer:
		return want(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}
