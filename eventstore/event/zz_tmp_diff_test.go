package event

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

func TestTmpDiffNode(t *testing.T) {
	data, _ := os.ReadFile("/tmp/diff.tsv")
	bad := 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		a, b, _ := strings.Cut(l, "\t")
		in, _ := hex.DecodeString(a)
		got, err := Canonical(in)
		var g string
		if err != nil {
			g = "ERROR"
		} else {
			g = hex.EncodeToString(got)
		}
		if g != b {
			bad++
			if bad < 10 {
				w, _ := hex.DecodeString(b)
				t.Errorf("in %q\n got %q\nwant %q", in, got, w)
			}
		}
	}
	t.Logf("mismatches: %d", bad)
}
