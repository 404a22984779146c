package pyapp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A LangGraph app as a Lambda container image.
//
// BuildImage writes a Docker build context instead of a zip: the zip's
// files under app/ and a Dockerfile FROM the AWS Lambda Python base image
// of the build's Python version and architecture, which copies them into
// ${LAMBDA_TASK_ROOT} and runs the runtime's Lambda handler. The image
// is an external_docker deployment's image_uri (the platform makes its
// function on AWS), or the code of a function of the user's own (its ARN
// as custom_url); the same image also runs stepgraph_runtime's HTTP server
// (a custom_url over HTTP). No Docker engine is needed to write it.

// MaxImageBytes bounds the files of an image's build context: Lambda's
// limit on a container image (10 GB unpacked, its base image included).
const MaxImageBytes = 10 << 30

// ImageContextApp is the build context's folder holding the zip's files.
const ImageContextApp = "app"

// lambdaPlatform is Docker's platform of each Lambda architecture.
var lambdaPlatform = map[string]string{"x86_64": "linux/amd64", "arm64": "linux/arm64"}

// BaseImage is the AWS Lambda Python base image of a build: its tag names
// the Python version (AWS updates the image behind it with security fixes;
// pin a digest in the Dockerfile for byte-identical images).
func BaseImage(pythonVersion string) string { return "public.ecr.aws/lambda/python:" + pythonVersion }

// Dockerfile is the build context's Dockerfile for m (a build's manifest).
func Dockerfile(m Manifest) string {
	version := strings.TrimPrefix(m.Runtime, "python")
	return fmt.Sprintf(`# A LangGraph app for stepgraph, written by `+"`stepgraph build -image`"+` (docs/runtime-protocol.md).
# graphs: %[1]s
#
# As a Lambda function (an external_docker deployment's image_uri, or your own function's code):
#   docker build --platform %[2]s -t APP .
# As an HTTP runtime (an external_docker deployment's custom_url; no authentication of its own:
# only the platform may reach it):
#   docker run -p 8080:8080 --entrypoint python3 APP -m stepgraph_runtime.server --config %[3]s --host 0.0.0.0 --port 8080
FROM --platform=%[2]s %[4]s
COPY %[5]s/ ${LAMBDA_TASK_ROOT}/
CMD ["%[6]s"]
`, strings.Join(sortedKeys(m.Graphs), ", "), lambdaPlatform[m.Architecture], m.Config, BaseImage(version), ImageContextApp, m.Handler)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// BuildImage writes the app's image build context to dir, which must not
// exist or be empty: Dockerfile and app/ (the files Build zips). It is
// written whole or not at all (built beside dir, then renamed to it).
func BuildImage(ctx context.Context, opts BuildOptions, dir string) (Manifest, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Manifest{}, fmt.Errorf("-image %s: exists and is not empty: give a new directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Manifest{}, err
	}
	opts.Skip = append(opts.Skip, dir)
	return build(ctx, opts, MaxImageBytes, func(m Manifest, files map[string]source) error {
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".stepgraph-image-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := writeTree(filepath.Join(tmp, ImageContextApp), files); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, "Dockerfile"), []byte(Dockerfile(m)), 0o644); err != nil {
			return err
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			return err
		}
		_ = os.Remove(dir) // empty, when it exists
		return os.Rename(tmp, dir)
	})
}

// writeTree writes the entries under root, mode 0644 (0755 if executable).
func writeTree(root string, files map[string]source) error {
	for name, s := range files {
		dst := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if s.exec {
			mode = 0o755
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		err = copySource(f, s)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
