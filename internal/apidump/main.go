// Command apidump prints the public API of the txbox module, one
// declaration per line, sorted: every exported constant, variable,
// function, type, struct field, interface method and method of an exported
// type, with its signature and without documentation. api.txt at the
// repository root is its output; a test fails when api.txt is stale, so
// that growing (or changing) the API is a decision seen in review:
//
//	go run ./internal/apidump > api.txt
//
// Public packages are those of the module outside internal/, cmd/,
// examples/ and faults/ (the fault-injection harness); nested modules
// (bench/, interop/) are not part of it.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

const module = "github.com/txbox/txbox"

func main() {
	lines, err := dump(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidump:", err)
		os.Exit(1)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}

// skipped are the module's folders whose packages are not public API.
var skipped = []string{"internal", "cmd", "examples", "faults", "testdata"}

// dump lists the public API of the module rooted at root.
func dump(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." {
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || slices.Contains(skipped, name) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		lines, err := dumpDir(path, rel)
		if err != nil {
			return err
		}
		out = append(out, lines...)
		return nil
	})
	sort.Strings(out)
	return out, err
}

// dumpDir lists the exported declarations of the package in dir.
func dumpDir(dir, rel string) ([]string, error) {
	fset := token.NewFileSet()
	ctx := build.Default
	ctx.CgoEnabled = false
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := ctx.MatchFile(dir, n); err != nil || !ok {
			continue // another platform's file, or one behind a build tag
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" {
			return nil, nil
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, nil
	}
	path := module
	if rel != "." {
		path += "/" + rel
	}
	prefix := path + ": "
	if files[0].Name.Name != filepath.Base(path) {
		prefix = path + " (" + files[0].Name.Name + "): "
	}
	p := &printerState{fset: fset}
	var out []string
	add := func(s string) { out = append(out, prefix+s) }
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if !ast.IsExported(baseName(recv)) {
						continue
					}
					add("method (" + p.str(recv) + ") " + d.Name.Name + p.signature(d.Type))
					continue
				}
				add("func " + d.Name.Name + p.typeParams(d.Type.TypeParams) + p.signature(d.Type))
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out = append(out, p.typeSpec(prefix, s)...)
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							line := d.Tok.String() + " " + n.Name
							if s.Type != nil {
								line += " " + p.str(s.Type)
							}
							if d.Tok == token.CONST && i < len(s.Values) {
								line += " = " + p.str(s.Values[i])
							}
							add(line)
						}
					}
				}
			}
		}
	}
	return out, nil
}

type printerState struct{ fset *token.FileSet }

func (p *printerState) str(n ast.Node) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, p.fset, n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func (p *printerState) signature(ft *ast.FuncType) string {
	s := p.str(&ast.FuncType{Params: ft.Params, Results: ft.Results})
	return strings.TrimPrefix(s, "func")
}

func (p *printerState) typeParams(tp *ast.FieldList) string {
	if tp == nil || len(tp.List) == 0 {
		return ""
	}
	var parts []string
	for _, f := range tp.List {
		var names []string
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		parts = append(parts, strings.Join(names, ", ")+" "+p.str(f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// typeSpec lists a type, then each exported field or method of a struct or
// interface on a line of its own.
func (p *printerState) typeSpec(prefix string, s *ast.TypeSpec) []string {
	name := s.Name.Name + p.typeParams(s.TypeParams)
	assign := ""
	if s.Assign.IsValid() {
		assign = "= "
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		out := []string{prefix + "type " + name + " struct"}
		for _, f := range t.Fields.List {
			typ := p.str(f.Type)
			if len(f.Names) == 0 {
				if ast.IsExported(baseName(f.Type)) {
					out = append(out, prefix+"field "+s.Name.Name+" embeds "+typ)
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, prefix+"field "+s.Name.Name+"."+n.Name+" "+typ)
				}
			}
		}
		return out
	case *ast.InterfaceType:
		out := []string{prefix + "type " + name + " interface"}
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				out = append(out, prefix+"method "+s.Name.Name+" embeds "+p.str(m.Type))
				continue
			}
			for _, n := range m.Names {
				if !n.IsExported() {
					out = append(out, prefix+"method "+s.Name.Name+" has unexported "+n.Name)
					continue
				}
				if ft, ok := m.Type.(*ast.FuncType); ok {
					out = append(out, prefix+"method "+s.Name.Name+"."+n.Name+p.signature(ft))
				}
			}
		}
		return out
	default:
		return []string{prefix + "type " + name + " " + assign + p.str(s.Type)}
	}
}

// baseName is the type name under pointers, generics and package selectors.
func baseName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return baseName(t.X)
	case *ast.IndexExpr:
		return baseName(t.X)
	case *ast.IndexListExpr:
		return baseName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}
