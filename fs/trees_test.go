package fs

import "testing"

func TestWorkingDirsInside(t *testing.T) {
	w := &workingDirs{sessions: "/m/sessions/", dirs: []string{"/m/sessions/a/events", "/m/sessions/b", "/m/sessions/c~002Fd/surface/x"}}
	for name, want := range map[string]bool{"a": true, "b": true, "c~002Fd": true, "ab": false, "c": false, "events": false, "": false} {
		if got := w.inside(name); got != want {
			t.Errorf("inside(%q) = %v, want %v", name, got, want)
		}
	}
}
