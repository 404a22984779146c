package lambdaapp

import (
	"context"
	"regexp"

	"github.com/stepgraph/stepgraph/internal/agentauth"
)

// executeAPIHost is the default address API Gateway gives an API
// (<api id>.execute-api.<region>.amazonaws.com, .com.cn in China).
var executeAPIHost = regexp.MustCompile(`^[a-z0-9]{1,32}\.execute-api\.[a-z0-9-]{1,32}\.amazonaws\.com(\.cn)?$`)

// stageName is an API Gateway stage name.
var stageName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// publicBase is the public base URL of a request API Gateway delivered,
// from its request context (domainName, stage), which API Gateway sets
// itself: a client cannot choose it, unlike the Host header. Only the
// execute-api addresses are derived (https://<domain>, plus /<stage> but
// for an HTTP API's $default stage); behind a custom domain the path
// mapping is unknown here, so it is "" and the stage's public URL must be
// configured (EnvPublicURL, the stack's publicUrl).
func publicBase(domainName, stage string) string {
	if !executeAPIHost.MatchString(domainName) {
		return ""
	}
	switch {
	case stage == "" || stage == "$default":
		return "https://" + domainName
	case stageName.MatchString(stage):
		return "https://" + domainName + "/" + stage
	}
	return ""
}

// withPublicBase gives agent auth the request's public base (used only
// when EnvPublicURL is unset: it takes precedence).
func withPublicBase(ctx context.Context, domainName, stage string) context.Context {
	if base := publicBase(domainName, stage); base != "" {
		return agentauth.WithPublicURL(ctx, base)
	}
	return ctx
}
