package pyapp

import (
	"archive/zip"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Lambda's bounds and names a build follows.
const (
	// MaxUnzippedBytes is Lambda's limit on a function's unzipped code
	// (250 MB, layers included).
	MaxUnzippedBytes = 250 << 20
	// LambdaHandler is the runtime's Lambda handler.
	LambdaHandler = "stepgraph_runtime.lambda_handler.handler"
	// ManifestName is the build's manifest, at the zip's root.
	ManifestName = "stepgraph_build.json"
)

// BuildOptions say how to build an app's Lambda zip.
type BuildOptions struct {
	// Dir is the app's directory (its langgraph.json).
	Dir string
	// Python is an interpreter with pip: it resolves and fetches the wheels
	// (never runs the app).
	Python string
	// RuntimeFiles is the runtime package (stepgraph_runtime/*.py) and
	// RuntimeRequirements its pins: both go into the zip.
	RuntimeFiles        fs.FS
	RuntimeRequirements []byte
	// Arch is Lambda's architecture: x86_64 (default) or arm64.
	Arch string
	// PythonVersion is the Lambda runtime's: 3.11 (default), 3.12 or 3.13.
	PythonVersion string
	// FindLinks and NoIndex are pip's: a wheelhouse, and no index at all.
	FindLinks string
	NoIndex   bool
	// MaxUnzipped bounds the zip's unzipped size (default MaxUnzippedBytes).
	MaxUnzipped int64
	// Skip are files under Dir not to pack (the zip being written there).
	Skip []string
}

// Manifest is the zip's stepgraph_build.json: what a deployer needs to
// make the function.
type Manifest struct {
	Handler      string            `json:"handler"`
	Runtime      string            `json:"runtime"`      // Lambda's runtime id, python3.11
	Architecture string            `json:"architecture"` // Lambda's name: x86_64 or arm64
	Config       string            `json:"config"`       // the app's langgraph.json, from the zip's root
	Graphs       map[string]string `json:"graphs"`       // graph id → path:attribute
	Requirements []string          `json:"requirements"` // the app's, as it pins them
	Unzipped     int64             `json:"unzipped_bytes"`
}

// lambdaGlibc is the newest manylinux glibc each Lambda Python runtime
// supports: python3.11 runs on Amazon Linux 2 (glibc 2.26, so
// manylinux2014), 3.12 and 3.13 on Amazon Linux 2023 (glibc 2.34).
var lambdaGlibc = map[string]int{"3.11": 17, "3.12": 34, "3.13": 34}

var lambdaArch = map[string]string{"x86_64": "x86_64", "arm64": "aarch64"}

// platforms are the wheel platform tags pip may choose for a runtime:
// every manylinux_2_N up to the runtime's glibc, with the legacy aliases.
func platforms(pyVersion, arch string) []string {
	machine := lambdaArch[arch]
	out := []string{"manylinux2014_" + machine}
	for minor := lambdaGlibc[pyVersion]; minor >= 17; minor-- {
		out = append(out, fmt.Sprintf("manylinux_2_%d_%s", minor, machine))
	}
	return out
}

// fixedTime is every entry's time: the same input makes the same bytes.
var fixedTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// skipDirs are an app directory's folders that are not the app's.
var skipDirs = map[string]bool{".git": true, ".venv": true, "venv": true, ".stepgraph": true, "__pycache__": true,
	"node_modules": true, ".langgraph_api": true, ".mypy_cache": true, ".pytest_cache": true, ".ruff_cache": true}

// Build writes the app's Lambda zip to w: the app's files, its
// dependencies and the runtime's (binary wheels for the Lambda platform),
// the runtime package and the manifest, in sorted order with fixed times
// and modes, so the same input gives the same bytes.
func Build(ctx context.Context, opts BuildOptions, w io.Writer) (Manifest, error) {
	return build(ctx, opts, MaxUnzippedBytes, func(_ Manifest, files map[string]source) error { return writeZip(w, files) })
}

// build gathers the app's files (its own, its dependencies', the
// runtime's and the manifest), bounded by max unless opts says otherwise,
// and hands them to write.
func build(ctx context.Context, opts BuildOptions, max int64, write func(Manifest, map[string]source) error) (Manifest, error) {
	opts.Arch = cmp.Or(opts.Arch, "x86_64")
	opts.PythonVersion = cmp.Or(opts.PythonVersion, "3.11")
	if _, ok := lambdaArch[opts.Arch]; !ok {
		return Manifest{}, fmt.Errorf("arch: %q is not a Lambda architecture (x86_64, arm64)", opts.Arch)
	}
	if _, ok := lambdaGlibc[opts.PythonVersion]; !ok {
		return Manifest{}, fmt.Errorf("python version: %q is not a Lambda Python runtime (3.11, 3.12, 3.13)", opts.PythonVersion)
	}
	m, err := readManifest(opts)
	if err != nil {
		return Manifest{}, err
	}
	tmp, err := os.MkdirTemp("", "stepgraph-build-")
	if err != nil {
		return Manifest{}, err
	}
	defer os.RemoveAll(tmp)
	site := filepath.Join(tmp, "site")
	if m.Requirements, err = installWheels(ctx, opts, tmp, site); err != nil {
		return Manifest{}, err
	}
	files := map[string]source{}
	if err := addTree(files, opts.Dir, "the app", opts.Skip); err != nil {
		return Manifest{}, err
	}
	if err := addTree(files, site, "its dependencies", nil); err != nil {
		return Manifest{}, err
	}
	if err := addFS(files, opts.RuntimeFiles); err != nil {
		return Manifest{}, err
	}
	if m.Unzipped, err = checkSize(files, cmp.Or(opts.MaxUnzipped, max)); err != nil {
		return Manifest{}, err
	}
	manifest, _ := json.MarshalIndent(m, "", "  ")
	files[ManifestName] = source{data: append(manifest, '\n'), what: "the manifest"}
	return m, write(m, files)
}

// readManifest reads the app's langgraph.json: its graphs (Python only).
func readManifest(opts BuildOptions) (Manifest, error) {
	config := filepath.Join(opts.Dir, "langgraph.json")
	raw, err := os.ReadFile(config)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: the app needs a langgraph.json: %w", opts.Dir, err)
	}
	var doc struct {
		Graphs map[string]json.RawMessage `json:"graphs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Manifest{}, fmt.Errorf("%s: is not valid JSON: %w", config, err)
	}
	if len(doc.Graphs) == 0 {
		return Manifest{}, fmt.Errorf("%s: /graphs: must be an object naming at least one graph", config)
	}
	m := Manifest{Handler: LambdaHandler, Runtime: "python" + opts.PythonVersion, Architecture: opts.Arch,
		Config: "langgraph.json", Graphs: map[string]string{}}
	for id, spec := range doc.Graphs {
		var p string
		var obj struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(spec, &p) != nil && json.Unmarshal(spec, &obj) == nil {
			p = obj.Path
		}
		if !strings.Contains(p, ":") {
			return Manifest{}, fmt.Errorf(`%s: /graphs/%s: must be "path/to/file.py:variable" or "module:variable"`, config, id)
		}
		m.Graphs[id] = p
	}
	return m, nil
}

// installWheels installs the app's and the runtime's requirements into
// site, binary wheels for the Lambda platform only (the runtime's env
// module, which reads the app's dependencies as the local server does).
func installWheels(ctx context.Context, opts BuildOptions, tmp, site string) ([]string, error) {
	rt := filepath.Join(tmp, "runtime")
	if err := os.CopyFS(rt, opts.RuntimeFiles); err != nil {
		return nil, err
	}
	reqs := filepath.Join(tmp, "runtime-requirements.txt")
	if err := os.WriteFile(reqs, opts.RuntimeRequirements, 0o600); err != nil {
		return nil, err
	}
	args := []string{"--config", filepath.Join(opts.Dir, "langgraph.json"),
		"--target", site, "--all", "--requirements", reqs, "--python-version", opts.PythonVersion}
	for _, p := range platforms(opts.PythonVersion, opts.Arch) {
		args = append(args, "--platform", p)
	}
	if opts.NoIndex {
		args = append(args, "--no-index")
	}
	if opts.FindLinks != "" {
		args = append(args, "--find-links", opts.FindLinks)
	}
	var answer struct {
		Installed []string `json:"installed"`
	}
	err := envCommand{Python: opts.Python, Args: args, Env: append(append(baseEnv(), pipEnv()...), "PYTHONPATH="+rt)}.run(ctx, &answer)
	var refused *EnvRefusal
	if errors.As(err, &refused) {
		return nil, fmt.Errorf("the dependencies for Lambda python%s on %s (binary wheels only): %s", opts.PythonVersion, opts.Arch, refused.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("install the dependencies: %w", err)
	}
	if answer.Installed == nil {
		return []string{}, nil
	}
	return answer.Installed, nil
}

// pipEnv is pip's configuration in the build's environment (PIP_INDEX_URL,
// PIP_FIND_LINKS, PIP_NO_INDEX, ...): a build machine may point pip at its
// own index or wheelhouse that way (CodeBuild's project variables; the
// local CodeBuild of the tests gives the offline wheelhouse) without a
// flag in the buildspec. Nothing else of the environment reaches pip.
func pipEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PIP_") {
			env = append(env, kv)
		}
	}
	return env
}

// source is one entry of the zip: a file on disk or bytes.
type source struct {
	file string
	data []byte
	exec bool
	size int64
	what string // whose it is, for a clash
}

func addEntry(files map[string]source, name string, s source) error {
	if old, ok := files[name]; ok {
		return fmt.Errorf("%s is both in %s and in %s", name, old.what, s.what)
	}
	files[name] = s
	return nil
}

// addTree adds the regular files under root (not the folders of
// skipDirs, compiled files, console scripts: bin/ of the dependencies
// names the building machine's interpreter).
func addTree(files map[string]source, root, what string, skip []string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != root && (skipDirs[d.Name()] || what != "the app" && rel == "bin" || slices.Contains(skip, p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(rel, ".pyc") || slices.Contains(skip, p) {
			return nil // symlinks, sockets: not part of a zip
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return addEntry(files, rel, source{file: p, exec: info.Mode()&0o111 != 0, size: info.Size(), what: what})
	})
}

func addFS(files map[string]source, fsys fs.FS) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return addEntry(files, p, source{data: data, size: int64(len(data)), what: "the stepgraph runtime"})
	})
}

// checkSize answers the unzipped size, or an error naming the largest
// top-level folders when it is over max.
func checkSize(files map[string]source, max int64) (int64, error) {
	var total int64
	byTop := map[string]int64{}
	for name, s := range files {
		total += s.size
		top, _, _ := strings.Cut(name, "/")
		byTop[top] += s.size
	}
	if total <= max {
		return total, nil
	}
	tops := make([]string, 0, len(byTop))
	for t := range byTop {
		tops = append(tops, t)
	}
	slices.SortFunc(tops, func(a, b string) int { return cmp.Or(cmp.Compare(byTop[b], byTop[a]), cmp.Compare(a, b)) })
	var largest []string
	for _, t := range tops[:min(5, len(tops))] {
		largest = append(largest, fmt.Sprintf("%s %.1f MB", t, float64(byTop[t])/1e6))
	}
	return total, fmt.Errorf("the app unzipped is %.1f MB, over Lambda's limit of %.1f MB for a function's code (largest: %s)",
		float64(total)/1e6, float64(max)/1e6, strings.Join(largest, ", "))
}

// writeZip writes the entries in sorted order, each with the fixed time
// and mode 0644 (0755 if executable).
func writeZip(w io.Writer, files map[string]source) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	zw := zip.NewWriter(w)
	for _, name := range names {
		s := files[name]
		h := &zip.FileHeader{Name: path.Clean(name), Method: zip.Deflate, Modified: fixedTime}
		h.SetMode(0o644)
		if s.exec {
			h.SetMode(0o755)
		}
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if err := copySource(fw, s); err != nil {
			return err
		}
	}
	return zw.Close()
}

func copySource(w io.Writer, s source) error {
	if s.file == "" {
		_, err := w.Write(s.data)
		return err
	}
	f, err := os.Open(s.file)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return err
	}
	return nil
}
