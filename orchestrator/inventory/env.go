package inventory

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/viper"
)

// EnvPrefix starts every override variable: GPUACCEPT_SSH_USER sets
// ssh.user, GPUACCEPT_QUOTE_GPUS_PER_NODE sets quote.gpus_per_node.
const EnvPrefix = "GPUACCEPT"

// EnvVar is the environment variable that overrides key: the prefix, then
// the key path upper-cased with dots as underscores.
func EnvVar(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// EnvKeys lists the keys an environment variable can override, in schema
// order: every scalar key outside nodes (lists and maps have no single
// value to replace).
func EnvKeys() []string {
	out := make([]string, len(envKeys))
	for i, k := range envKeys {
		out[i] = k.path
	}
	return out
}

type lookupEnv func(string) (string, bool)

type envKey struct {
	path, name string
	typ        reflect.Type
}

var envKeys = scalarKeys(inventoryType, "")

func scalarKeys(t reflect.Type, prefix string) []envKey {
	var out []envKey
	for f := range t.Fields() {
		name := tagName(f)
		if name == "" {
			continue
		}
		path := joinKey(prefix, name)
		switch ft := f.Type; {
		case ft == durationType || ft == bytesType || ft == slurmTimeType:
		case ft.Kind() == reflect.Struct:
			out = append(out, scalarKeys(ft, path)...)
			continue
		case ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map:
			continue
		}
		out = append(out, envKey{path: path, name: EnvVar(path), typ: f.Type})
	}
	return out
}

// applyEnv sets each overridden key in v. Viper's own env binding hands
// the decoder strings, which strict decoding rightly refuses for an int;
// so the value is converted here by the key's type, and a value that does
// not convert is reported against the key, naming the variable.
func applyEnv(v *viper.Viper, c *collector, env lookupEnv) {
	for _, k := range envKeys {
		raw, ok := env(k.name)
		// Empty counts as unset (viper's rule too): a wrapper script can
		// then clear an override without unsetting the variable.
		if !ok || raw == "" {
			continue
		}
		c.env[k.path] = k.name
		val, err := envValue(k.typ, raw)
		if err != nil {
			c.add(k.path, err.Error())
			continue
		}
		v.Set(k.path, val)
	}
}

// envValue converts an environment string to what the YAML would hold.
// Durations and sizes stay strings: the decode hooks parse those.
func envValue(t reflect.Type, raw string) (any, error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType || t == bytesType || t == slurmTimeType {
		return raw, nil
	}
	s := strings.TrimSpace(raw)
	switch t.Kind() {
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("expected true or false, got %q", short(raw))
	case reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("expected an integer, got %q", short(raw))
		}
		return n, nil
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("expected a number, got %q", short(raw))
		}
		return f, nil
	}
	return raw, nil
}
