package nodes

import (
	"strconv"
	"sync"
)

// A write to a FUSE file holds the kernel's lock of its inode until the server answers, and so does the
// truncation of `echo CMD > ctl`: while one command runs on a ctl — a compact waiting minutes for its
// summarizer — every other command written to that ctl waits behind it in the kernel, a flush included,
// though the session would answer it at once. So a ctl whose inode has a command running is looked up
// as a fresh inode (a new generation): the next `echo flush > ctl` opens that one and is not queued
// behind the running command, which keeps its inode (and its handle's result) until it ends. While no
// command runs, lookups keep naming the same inode. The ctl's entry is never cached by the kernel
// (a timeout of 1ns), so every path walk asks which inode is current.

// ctlSlots is the generation of every ctl that has run a command, by session id ("" for the store's).
type ctlSlots struct {
	mu sync.Mutex
	m  map[string]*ctlSlot
}

type ctlSlot struct {
	gen     uint64
	running map[uint64]int // commands running, by generation
}

// current is the generation a lookup of id's ctl names now: the last one, or a fresh one if a command
// is still running on the last.
func (c *ctlSlots) current(id string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.m[id]
	if s == nil {
		return 0
	}
	if s.running[s.gen] > 0 {
		s.gen++
	}
	return s.gen
}

// begin notes a command running on generation gen of id's ctl; the returned func notes its end.
func (c *ctlSlots) begin(id string, gen uint64) (end func()) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*ctlSlot{}
	}
	s := c.m[id]
	if s == nil {
		s = &ctlSlot{gen: gen, running: map[uint64]int{}}
		c.m[id] = s
	}
	s.running[gen]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if s.running[gen]--; s.running[gen] == 0 {
			delete(s.running, gen)
		}
		c.mu.Unlock()
	}
}

// ctlIno is the inode number of generation gen of a ctl whose first generation is base.
func ctlIno(base uint64, gen uint64) uint64 {
	if gen == 0 {
		return base
	}
	return ino(strconv.FormatUint(base, 16), "ctl", strconv.FormatUint(gen, 10))
}
