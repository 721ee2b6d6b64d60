package jsonl

import "testing"

func TestParseGenerationName(t *testing.T) {
	tests := []struct {
		name string
		want GenerationFile
		ok   bool
	}{
		{"session.jsonl", GenerationFile{0, None}, true},
		{"session.jsonl.zstd", GenerationFile{0, Zstd}, true},
		{"session.v2.jsonl", GenerationFile{2, None}, true},
		{"session.v3.jsonl.zstd", GenerationFile{3, Zstd}, true},
		{"session.v12.jsonl", GenerationFile{12, None}, true},
		{"session.v0.jsonl", GenerationFile{}, false},
		{"session.v03.jsonl", GenerationFile{}, false},
		{"Session.v3.jsonl", GenerationFile{}, false},
		{"session.V3.jsonl", GenerationFile{}, false},
		{"session.v3.JSONL", GenerationFile{}, false},
		{"session.v3.jsonl.tmp", GenerationFile{}, false},
		{"session.v3.jsonl.zstd.tmp", GenerationFile{}, false},
		{"session.migration.0123456789abcdef.jsonl.zstd.tmp", GenerationFile{}, false},
		{"session.v.jsonl", GenerationFile{}, false},
		{"session.v3x.jsonl", GenerationFile{}, false},
		{"session.v99999999999999999999.jsonl", GenerationFile{}, false},
		{"session.lock", GenerationFile{}, false},
		{"session.jsonl.zstd.zstd", GenerationFile{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseGenerationName(tt.name)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseGenerationName(%q) = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok && got.Name() != tt.name {
			t.Errorf("%q: Name() = %q", tt.name, got.Name())
		}
	}
}
