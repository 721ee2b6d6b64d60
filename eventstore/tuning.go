package eventstore

import (
	"runtime"
	"sync"
)

// Tuning is how much of the machine one piece of the store's heavy work may use: parsing a large append,
// validating a large load, decoding a session in pieces, reading a listing's headers, packing rows. The
// program decides it — cmd/dshfs gives one worker per P, after it has set how many Ps the mount runs
// with — and hands it to the Store and to the backends it opens, so that the core picks no concurrency of
// its own. The zero Tuning (tools and tests that open a store themselves) takes one worker per P.
type Tuning struct {
	// Workers is how many goroutines one piece of work runs on; 1 runs everything inline, 0 takes one per P.
	Workers int
}

// N is the number of workers the tuning gives one piece of work.
func (t Tuning) N() int {
	if t.Workers > 0 {
		return t.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Parallel runs fn over contiguous index ranges covering [0, n) on up to N goroutines, from min items on
// (fewer run inline: the caller knows what one item costs), and returns the error of the lowest failing
// range. The work is cut into four ranges per worker, so that one slow range leaves the others busy.
func (t Tuning) Parallel(n, min int, fn func(lo, hi int) error) error {
	workers := t.N()
	if n < min || workers < 2 {
		return fn(0, n)
	}
	parts := workers * 4
	errs := make([]error, parts)
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for p := 0; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[p] = fn(lo, hi)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
