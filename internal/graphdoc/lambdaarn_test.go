package graphdoc

import (
	"strings"
	"testing"
)

func TestIsLambdaFunctionARN(t *testing.T) {
	for s, want := range map[string]bool{
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime":                 true,
		"arn:aws:lambda:eu-central-1:123456789012:function:my_runtime:live":         true,
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime:7":               true,
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime:$LATEST":         true,
		"arn:aws-cn:lambda:cn-north-1:123456789012:function:f":                      true,
		"arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f":               true,
		"arn:aws:lambda:us-east-1:000000000000:function:stepgraph-dev-rt-0a1b":      true,
		"https://runtime.example.com":                                               false,
		"arn:aws:lambda:us-east-1:123456789012:function:":                           false,
		"arn:aws:lambda:us-east-1:12345:function:f":                                 false,
		"arn:aws:lambda:us-east-1:123456789012:layer:f":                             false,
		"arn:aws:s3:us-east-1:123456789012:function:f":                              false,
		"arn:aws:lambda:us-east-1:123456789012:function:f:a:b":                      false,
		"arn:aws:lambda:us-east-1:123456789012:function:f g":                        false,
		"arn:aws:lambda:us-east-1:123456789012:function:" + strings.Repeat("f", 65): false,
		" arn:aws:lambda:us-east-1:123456789012:function:f":                         false,
	} {
		if got := IsLambdaFunctionARN(s); got != want {
			t.Errorf("IsLambdaFunctionARN(%q) = %v, want %v", s, got, want)
		}
	}
}
