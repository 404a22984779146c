package lambdaapp

// Function is one Lambda of functions/<Name>: its role and, for API
// functions, the API Gateway routes (HTTP API route keys) it serves.
type Function struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"` // "api", "run-worker" or "deploy-worker"
	Routes []string `json:"routes,omitempty"`
}

// Functions lists every function; functions/routes.json is the same list
// for tools outside this module (the CDK app), and a test keeps the two,
// the mains under functions/ and the OpenAPI document in step: every
// operation is routed to exactly one function.
var Functions = []Function{
	{Name: "create-provider", Role: "api", Routes: []string{
		"POST /v2/auth/providers",
	}},
	{Name: "providers", Role: "api", Routes: []string{
		"GET /v2/auth/providers",
		"GET /v2/auth/providers/{provider_id}",
		"PATCH /v2/auth/providers/{provider_id}",
		"DELETE /v2/auth/providers/{provider_id}",
	}},
	{Name: "create-deployment", Role: "api", Routes: []string{
		"POST /v2/deployments",
	}},
	{Name: "deployments", Role: "api", Routes: []string{
		"GET /v2/deployments",
		"GET /v2/deployments/{deployment_id}",
		"PATCH /v2/deployments/{deployment_id}",
		"DELETE /v2/deployments/{deployment_id}",
		"GET /v2/deployments/{deployment_id}/revisions",
		"POST /v2/deployments/{deployment_id}/revisions",
		"GET /v2/deployments/{deployment_id}/revisions/{revision_id}",
		"POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy",
	}},
	{Name: "assistants", Role: "api", Routes: []string{
		"POST /assistants",
		"POST /assistants/search",
		"GET /assistants/{assistant_id}",
		"DELETE /assistants/{assistant_id}",
		"GET /assistants/{assistant_id}/graph",
		"GET /assistants/{assistant_id}/schemas",
	}},
	{Name: "threads", Role: "api", Routes: []string{
		"POST /threads",
		"POST /threads/search",
		"GET /threads/{thread_id}",
		"PATCH /threads/{thread_id}",
		"DELETE /threads/{thread_id}",
		"GET /threads/{thread_id}/state",
		"GET /threads/{thread_id}/state/{checkpoint_id}",
		"POST /threads/{thread_id}/history",
		"GET /threads/{thread_id}/stream",
	}},
	{Name: "thread-run-wait", Role: "api", Routes: []string{
		"POST /threads/{thread_id}/runs/wait",
	}},
	{Name: "stateless-run-wait", Role: "api", Routes: []string{
		"POST /runs/wait",
	}},
	{Name: "runs", Role: "api", Routes: []string{
		"GET /threads/{thread_id}/runs",
		"POST /threads/{thread_id}/runs",
		"GET /threads/{thread_id}/runs/{run_id}",
		"DELETE /threads/{thread_id}/runs/{run_id}",
		"GET /threads/{thread_id}/runs/{run_id}/join",
		"POST /threads/{thread_id}/runs/{run_id}/cancel",
		"POST /runs",
		// Streams answer through API Gateway's buffered integration for
		// now: the streaming functions are a later part (docs/streaming.md).
		"POST /threads/{thread_id}/runs/stream",
		"POST /runs/stream",
		"GET /threads/{thread_id}/runs/{run_id}/stream",
	}},
	{Name: "system", Role: "api", Routes: []string{
		"GET /ok",
		"GET /info",
		"GET /openapi.json",
		"GET /docs",
		"GET /docs/assets/{asset}",
		"GET /v2/graph-schema",
		"GET /v2/graph-config-schema",
	}},
	{Name: "run-worker", Role: "run-worker"},
	{Name: "deploy-worker", Role: "deploy-worker"},
}
