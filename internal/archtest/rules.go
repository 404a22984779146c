package archtest

import (
	"fmt"
	"slices"
	"strings"
)

// module is the import path of the main module.
const module = "github.com/stepgraph/stepgraph"

// Package is what the rules read of one package: its direct imports and
// everything it depends on, both without tests.
type Package struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// Part is a kind of package on the map.
type Part string

const (
	// Root: composition roots and their tools; they choose adapters.
	Root Part = "root"
	// Adapter: an implementation of a port over a library or a service.
	Adapter Part = "adapter"
	// Core: use cases, ports, the engine, the graph format, the HTTP layer
	// and the assembly — what must stay free of adapter libraries.
	Core Part = "core"
	// Support: test libraries (contract suites, the emulator harness).
	Support Part = "support"
)

// rootPrefixes are the folders (relative to the module) of the roots.
var rootPrefixes = []string{"cmd/", "functions", "internal/lambdaapp", "bench/", "test/", "examples/"}

// adapters are the packages that implement a port over an adapter library.
var adapters = []string{
	"internal/store/sqlite", "internal/store/dynamo",
	"internal/secrets/local", "internal/secrets/aws", "internal/secrets/kmsvault",
	"internal/dispatch/local", "internal/dispatch/sfn", "internal/dispatch/eventbridge",
	"internal/sources/git",
	"internal/lambdaruntime", "internal/codebuild",
	"internal/payloads/s3", "internal/payloads/local",
}

// support are the test libraries: they may use the AWS SDK (to drive the
// emulator) but pick no adapter.
var support = []string{
	"internal/store/storetest", "internal/secrets/secretstest",
	"internal/awstest", "internal/awstest/codebuildlocal", "internal/ministack", "internal/testserver",
	"internal/graphdoc/runtimetest", "internal/deployments/provisiontest", "internal/runs/dispatchtest",
	"internal/sources/gittest",
	"internal/testmodel",
	"internal/oauthtest",
	"internal/archtest",
	"internal/payloads/payloadstest",
}

// core are the packages that must not depend on an adapter library.
var core = []string{
	"internal/api", "internal/api/docs", "internal/console", "internal/assembly",
	"internal/providers", "internal/deployments", "internal/runs", "internal/deployedgraphs",
	"internal/auth", "internal/webhooks", "internal/crons", "internal/agentauth",
	"internal/storeapi", "internal/interop", "internal/pyapp", "internal/calltoken", "runtimes/python",
	"internal/store", "internal/store/cpcodec", "internal/secrets", "internal/sources", "internal/payloads",
	"internal/graph", "internal/graphdoc", "internal/awsflow",
	"internal/fail", "internal/weburl",
	"internal/reqid", "internal/cors",
}

// adapterLibraries are the import path prefixes only adapters, roots and
// support packages may depend on.
var adapterLibraries = []string{"github.com/aws/", "modernc.org/sqlite", "github.com/go-git/"}

// engine imports nothing of the project.
const engine = "internal/graph"

// partOf places a package of the module on the map ("" when it is on none).
func partOf(rel string) Part {
	switch {
	case slices.ContainsFunc(rootPrefixes, func(p string) bool { return rel == strings.TrimSuffix(p, "/") || strings.HasPrefix(rel, p) }):
		return Root
	case slices.Contains(adapters, rel):
		return Adapter
	case slices.Contains(support, rel):
		return Support
	case slices.Contains(core, rel):
		return Core
	}
	return ""
}

// Violations checks pkgs (the module's packages) against the rules.
func Violations(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		part := partOf(rel)
		if part == "" {
			out = append(out, fmt.Sprintf("%s is on no part of the map: add it to internal/archtest/rules.go and ARCHITECTURE.md", rel))
			continue
		}
		if part == Core {
			for _, d := range p.Deps {
				if slices.ContainsFunc(adapterLibraries, func(lib string) bool { return strings.HasPrefix(d, lib) }) {
					out = append(out, fmt.Sprintf("%s (core) depends on the adapter library %s%s", rel, d, via(p, d, pkgs)))
					break
				}
			}
		}
		for _, imp := range p.Imports {
			irel, ok := relative(imp)
			if ok && partOf(irel) == Adapter && part != Root && !strings.HasPrefix(irel, rel+"/") {
				out = append(out, fmt.Sprintf("%s (%s) imports the adapter %s: only composition roots choose adapters", rel, part, irel))
			}
			if ok && rel == engine {
				out = append(out, fmt.Sprintf("%s (the engine) imports %s: it imports nothing of the project", rel, irel))
			}
		}
	}
	return out
}

// via names a direct import of p through which p depends on dep, for the
// message ("" when dep is a direct import).
func via(p Package, dep string, pkgs []Package) string {
	if slices.Contains(p.Imports, dep) {
		return ""
	}
	for _, imp := range p.Imports {
		for _, q := range pkgs {
			if q.ImportPath == imp && slices.Contains(q.Deps, dep) {
				return " (through " + imp + ")"
			}
		}
	}
	return ""
}

func relative(importPath string) (string, bool) {
	rel, ok := strings.CutPrefix(importPath, module+"/")
	return rel, ok
}
