package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestHelpDocumentsEveryFlag reads this package's source for the flags each command accepts (the keys of
// the map its parseArgs call allows and the names its takeFlag calls take, in the command's function and
// every package function it calls) and requires each of them to be explained in the command's help: named
// as --flag in the text below the synopsis line, not only listed in it. A flag added to a command without a
// word in its help fails here.
func TestHelpDocumentsEveryFlag(t *testing.T) {
	flags := commandFlags(t)
	if len(flags) < len(commandHelp)-3 { // demo, help and version take no flags
		t.Fatalf("found the flags of %d commands, want most of the %d with help: %v", len(flags), len(commandHelp), flags)
	}
	if !flags["mount"]["nonempty"] || !flags["mount"]["allow-other"] || !flags["backup"]["allow-empty"] {
		t.Fatalf("the source scan missed flags it must find: %v", flags)
	}
	for cmd, names := range flags {
		if _, ok := commandHelp[cmd]; !ok {
			t.Errorf("command %q has no help text", cmd)
			continue
		}
		text := helpText(cmd)
		_, body, _ := strings.Cut(text, "\n")
		synopsis := strings.SplitN(text, "\n", 2)[0]
		for name := range names {
			flag := "--" + name
			if !strings.Contains(synopsis, flag) {
				t.Errorf("dshfs help %s: the synopsis does not list %s:\n%s", cmd, flag, synopsis)
			}
			if !strings.Contains(body, flag) {
				t.Errorf("dshfs help %s: %s is not explained below the synopsis:\n%s", cmd, flag, text)
			}
		}
	}
}

// commandFlags maps each command of run's switch to the flags its function accepts.
func commandFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Body != nil {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	run := funcs["run"]
	if run == nil {
		t.Fatal("no func run in the package")
	}
	// run's switch: case "ls": code, err = cmdLs(...)
	entry := map[string]string{}
	ast.Inspect(run.Body, func(n ast.Node) bool {
		cc, ok := n.(*ast.CaseClause)
		if !ok || len(cc.List) != 1 || len(cc.Body) != 1 {
			return true
		}
		lit, ok := cc.List[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		as, ok := cc.Body[0].(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 {
			return true
		}
		if call, ok := as.Rhs[0].(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok {
				cmd, _ := strconv.Unquote(lit.Value)
				entry[cmd] = id.Name
			}
		}
		return true
	})
	out := map[string]map[string]bool{}
	for cmd, fn := range entry {
		names := map[string]bool{}
		seen := map[string]bool{}
		var walk func(string)
		walk = func(name string) {
			fd := funcs[name]
			if fd == nil || seen[name] {
				return
			}
			seen[name] = true
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				id, ok := call.Fun.(*ast.Ident)
				if !ok {
					return true
				}
				switch id.Name {
				case "parseArgs":
					if len(call.Args) == 2 {
						if cl, ok := call.Args[1].(*ast.CompositeLit); ok {
							for _, el := range cl.Elts {
								if kv, ok := el.(*ast.KeyValueExpr); ok {
									if k, ok := kv.Key.(*ast.BasicLit); ok {
										s, _ := strconv.Unquote(k.Value)
										names[s] = true
									}
								}
							}
						}
					}
				case "takeFlag":
					if len(call.Args) == 2 {
						if k, ok := call.Args[1].(*ast.BasicLit); ok {
							s, _ := strconv.Unquote(k.Value)
							names[s] = true
						}
					}
				default:
					walk(id.Name)
				}
				return true
			})
		}
		walk(fn)
		if len(names) > 0 {
			out[cmd] = names
		}
	}
	return out
}

// TestHelpListsEveryCommand keeps the overall usage and the per-command help in step.
func TestHelpListsEveryCommand(t *testing.T) {
	var missing []string
	for _, name := range commandNames() {
		if !strings.Contains(usage, "dshfs "+name) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the usage text does not mention: %v", missing)
	}
}

// TestUsageListsEveryFlag keeps the overall usage (and so docs/cli.md's copy of it) listing each command's
// flags, and docs/cli.md's synopsis block equal to the usage's command lines.
func TestUsageListsEveryFlag(t *testing.T) {
	lines := map[string]string{}
	for _, l := range strings.Split(usage, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "dshfs" {
			if _, seen := lines[f[1]]; !seen {
				lines[f[1]] = strings.TrimSpace(l)
			}
		}
	}
	for cmd, names := range commandFlags(t) {
		line, ok := lines[cmd]
		if !ok {
			t.Errorf("the usage has no line for %s", cmd)
			continue
		}
		for name := range names {
			if !strings.Contains(line, "--"+name) {
				t.Errorf("the usage line of %s does not list --%s: %s", cmd, name, line)
			}
		}
	}
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/cli.md has no synopsis block")
	}
	var want []string
	for _, l := range strings.Split(usage, "\n") {
		if strings.HasPrefix(l, "  dshfs ") {
			want = append(want, strings.TrimSpace(l))
		}
	}
	if got := strings.Split(strings.TrimSpace(block), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("docs/cli.md's synopsis block differs from dshfs help:\n got %q\nwant %q", got, want)
	}
}
