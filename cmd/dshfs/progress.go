package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress draws "verb n/total" on a terminal, at most ten times a second, and nothing when the stream is
// not a terminal (piped or redirected output stays clean).
type progress struct {
	w     io.Writer
	verb  string
	total int
	last  time.Time
	drawn bool
}

func newProgress(f *os.File, verb string, total int) *progress {
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return &progress{}
	}
	return &progress{w: f, verb: verb, total: total}
}

// step reports that n items are done.
func (p *progress) step(n int) {
	if p.w == nil || (time.Since(p.last) < 100*time.Millisecond && n < p.total) {
		return
	}
	p.last = time.Now()
	p.drawn = true
	fmt.Fprintf(p.w, "\r%s %d/%d", p.verb, n, p.total)
}

// stepWith is step with a detail after the count ("n/total detail").
func (p *progress) stepWith(n int, detail string) {
	if p.w == nil || (time.Since(p.last) < 100*time.Millisecond && n < p.total) {
		return
	}
	p.last = time.Now()
	p.drawn = true
	fmt.Fprintf(p.w, "\r\033[K%s %d/%d %s", p.verb, n, p.total, detail)
}

// done clears the line before the command prints its results.
func (p *progress) done() {
	if p.w != nil && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
