package command_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesDocumented: every code a refusal can carry (the Code… constants of eventstore and
// compaction) is in docs/writing.md's table of error codes, in one style — upper-case words joined by "_",
// as the harness names its own.
func TestErrorCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "writing.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, "\n## Error codes\n")
	if i < 0 {
		t.Fatal("docs/writing.md has no \"## Error codes\" section")
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\|").FindAllStringSubmatch(text[i:], -1) {
		documented[m[1]] = true
	}
	style := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	codes := 0
	for _, dir := range []string{"../eventstore", "../compaction"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, spec := range g.Specs {
					v := spec.(*ast.ValueSpec)
					for k, name := range v.Names {
						if !strings.HasPrefix(name.Name, "Code") || k >= len(v.Values) {
							continue
						}
						lit, ok := v.Values[k].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						code, _ := strconv.Unquote(lit.Value)
						codes++
						if !style.MatchString(code) {
							t.Errorf("%s: %s = %q is not in the codes' style (UPPER_SNAKE)", file, name.Name, code)
						}
						if !documented[code] {
							t.Errorf("%s: %s = %q is not in docs/writing.md's table of error codes", file, name.Name, code)
						}
					}
				}
			}
		}
	}
	if codes < 20 {
		t.Fatalf("found only %d codes: the test no longer sees the constants", codes)
	}
}
