package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServerProgramsThroughPgcluster holds the rule that pgcluster starts,
// stops and reloads every cluster, the results store's included: no
// non-test file of the store names pg_ctl (its command lines, flags and
// timeouts are pgcluster's: Cluster.Start, Stop, Reload).
func TestServerProgramsThroughPgcluster(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, _ := strconv.Unquote(lit.Value); s == "pg_ctl" {
					t.Errorf("%s: the store runs pg_ctl itself; start, stop and reload through pgcluster.Cluster", fset.Position(lit.Pos()))
				}
			}
			return true
		})
	}
}
