package stack

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awswafv2"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/cors"
)

// EdgeProps are the stage's browser and abuse protections (review #13;
// docs/aws.md, "The edge"): its CORS allow-list and its WAF web ACL.
type EdgeProps struct {
	// CORSOrigins is the stage's CORS allow-list (origins as browsers send
	// them, or "*"). nil means DefaultCORSOrigins; NoCORS turns CORS off
	// (then a browser's preflight gets the API's 405).
	CORSOrigins []string
	NoCORS      bool
	// NoWAF leaves the REST API without the web ACL (an emulator without
	// WAF; an account that attaches its own). The stack attaches one by
	// default.
	NoWAF bool
	// WAFKeyLimit is how many requests one API key (the X-Api-Key header)
	// may make in WAFKeyWindow across the whole stage, every Lambda
	// instance together; WAFIPLimit the same per client IP address in
	// WAFIPWindow (requests with or without a key). 0 means the defaults.
	WAFKeyLimit int
	WAFIPLimit  int
}

// Defaults of EdgeProps.
var (
	// DefaultCORSOrigins: LangGraph Studio. A stage's own UIs (useStream
	// pages) are added with -c corsOrigins.
	DefaultCORSOrigins = []string{"https://smith.langchain.com"}
)

const (
	// DefaultWAFKeyLimit: 6,000 requests a minute per key, the functions'
	// per-instance limit (100/s) held across instances.
	DefaultWAFKeyLimit = 6000
	// DefaultWAFIPLimit: 30,000 requests in 5 minutes per address (100/s).
	DefaultWAFIPLimit = 30000
	// WAFKeyWindow and WAFIPWindow are the rules' evaluation windows, in
	// seconds (WAF takes 60, 120, 300 or 600).
	WAFKeyWindow = 60
	WAFIPWindow  = 300
	// MinWAFLimit is the smallest limit WAF takes for a rate-based rule.
	MinWAFLimit = 10
	// EnvCORSOrigins is the API functions' allow-list
	// (internal/lambdaapp.EnvCORSOrigins).
	EnvCORSOrigins = "STEPGRAPH_CORS_ORIGINS"
)

// check fills in the defaults of the edge and checks them.
func (e *EdgeProps) check() error {
	if e.CORSOrigins == nil {
		e.CORSOrigins = DefaultCORSOrigins
	}
	for _, o := range e.CORSOrigins {
		if err := cors.CheckOrigin(o); err != nil {
			return fmt.Errorf("corsOrigins: %w", err)
		}
	}
	if e.WAFKeyLimit == 0 {
		e.WAFKeyLimit = DefaultWAFKeyLimit
	}
	if e.WAFIPLimit == 0 {
		e.WAFIPLimit = DefaultWAFIPLimit
	}
	for key, v := range map[string]int{"wafKeyLimit": e.WAFKeyLimit, "wafIpLimit": e.WAFIPLimit} {
		if v < MinWAFLimit || v > 2_000_000_000 {
			return fmt.Errorf("%s %d: want requests per window, %d to 2,000,000,000 (WAF's range)", key, v, MinWAFLimit)
		}
	}
	return nil
}

// origins is the allow-list in effect, nil when CORS is off.
func (e EdgeProps) origins() []string {
	if e.NoCORS {
		return nil
	}
	return e.CORSOrigins
}

// RestMethod is one method of the REST API: a route's, or ANY for every
// route of a path one function serves, or OPTIONS (preflights) on a path
// two functions share.
type RestMethod struct {
	Method, Path, Function string
	Stream                 bool
}

// restMethods are the REST API's methods for routes (in their order). A
// path one function serves gets ANY: its preflights and wrong methods
// reach that function, whose API answers them (internal/cors: 204 or 403
// by the allow-list; 405 with Allow). A path two functions share (POST to
// a create function, GET to a read one) keeps a method per route, and,
// with cors, an OPTIONS to the first one's function. Why not MOCK
// preflights (CDK's defaultCorsPreflightOptions): an OPTIONS method on
// each of the ~90 resources puts the stack over CloudFormation's 500
// resources; here the preflight costs a short invocation, cached by the
// browser for cors.MaxAge per URL.
func restMethods(routes []Route, withCORS bool) []RestMethod {
	var paths []string
	byPath := map[string][]Route{}
	for _, r := range routes {
		if byPath[r.Path] == nil {
			paths = append(paths, r.Path)
		}
		byPath[r.Path] = append(byPath[r.Path], r)
	}
	var out []RestMethod
	for _, path := range paths {
		rs := byPath[path]
		single := true
		for _, r := range rs {
			single = single && r.Function == rs[0].Function
		}
		if single {
			out = append(out, RestMethod{Method: "ANY", Path: path, Function: rs[0].Function, Stream: rs[0].Stream})
			continue
		}
		for _, r := range rs {
			out = append(out, RestMethod{Method: r.Method, Path: path, Function: r.Function, Stream: r.Stream})
		}
		if withCORS {
			out = append(out, RestMethod{Method: "OPTIONS", Path: path, Function: rs[0].Function, Stream: rs[0].Stream})
		}
	}
	return out
}

// newEdge puts the edge on the APIs: the HTTP API's CORS configuration (API
// Gateway answers preflights and sets the headers of every answer there),
// the allow-list in the API functions' environment (the REST API's
// answers, and the preflights that reach them: restMethods), and the WAF
// web ACL on the REST API's stage.
func newEdge(s awscdk.Stack, p Props, prefix string, httpAPI awsapigatewayv2.HttpApi, rest awsapigateway.RestApi,
	fns map[string]awslambda.Function) error {
	if origins := p.Edge.origins(); len(origins) > 0 {
		cfn, ok := httpAPI.Node().DefaultChild().(awsapigatewayv2.CfnApi)
		if !ok {
			return fmt.Errorf("the HTTP API is not an AWS::ApiGatewayV2::Api")
		}
		cfn.SetCorsConfiguration(&awsapigatewayv2.CfnApi_CorsProperty{
			AllowOrigins:  jsii.Strings(origins...),
			AllowMethods:  jsii.Strings(cors.Methods...),
			AllowHeaders:  jsii.Strings(cors.AllowHeaders...),
			ExposeHeaders: jsii.Strings(cors.ExposeHeaders...),
			MaxAge:        jsii.Number(cors.MaxAge),
		})
		for _, spec := range Functions {
			if spec.API {
				fns[spec.Name].AddEnvironment(jsii.String(EnvCORSOrigins), jsii.String(strings.Join(origins, ",")), nil)
			}
		}
	}
	if !p.Edge.NoWAF {
		newWebACL(s, p, prefix, rest)
	}
	return nil
}

// newWebACL declares the stage's web ACL and attaches it to the REST API's
// stage (an HTTP API cannot have one). Two rate-based rules, counted by WAF
// across the whole stage before any function runs, each answering 429 with
// the API's JSON error shape:
//   - per API key (the X-Api-Key header, as sent): the per-tenant limit
//     that holds across Lambda instances, which the functions' in-memory
//     limiter (STEPGRAPH_RATE_LIMIT) cannot;
//   - per client IP address, keyed or not: floods of made-up or missing
//     keys stop here instead of invoking functions.
//
// WAF counts over its window and acts within seconds, not per request: a
// burst can pass the limit briefly before the block starts.
func newWebACL(s awscdk.Stack, p Props, prefix string, rest awsapigateway.RestApi) awswafv2.CfnWebACL {
	// Metrics, but no sampled requests: WAF keeps samples with their
	// headers, and the X-Api-Key header is a secret.
	visibility := func(name string) *awswafv2.CfnWebACL_VisibilityConfigProperty {
		return &awswafv2.CfnWebACL_VisibilityConfigProperty{
			CloudWatchMetricsEnabled: jsii.Bool(true), SampledRequestsEnabled: jsii.Bool(false),
			MetricName: jsii.String(prefix + name),
		}
	}
	block := &awswafv2.CfnWebACL_RuleActionProperty{Block: &awswafv2.CfnWebACL_BlockActionProperty{
		CustomResponse: &awswafv2.CfnWebACL_CustomResponseProperty{
			ResponseCode: jsii.Number(429), CustomResponseBodyKey: jsii.String("rate-limited"),
		},
	}}
	acl := awswafv2.NewCfnWebACL(s, jsii.String("WebAcl"), &awswafv2.CfnWebACLProps{
		Name:          jsii.String(prefix + "edge"),
		Description:   jsii.String("stepgraph " + p.Stage + ": rate limits per API key and per client address"),
		Scope:         jsii.String("REGIONAL"),
		DefaultAction: &awswafv2.CfnWebACL_DefaultActionProperty{Allow: map[string]any{}},
		CustomResponseBodies: map[string]any{"rate-limited": &awswafv2.CfnWebACL_CustomResponseBodyProperty{
			ContentType: jsii.String("APPLICATION_JSON"),
			Content:     jsii.String(`{"detail":"rate limit exceeded at the edge (per API key or per address); retry later"}`),
		}},
		VisibilityConfig: visibility("edge"),
		Rules: []any{
			&awswafv2.CfnWebACL_RuleProperty{
				Name: jsii.String("per-api-key"), Priority: jsii.Number(0), Action: block,
				Statement: &awswafv2.CfnWebACL_StatementProperty{RateBasedStatement: &awswafv2.CfnWebACL_RateBasedStatementProperty{
					AggregateKeyType: jsii.String("CUSTOM_KEYS"), Limit: jsii.Number(p.Edge.WAFKeyLimit),
					EvaluationWindowSec: jsii.Number(WAFKeyWindow),
					CustomKeys: []any{&awswafv2.CfnWebACL_RateBasedStatementCustomKeyProperty{
						Header: &awswafv2.CfnWebACL_RateLimitHeaderProperty{Name: jsii.String("x-api-key"),
							TextTransformations: []any{&awswafv2.CfnWebACL_TextTransformationProperty{Priority: jsii.Number(0), Type: jsii.String("NONE")}}},
					}},
				}},
				VisibilityConfig: visibility("per-api-key"),
			},
			&awswafv2.CfnWebACL_RuleProperty{
				Name: jsii.String("per-address"), Priority: jsii.Number(1), Action: block,
				Statement: &awswafv2.CfnWebACL_StatementProperty{RateBasedStatement: &awswafv2.CfnWebACL_RateBasedStatementProperty{
					AggregateKeyType: jsii.String("IP"), Limit: jsii.Number(p.Edge.WAFIPLimit),
					EvaluationWindowSec: jsii.Number(WAFIPWindow),
				}},
				VisibilityConfig: visibility("per-address"),
			},
		},
	})
	awswafv2.NewCfnWebACLAssociation(s, jsii.String("WebAclRestApi"), &awswafv2.CfnWebACLAssociationProps{
		ResourceArn: rest.DeploymentStage().StageArn(),
		WebAclArn:   acl.AttrArn(),
	})
	return acl
}
