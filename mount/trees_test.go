package mount

import "testing"

func TestWorkingDirsInside(t *testing.T) {
	w := &workingDirs{sessions: "/m/sessions/", dirs: []string{"/m/sessions/a/events", "/m/sessions/b", "/m/sessions/c~002Fd/surface/x"}}
	for name, want := range map[string]bool{"a": true, "b": true, "c~002Fd": true, "ab": false, "c": false, "events": false, "": false} {
		if got := w.inside(name); got != want {
			t.Errorf("inside(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestTrees: the least recently shown sessions fall out of the bound, in order; showing one again keeps it.
func TestTrees(t *testing.T) {
	tr := newTrees(2)
	for _, c := range []struct {
		id, evicted string
	}{{"a", ""}, {"b", ""}, {"a", ""}, {"c", "b"}, {"d", "a"}, {"c", ""}, {"e", "d"}} {
		got := tr.touch(c.id)
		if (c.evicted == "" && len(got) != 0) || (c.evicted != "" && (len(got) != 1 || got[0] != c.evicted)) {
			t.Fatalf("touch %s: evicted %v, want %q", c.id, got, c.evicted)
		}
	}
}
