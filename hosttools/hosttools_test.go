package hosttools

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var targets = []string{"up", "test", "deb", "vm-lab", "bench-upstream"}

func TestListParses(t *testing.T) {
	tools, err := parse(listText)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tool := range tools {
		if seen[tool.Name] {
			t.Errorf("%s is listed twice", tool.Name)
		}
		seen[tool.Name] = true
		for _, tg := range tool.Targets {
			if !slices.Contains(targets, tg) {
				t.Errorf("%s: unknown target %q (want one of %v)", tool.Name, tg, targets)
			}
		}
	}
	if len(tools) < 10 {
		t.Fatalf("tools.list has %d tools; the parser lost lines", len(tools))
	}
}

func TestParseRefusesBadLines(t *testing.T) {
	if _, err := parse("nft nftables\n"); err == nil {
		t.Fatal("a line without targets was accepted")
	}
}

func TestUnlistedToolIsRefused(t *testing.T) {
	// "true" is installed on every machine but not listed: refused all the same.
	_, err := Path("true")
	if !errors.Is(err, ErrNotListed) {
		t.Fatalf("Path(true) = %v, want ErrNotListed", err)
	}
	if err := Command("true").Run(); !errors.Is(err, ErrNotListed) {
		t.Fatalf("Command(true).Run() = %v, want ErrNotListed", err)
	}
	if err := CommandContext(context.Background(), "nsenter", "--net=/proc/self/ns/net", "true").Run(); !errors.Is(err, ErrNotListed) {
		t.Fatalf("nsenter running an unlisted tool: %v, want ErrNotListed", err)
	}
	if err := Check("sleep", "true"); !errors.Is(err, ErrNotListed) || !strings.Contains(err.Error(), `"true"`) {
		t.Fatalf("Check(sleep, true) = %v, want ErrNotListed naming true", err)
	}
}

func TestListedToolRuns(t *testing.T) {
	out, err := Command("sleep", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("sleep 0: %v: %s", err, out)
	}
}

// TestExecGoesThroughTheList reads every Go file of the module: a program
// named by a string literal must be run through this package (os/exec with
// a literal name would bypass the list), and every literal this package is
// given must be listed. Programs named by variables (the project's own
// binaries, os.Args[0]) are not checked here; Command checks them when
// they run.
func TestExecGoesThroughTheList(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", root, err)
	}
	var checked int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_output" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Dir(path) == filepath.Join(root, "hosttools") {
			return nil
		}
		checked++
		for _, p := range badExecs(t, path) {
			t.Error(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files read under %s", checked, root)
	}
}

// badExecs reports the calls in one file that name an unlisted program.
func badExecs(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	execName, hostName := importName(f, "os/exec", "exec"), importName(f, "github.com/nodelet/nodelet/hosttools", "hosttools")
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		pos := fset.Position(call.Pos())
		switch {
		case pkg.Name == execName && execName != "":
			arg := programArg(sel.Sel.Name, call)
			if name, ok := stringLit(arg); ok {
				problems = append(problems, pos.String()+": exec."+sel.Sel.Name+"("+strconv.Quote(name)+"): run host tools through hosttools")
			}
		case pkg.Name == hostName && hostName != "":
			for _, arg := range hostToolArgs(sel.Sel.Name, call) {
				if name, ok := stringLit(arg); ok {
					if _, err := Find(name); err != nil {
						problems = append(problems, pos.String()+": "+err.Error())
					}
				}
			}
		}
		return true
	})
	return problems
}

func importName(f *ast.File, path, def string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return def
		}
	}
	return ""
}

func programArg(fn string, call *ast.CallExpr) ast.Expr {
	i := 0
	if fn == "CommandContext" {
		i = 1
	}
	if fn != "Command" && fn != "CommandContext" && fn != "LookPath" || len(call.Args) <= i {
		return nil
	}
	return call.Args[i]
}

func hostToolArgs(fn string, call *ast.CallExpr) []ast.Expr {
	switch fn {
	case "Command", "Path", "Find":
		return call.Args[:min(1, len(call.Args))]
	case "CommandContext":
		return call.Args[min(1, len(call.Args)):min(2, len(call.Args))]
	case "Check":
		return call.Args
	}
	return nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
