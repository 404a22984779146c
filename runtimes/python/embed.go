package pyruntime

import (
	"bytes"
	"embed"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed stepgraph_runtime/*.py
var files embed.FS

// Requirements is the runtime's requirements.txt: the pins of what it
// imports (stepgraph dev installs them in the virtual environment it
// makes; stepgraph build into an app's Lambda zip).
//
//go:embed requirements.txt
var Requirements []byte

// Files is the runtime package: stepgraph_runtime/*.py.
func Files() fs.FS { return files }

// Extract writes the runtime package under dir (dir/stepgraph_runtime),
// replacing files that differ, and returns dir: the directory to put on
// PYTHONPATH.
func Extract(dir string) (string, error) {
	err := fs.WalkDir(files, "stepgraph_runtime", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	return dir, err
}
