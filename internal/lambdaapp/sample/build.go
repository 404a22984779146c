package sample

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Build compiles functions/<name> for each name into outDir/<name>/bootstrap,
// as `make lambdas` does but for the host's architecture (GOOS=linux,
// CGO_ENABLED=0, -tags lambda.norpc plus extraTags). root is the module root.
func Build(ctx context.Context, root, outDir string, extraTags []string, names ...string) error {
	tags := append([]string{"lambda.norpc"}, extraTags...)
	for _, name := range names {
		out := filepath.Join(outDir, name, "bootstrap")
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", strings.Join(tags, ","), "-trimpath",
			"-ldflags=-s -w", "-o", out, "./functions/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build functions/%s: %w\n%s", name, err, b)
		}
	}
	return nil
}

// Zip packs a bootstrap binary as a Lambda deployment package: one
// executable file named bootstrap.
func Zip(bootstrap string) ([]byte, error) { return ZipFile(bootstrap, "bootstrap") }

// ZipFile packs the file at path as a zip of one executable entry, name.
func ZipFile(path, name string) ([]byte, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(bin); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
