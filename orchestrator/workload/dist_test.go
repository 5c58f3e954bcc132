package workload

import (
	"math"
	"testing"
)

func TestNewDist(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		d := NewDist(nil)
		if d.N != 0 || d.CDF != nil {
			t.Fatalf("empty: %+v", d)
		}
		if _, ok := d.Percentile(95); ok {
			t.Fatal("an empty Dist has no p95")
		}
	})
	t.Run("one", func(t *testing.T) {
		d := NewDist([]float64{7})
		if d.N != 1 || d.Min != 7 || d.Max != 7 || d.P50 != 7 || d.P99 != 7 || d.Mean != 7 {
			t.Fatalf("one sample: %+v", d)
		}
	})
	t.Run("1..100", func(t *testing.T) {
		s := make([]float64, 100)
		for i := range s {
			s[len(s)-1-i] = float64(i + 1) // reversed: NewDist sorts a copy
		}
		d := NewDist(s)
		// numpy.percentile(range(1, 101), [50, 90, 95, 99]) = 50.5, 90.1, 95.05, 99.01
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"p50", d.P50, 50.5}, {"p90", d.P90, 90.1}, {"p95", d.P95, 95.05}, {"p99", d.P99, 99.01},
			{"min", d.Min, 1}, {"max", d.Max, 100}, {"mean", d.Mean, 50.5}} {
			if math.Abs(c.got-c.want) > 1e-9 {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if len(d.CDF) != 21 || d.CDF[0] != 1 || d.CDF[20] != 100 || math.Abs(d.CDF[10]-50.5) > 1e-9 {
			t.Errorf("CDF = %v", d.CDF)
		}
		for i := 1; i < len(d.CDF); i++ {
			if d.CDF[i] < d.CDF[i-1] {
				t.Errorf("CDF not monotone at %d: %v", i, d.CDF)
			}
		}
		if s[0] != 100 {
			t.Error("NewDist sorted the caller's samples")
		}
	})
	t.Run("not a number", func(t *testing.T) {
		d := NewDist([]float64{math.NaN(), 2, math.Inf(1), 4})
		if d.N != 2 || d.Mean != 3 || d.Max != 4 {
			t.Fatalf("NaN and Inf are not samples: %+v", d)
		}
	})
}
