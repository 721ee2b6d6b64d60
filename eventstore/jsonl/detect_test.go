package jsonl

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestDetect covers the majority rule and its early stop: the answer must be the one a count of every
// session directory gives, wherever in the sorted order the minority sits.
func TestDetect(t *testing.T) {
	tests := []struct {
		name   string
		layout string // one byte a session directory, in sorted order: z zstd, r raw, b both, - neither
		want   Compression
		found  bool
	}{
		{"empty", "", Zstd, false},
		{"no artifacts", "---", Zstd, false},
		{"all zstd", "zzzzzz", Zstd, true},
		{"all raw", "rrrrrr", None, true},
		{"tie is zstd", "zrzr", Zstd, true},
		{"raw majority at the end", "zzrrr", None, true},
		{"zstd majority at the end", "rrzzz", Zstd, true},
		{"one raw", "r", None, true},
		{"both count for each", "bbr", None, true},
		{"both and zstd", "bzr", Zstd, true},
		{"empty dirs do not vote", "--r-z-r", None, true},
		{"minority last", "zzzzr", Zstd, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			project := filepath.Join(root, "--p--")
			if err := os.MkdirAll(project, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, c := range tt.layout {
				dir := filepath.Join(project, fmt.Sprintf("s%03d", i))
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				var names []string
				switch c {
				case 'z':
					names = []string{"session.jsonl.zstd"}
				case 'r':
					names = []string{"session.jsonl"}
				case 'b':
					names = []string{"session.jsonl.zstd", "session.jsonl"}
				}
				for _, n := range names {
					if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, found := Detect(root)
			if got != tt.want || found != tt.found {
				t.Errorf("Detect(%q) = %q, %v; want %q, %v", tt.layout, got, found, tt.want, tt.found)
			}
		})
	}
}
