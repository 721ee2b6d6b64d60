package nodes

import "testing"

// TestCtlSlots: a ctl keeps its inode while idle and gets a fresh one for the lookups made while a
// command runs on it; the command's end on an old generation does not free the current one.
func TestCtlSlots(t *testing.T) {
	var c ctlSlots
	const base = 42
	if g := c.current("s"); g != 0 || ctlIno(base, g) != base {
		t.Fatalf("an idle ctl's generation %d, inode %d", g, ctlIno(base, g))
	}
	endCompact := c.begin("s", 0)
	g1 := c.current("s")
	if g1 == 0 || ctlIno(base, g1) == base {
		t.Fatalf("a ctl running a command is looked up as generation %d", g1)
	}
	if c.current("s") != g1 || c.current("t") != 0 {
		t.Fatal("the fresh generation is not kept while idle, or another ctl moved")
	}
	endFlush := c.begin("s", g1)
	g2 := c.current("s")
	if g2 == g1 {
		t.Fatal("a second running command kept its inode current")
	}
	endFlush()
	endCompact()
	if c.current("s") != g2 {
		t.Fatal("an idle ctl changed generation")
	}
}
