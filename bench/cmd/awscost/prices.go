package main

// Prices are AWS's public on-demand prices in US East (N. Virginia), first
// tier (no free tier, no savings plans), as listed on the pages in Sources
// and checked on PricesCheckedOn.
type Prices struct {
	CheckedOn string `json:"checked_on"`
	// Lambda, arm64.
	LambdaPerRequest  float64 `json:"lambda_per_request"`
	LambdaPerGBSecond float64 `json:"lambda_per_gb_second"`
	SFNPerTransition  float64 `json:"sfn_standard_per_state_transition"`
	DynamoPerWRU      float64 `json:"dynamodb_per_wru"`
	DynamoPerRRU      float64 `json:"dynamodb_per_rru"`
	SecretsPerCall    float64 `json:"secretsmanager_per_api_call"`
	APIGatewayPerReq  float64 `json:"apigateway_http_per_request"`
	LogsPerGB         float64 `json:"cloudwatch_logs_ingestion_per_gb"`
	// S3 (the payload store): PUT, COPY, POST and LIST requests; GET
	// requests. DELETE is free; storage is not per run.
	S3PerWrite         float64 `json:"s3_per_put_list_request"`
	S3PerRead          float64 `json:"s3_per_get_request"`
	ExpressPerRequest  float64 `json:"sfn_express_per_request"`
	ExpressPerGBSecond float64 `json:"sfn_express_per_gb_second"`
	// LangSmith Deployment: per Agent Run (a resume after an interrupt is a
	// run of its own).
	LangSmithPerRun float64 `json:"langsmith_per_agent_run"`
	// Sources are the official pages; Confirmed says what the figures were
	// checked against (stored copies found with the project's search tool).
	Sources   map[string]string `json:"sources"`
	Confirmed map[string]string `json:"confirmed"`
}

// PricesCheckedOn is when the prices below were last compared with AWS's
// and LangChain's pages.
const PricesCheckedOn = "2026-11-23"

var prices = Prices{
	CheckedOn:          PricesCheckedOn,
	LambdaPerRequest:   0.20 / 1e6,
	LambdaPerGBSecond:  0.0000133334,
	SFNPerTransition:   0.025 / 1000,
	DynamoPerWRU:       0.625 / 1e6, // since the on-demand price cut of 1 Nov 2024
	DynamoPerRRU:       0.125 / 1e6,
	SecretsPerCall:     0.05 / 10000,
	APIGatewayPerReq:   1.00 / 1e6,
	LogsPerGB:          0.50,
	S3PerWrite:         0.005 / 1000,
	S3PerRead:          0.0004 / 1000,
	ExpressPerRequest:  1.00 / 1e6,
	ExpressPerGBSecond: 0.0000166667, // $0.06 per GB-hour, first 1,000 GB-hours
	LangSmithPerRun:    0.005,
	Sources: map[string]string{
		"Lambda":              "https://aws.amazon.com/lambda/pricing/",
		"Step Functions":      "https://aws.amazon.com/step-functions/pricing/",
		"DynamoDB":            "https://aws.amazon.com/dynamodb/pricing/on-demand/",
		"Secrets Manager":     "https://aws.amazon.com/secrets-manager/pricing/",
		"API Gateway":         "https://aws.amazon.com/api-gateway/pricing/",
		"CloudWatch Logs":     "https://aws.amazon.com/cloudwatch/pricing/",
		"S3":                  "https://aws.amazon.com/s3/pricing/",
		"LangSmith":           "https://docs.langchain.com/langsmith/billing",
		"DynamoDB units":      "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html, CapacityUnitCalculations.html (item sizes), GSI.html (index writes)",
		"Lambda INIT billing": "https://aws.amazon.com/blogs/compute/aws-lambda-standardizes-billing-for-init-phase/ (INIT billed for all configurations from 1 Aug 2025)",
	},
	Confirmed: map[string]string{
		"Lambda":          "Arm $0.0000133334 per GB-s for the first 7.5 billion GB-s a month and $0.20 per 1M requests: AWS's page (copy) and third-party summaries (cloudchipr.com, 2024); billed per 1 ms",
		"Step Functions":  "AWS's page (copy): $0.0250 per 1,000 transitions in US East (N. Virginia), retries billed as transitions; Express $1.00 per 1M requests and $0.06 per GB-hour for the first 1,000 GB-hours, 64 MB chunks, 100 ms rounding (the page's pricing examples)",
		"DynamoDB":        "$0.625 per 1M WRU and $0.125 per 1M RRU in us-east-1 after the 50% on-demand cut effective 1 Nov 2024 (third-party summaries: airbyte.com, jusdb.com); AWS's page itself was not among the stored copies",
		"Secrets Manager": "$0.05 per 10,000 API calls and $0.40 per secret-month (third-party summary: hivebook.wiki); AWS's page was not among the stored copies",
		"API Gateway":     "HTTP APIs $1.00 per 1M requests for the first 300M a month (third-party summaries: apigatewaycost.com, awsforengineers.com), metered in 512 KB increments (AWS whitepaper, API Gateway private APIs, cost optimization)",
		"CloudWatch Logs": "Standard log class ingestion $0.50 per GB in us-east-1 (third-party summaries: c3x.dev, hykell.com)",
		"S3":              "S3 Standard in us-east-1: $0.005 per 1,000 PUT, COPY, POST, LIST requests, $0.0004 per 1,000 GET requests, DELETE free (as quoted in docs/aws.md and the 2026-11 review, §10: \"PUT costs $0.005 per 1,000\"); storage $0.023 per GB-month is not per run",
		"LangSmith":       "\"An Agent Run is one end-to-end invocation of a deployed LangGraph agent and is billed at $0.005 each ... resuming after an interrupt creates a separate Agent Run\"; deployment uptime billed on top (langchain-ai/docs PR #1615, src/langsmith/billing.mdx)",
	},
}
