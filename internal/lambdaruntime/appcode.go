package lambdaruntime

import (
	"encoding/json"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stepgraph/stepgraph/internal/deployments"
)

// functionCode is what a runtime function runs: a container image, or a
// zip in S3 with the runtime, handler and architecture that run it.
type functionCode struct {
	imageURI               string
	bucket, key            string
	runtime, handler, arch string
}

func (c functionCode) packageType() types.PackageType {
	if c.imageURI != "" {
		return types.PackageTypeImage
	}
	return types.PackageTypeZip
}

func (c functionCode) kind() string {
	if c.imageURI != "" {
		return "container image"
	}
	return "zip"
}

func (c functionCode) functionCode() *types.FunctionCode {
	if c.imageURI != "" {
		return &types.FunctionCode{ImageUri: aws.String(c.imageURI)}
	}
	return &types.FunctionCode{S3Bucket: aws.String(c.bucket), S3Key: aws.String(c.key)}
}

func (c functionCode) String() string {
	if c.imageURI != "" {
		return "image " + c.imageURI
	}
	return "s3://" + c.bucket + "/" + c.key
}

// appRuntimes are the Lambda runtimes `stepgraph build` makes zips for,
// and appArchitectures Lambda's architectures.
var (
	appRuntimes      = []string{"python3.11", "python3.12", "python3.13"}
	appArchitectures = []string{"x86_64", "arm64"}
	// handlerPattern is a Python handler: a dotted module path and a
	// function name.
	handlerPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
)

// zipCode reads an app build's manifest (stepgraph_build.json): what is
// not one `stepgraph build` writes is refused, naming the key and the rule,
// before any call to Lambda.
func zipCode(app deployments.AppCode) (functionCode, error) {
	var m struct {
		Handler      string `json:"handler"`
		Runtime      string `json:"runtime"`
		Architecture string `json:"architecture"`
	}
	const what = "the app's build manifest (stepgraph_build.json)"
	switch {
	case app.Bucket == "" || app.Key == "":
		return functionCode{}, refused("the app's build has no zip in object storage (bucket %q, key %q)", app.Bucket, app.Key)
	case json.Unmarshal(app.Manifest, &m) != nil:
		return functionCode{}, refused("%s is not a JSON object", what)
	case !slices.Contains(appRuntimes, m.Runtime):
		return functionCode{}, refused("%s: runtime: %q is not a Lambda Python runtime the platform runs (%v)", what, m.Runtime, appRuntimes)
	case !slices.Contains(appArchitectures, m.Architecture):
		return functionCode{}, refused("%s: architecture: %q is not a Lambda architecture (%v)", what, m.Architecture, appArchitectures)
	case !handlerPattern.MatchString(m.Handler):
		return functionCode{}, refused("%s: handler: %q is not a Python handler (module.function)", what, m.Handler)
	}
	return functionCode{bucket: app.Bucket, key: app.Key, runtime: m.Runtime, handler: m.Handler, arch: m.Architecture}, nil
}
