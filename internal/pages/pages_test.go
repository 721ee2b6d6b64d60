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
