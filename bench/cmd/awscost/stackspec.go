package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// StackSpec is what the CDK stack (infra/stack) configures that prices a
// run: each function's memory size and the Lambda architecture. The CDK app
// is a module of its own (it pulls in the CDK), so its source is read here
// rather than imported: a change there changes this report.
type StackSpec struct {
	// MemoryMB of each function, by name (infra/stack/functions.go).
	MemoryMB map[string]int `json:"memory_mb"`
	// Arch is the default Lambda architecture (infra/stack/stack.go).
	Arch string `json:"arch"`
	// Source names the files read.
	Source []string `json:"source"`
}

// readStackSpec parses infra/stack/functions.go: the Fn* name constants and
// the MemoryMB of every FunctionSpec in var Functions; and checks that
// stack.go still defaults the architecture to arm64.
func readStackSpec(root string) (StackSpec, error) {
	spec := StackSpec{MemoryMB: map[string]int{}, Source: []string{"infra/stack/functions.go", "infra/stack/stack.go"}}
	path := filepath.Join(root, "infra", "stack", "functions.go")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return spec, err
	}
	consts := map[string]string{}
	var functions *ast.CompositeLit
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range gd.Specs {
			vs, ok := s.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				switch v := vs.Values[i].(type) {
				case *ast.BasicLit:
					if gd.Tok == token.CONST && v.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(v.Value)
					}
				case *ast.CompositeLit:
					if name.Name == "Functions" {
						functions = v
					}
				}
			}
		}
	}
	if functions == nil {
		return spec, fmt.Errorf("%s: no var Functions", path)
	}
	for _, el := range functions.Elts {
		lit, ok := el.(*ast.CompositeLit)
		if !ok {
			continue
		}
		var name string
		mem := -1
		for _, f := range lit.Elts {
			kv, ok := f.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, _ := kv.Key.(*ast.Ident)
			if key == nil {
				continue
			}
			switch key.Name {
			case "Name":
				switch v := kv.Value.(type) {
				case *ast.Ident:
					name = consts[v.Name]
				case *ast.BasicLit:
					name, _ = strconv.Unquote(v.Value)
				}
			case "MemoryMB":
				if v, ok := kv.Value.(*ast.BasicLit); ok && v.Kind == token.INT {
					mem, _ = strconv.Atoi(v.Value)
				}
			}
		}
		if name == "" || mem <= 0 {
			return spec, fmt.Errorf("%s: a FunctionSpec without a literal Name and MemoryMB at %s", path, fset.Position(lit.Pos()))
		}
		spec.MemoryMB[name] = mem
	}
	if len(spec.MemoryMB) == 0 {
		return spec, fmt.Errorf("%s: no functions", path)
	}
	stack, err := os.ReadFile(filepath.Join(root, "infra", "stack", "stack.go"))
	if err != nil {
		return spec, err
	}
	if !strings.Contains(string(stack), `case "", "arm64":`) {
		return spec, fmt.Errorf("infra/stack/stack.go no longer defaults the Lambda architecture to arm64 (`case \"\", \"arm64\":`): check the Lambda prices here")
	}
	spec.Arch = "arm64"
	return spec, nil
}
