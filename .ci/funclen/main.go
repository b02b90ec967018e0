// Command funclen lists the product code's functions longer than a limit,
// longest first: every non-test .go file under the module root, except the
// benchmarks (bench/), the test support (internal/testenv, internal/e2e) and
// the hand-written JSON scanner, whose one long state machine reads better
// whole. A function's length counts its lines from func to closing brace.
//
//	go run ./.ci/funclen            # functions of 80 lines or more
//	go run ./.ci/funclen -over 60   # of 60 or more
//	go run ./.ci/funclen -check     # exit 1 if any is listed
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// skipped are the trees and files that are not product code or are long on
// purpose, as slash paths relative to the module root.
var skipped = []string{"bench/", "internal/testenv/", "internal/e2e/", "jsonscan.go"}

type fn struct {
	name  string
	where string
	lines int
}

func main() {
	over := flag.Int("over", 80, "list functions of at least this many lines")
	check := flag.Bool("check", false, "exit 1 when any function is listed")
	flag.Parse()
	fns, err := scan(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	n := 0
	for _, f := range fns {
		if f.lines >= *over {
			fmt.Printf("%4d  %s  %s\n", f.lines, f.name, f.where)
			n++
		}
	}
	if len(fns) > 0 {
		fmt.Printf("longest: %d lines (%s); %d at or over %d\n", fns[0].lines, fns[0].name, n, *over)
	}
	if *check && n > 0 {
		os.Exit(1)
	}
}

func scan(root string) ([]fn, error) {
	var fns []fn
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || skip(rel+"/")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || skip(rel) {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			d, ok := decl.(*ast.FuncDecl)
			if !ok || d.Body == nil {
				continue
			}
			start, end := fset.Position(d.Pos()), fset.Position(d.End())
			fns = append(fns, fn{name: name(d), where: fmt.Sprintf("%s:%d", rel, start.Line), lines: end.Line - start.Line + 1})
		}
		return nil
	})
	sort.SliceStable(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	return fns, err
}

func skip(rel string) bool {
	for _, s := range skipped {
		if strings.HasPrefix(rel, s) || (!strings.HasSuffix(s, "/") && filepath.Base(rel) == s) {
			return true
		}
	}
	return false
}

// name is Type.method or func.
func name(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if g, ok := t.(*ast.IndexListExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}
