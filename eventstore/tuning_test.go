package eventstore

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestTuning: Parallel covers every index once whatever the workers, runs inline below min or with one
// worker, and reports the lowest failing range's error; the zero Tuning takes one worker per P.
func TestTuning(t *testing.T) {
	if got := (Tuning{}).N(); got != runtime.GOMAXPROCS(0) {
		t.Errorf("zero tuning: %d workers", got)
	}
	for _, tc := range []struct {
		workers, n, min int
		calls           int // fn calls expected; 0: more than one
	}{
		{1, 10000, 1, 1},
		{4, 100, 1000, 1},
		{4, 10000, 1, 0},
		{3, 7, 1, 0},
	} {
		tu := Tuning{Workers: tc.workers}
		seen := make([]atomic.Int32, tc.n)
		var calls atomic.Int32
		if err := tu.Parallel(tc.n, tc.min, func(lo, hi int) error {
			calls.Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("%+v: index %d covered %d times", tc, i, seen[i].Load())
			}
		}
		if c := int(calls.Load()); (tc.calls == 0 && c < 2) || (tc.calls != 0 && c != tc.calls) {
			t.Errorf("%+v: %d calls", tc, c)
		}
	}
	first, later := errors.New("first"), errors.New("later")
	err := Tuning{Workers: 4}.Parallel(1000, 1, func(lo, hi int) error {
		switch {
		case lo <= 100 && 100 < hi:
			return first
		case lo <= 900 && 900 < hi:
			return later
		}
		return nil
	})
	if err != first {
		t.Errorf("error %v, want the lowest range's", err)
	}
}
