package pages

import (
	"testing"
	"unsafe"
)

type slot struct {
	p *int
	s string
	n int64
}

// TestTouchKeepsZeros: Touch leaves every value of a zero slice zero, at the sizes of both of its ways
// (the byte loop below populateMin, madvise from it) and at lengths that end mid-page.
func TestTouchKeepsZeros(t *testing.T) {
	per := int(unsafe.Sizeof(slot{}))
	for _, n := range []int{1, 2, 170, 171, populateMin/per - 1, populateMin / per, populateMin/per + 3, 3 * populateMin / per} {
		s := make([]slot, n)
		Touch(s)
		Touch(s[1:]) // an unaligned start
		for i := range s {
			if s[i] != (slot{}) {
				t.Fatalf("n=%d: value %d changed: %+v", n, i, s[i])
			}
		}
	}
	Touch([]slot(nil))
}

// TestGrowTrimKeepValues: Grow, GrowTo and Trim keep the values and length of a list, give the room asked
// for, and Trim leaves at most a quarter of slack; GrowTo sizes for the whole input once share is known.
func TestGrowTrimKeepValues(t *testing.T) {
	x := 1
	s := make([]slot, 0, 3)
	for i := range 3 {
		s = append(s, slot{p: &x, s: "v", n: int64(i)})
	}
	same := func(what string, got []slot) {
		t.Helper()
		if len(got) != 3 || got[0].n != 0 || got[2].n != 2 || got[1].p != &x || got[1].s != "v" {
			t.Fatalf("%s: %+v", what, got)
		}
	}
	if g := Grow(s, 1); cap(g) < 4 {
		t.Fatalf("Grow: cap %d", cap(g))
	} else {
		same("Grow", g)
	}
	if g := Grow(s, 0); &g[0] != &s[0] {
		t.Fatal("Grow copied a list that had the room")
	}
	for _, c := range []struct {
		need       int
		share      float64
		minC, maxC int
	}{
		{need: 5, share: 0, minC: 6, maxC: 6},         // doubles while the input's size is unknown
		{need: 5, share: 1.0 / 64, minC: 6, maxC: 6},  // and while little of it is known
		{need: 5, share: 0.5, minC: 11, maxC: 11},     // then sized for all of it, plus a tenth
		{need: 100, share: 0.5, minC: 220, maxC: 220}, //
		{need: 3, share: 0.5, minC: 3, maxC: 3},       // no copy when the room is there
	} {
		g := GrowTo(s, c.need, c.share)
		if cap(g) < c.minC || cap(g) > c.maxC {
			t.Errorf("GrowTo(need %d, share %v): cap %d, want %d..%d", c.need, c.share, cap(g), c.minC, c.maxC)
		}
		same("GrowTo", g)
	}
	wide := append(make([]slot, 0, 100), s...)
	if g := Trim(wide); cap(g) != 3 {
		t.Fatalf("Trim: cap %d", cap(g))
	} else {
		same("Trim", g)
	}
	if g := Trim(append(make([]slot, 0, 3), s...)); cap(g) != 3 {
		t.Fatalf("Trim of a tight list: cap %d", cap(g))
	}
}
