package graphdoc

import "regexp"

// lambdaARN is a Lambda function's ARN, optionally qualified by a version or
// an alias: arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>].
var lambdaARN = regexp.MustCompile(`^arn:aws(?:-[a-z]+)*:lambda:[a-z]+(?:-[a-z]+)+-[0-9]+:[0-9]{12}:function:` +
	`[A-Za-z0-9_-]{1,64}(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?$`)

// LambdaARNRule says what IsLambdaFunctionARN accepts, for error messages.
const LambdaARNRule = "must be a Lambda function ARN: arn:<partition>:lambda:<region>:<12-digit account>:function:<name>[:<version or alias>], " +
	"e.g. arn:aws:lambda:us-east-1:123456789012:function:my-runtime"

// IsLambdaFunctionARN reports whether s names a Lambda function by its ARN:
// a runtime reached by Lambda Invoke (lambdaruntime.Runtime) rather than over HTTP.
func IsLambdaFunctionARN(s string) bool { return lambdaARN.MatchString(s) }
