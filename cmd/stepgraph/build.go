package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/stepgraph/stepgraph/internal/pyapp"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// stepgraph build [DIR] -o app.zip: a LangGraph app as a zip for Lambda's
// Python runtime (docs/runtime-protocol.md, "On AWS"): the app, its
// dependencies and the runtime's as binary wheels for the Lambda platform,
// the runtime package and stepgraph_build.json. The zip is written whole or
// not at all. With -image DIR, the same files go into a Docker build
// context instead (DIR/app and DIR/Dockerfile, FROM the Lambda Python base
// image): a container image for an external_docker deployment.
func build(args []string) error {
	fset := flag.NewFlagSet("build", flag.ContinueOnError)
	out := fset.String("o", "app.zip", "the zip to write")
	image := fset.String("image", "", "write a Docker build context for a Lambda container image to this new directory instead of a zip")
	arch := fset.String("arch", "x86_64", "Lambda's architecture: x86_64 or arm64")
	pyVersion := fset.String("python-version", "3.11", "Lambda's Python runtime: 3.11, 3.12 or 3.13")
	python := fset.String("python", "python3", "an interpreter with pip, to fetch the wheels (it does not run the app)")
	findLinks := fset.String("find-links", "", "a directory of wheels for pip")
	noIndex := fset.Bool("no-index", false, "install from -find-links only, not from the package index")
	dir := "."
	// DIR may come before the flags (stepgraph build DIR -o app.zip) or after them.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 1 || fset.NArg() == 1 && dir != "." {
		return fmt.Errorf("build takes one app directory, not %q", append([]string{dir}, fset.Args()...))
	} else if fset.NArg() == 1 {
		dir = fset.Arg(0)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := checkDevApp(dir); err != nil {
		return err
	}
	py, err := exec.LookPath(*python)
	if err != nil {
		return fmt.Errorf("-python %s: %w (stepgraph build needs an interpreter with pip)", *python, err)
	}
	outSet := false
	fset.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "o" })
	if outSet && *image != "" {
		return fmt.Errorf("-o and -image: give one of them (a zip, or an image's build context)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := pyapp.BuildOptions{Dir: dir, Python: py, RuntimeFiles: pyruntime.Files(),
		RuntimeRequirements: pyruntime.Requirements, Arch: *arch, PythonVersion: *pyVersion,
		FindLinks: *findLinks, NoIndex: *noIndex}
	if *image != "" {
		dst, err := filepath.Abs(*image)
		if err != nil {
			return err
		}
		m, err := pyapp.BuildImage(ctx, opts, dst)
		if err != nil {
			return err
		}
		fmt.Printf("stepgraph build: %s: a Docker build context (Dockerfile, %s/) of %d graphs for %s on %s, handler %s, %.1f MB\n",
			*image, pyapp.ImageContextApp, len(m.Graphs), pyapp.BaseImage(strings.TrimPrefix(m.Runtime, "python")), m.Architecture, m.Handler, float64(m.Unzipped)/1e6)
		return nil
	}
	dst, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	opts.Skip = []string{dst}
	m, err := writeBuild(ctx, dst, opts)
	if err != nil {
		return err
	}
	fmt.Printf("stepgraph build: %s: %d graphs for Lambda %s on %s, handler %s, %.1f MB unzipped\n",
		*out, len(m.Graphs), m.Runtime, m.Architecture, m.Handler, float64(m.Unzipped)/1e6)
	return nil
}

// writeBuild builds into a temporary file beside dst, renamed over it once whole.
func writeBuild(ctx context.Context, dst string, opts pyapp.BuildOptions) (pyapp.Manifest, error) {
	f, err := os.CreateTemp(filepath.Dir(dst), ".stepgraph-build-*.zip")
	if err != nil {
		return pyapp.Manifest{}, err
	}
	defer os.Remove(f.Name())
	opts.Skip = append(opts.Skip, f.Name())
	m, err := pyapp.Build(ctx, opts, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return pyapp.Manifest{}, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return pyapp.Manifest{}, err
	}
	return m, os.Rename(f.Name(), dst)
}
