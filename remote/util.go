package remote

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"
)

// errOpenTimeout: openBounded's deadline passed.
var errOpenTimeout = errors.New("open timed out")

// openBounded runs open, a call that can hang (OpenSSH may sit on a
// channel open forever: golang/go#26643), and waits at most d and no
// longer than ctx. A result that arrives too late is handed to discard, so
// nothing leaks; the goroutine ends at the latest with the connection.
func openBounded[T any](ctx context.Context, d time.Duration, open func() (T, error), discard func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := open()
		ch <- result{v, err}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	late := func() {
		go func() {
			if r := <-ch; r.err == nil {
				discard(r.v)
			}
		}()
	}
	var zero T
	select {
	case r := <-ch:
		return r.v, r.err
	case <-timer.C:
		late()
		return zero, errOpenTimeout
	case <-ctx.Done():
		late()
		return zero, ctx.Err()
	}
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// IsEnvName says whether s may be exported by a shell: every executor
// refuses a Cmd.Env name that would change the command's meaning.
func IsEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
