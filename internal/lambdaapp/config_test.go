package lambdaapp

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestFromEnv(t *testing.T) {
	full := map[string]string{
		EnvTablePrefix:               "stepgraph-prod-",
		EnvSecretsPrefix:             "stepgraph/prod/",
		EnvRunStateMachineARN:        "arn:aws:states:us-east-1:123456789012:stateMachine:runs",
		EnvDeployStateMachineARN:     "arn:aws:states:us-east-1:123456789012:stateMachine:provision",
		EnvRunExpressStateMachineARN: "arn:aws:states:us-east-1:123456789012:stateMachine:runs-express",
		EnvLogLevel:                  "debug",
		EnvRuntimeRoleARN:            "arn:aws:iam::123456789012:role/stepgraph-prod-runtime",
		EnvRateLimit:                 "2.5",
		EnvCORSOrigins:               " https://smith.langchain.com, http://localhost:3000",
		// Limits and quotas: the local server's variables.
		"STEPGRAPH_MAX_RECURSION_LIMIT":      "500",
		"STEPGRAPH_MAX_STORED_BYTES_PER_ORG": "10000000000",
		EnvMaxRunTime:                        "20m",
		EnvStreamBudget:                      "10m",
		// The store's embeddings endpoint.
		EnvStoreEmbeddingsURL:       "https://embeddings.example.com/v1",
		EnvStoreEmbeddingsModel:     "text-embedding-3-small",
		EnvStoreEmbeddingsDims:      "256",
		EnvStoreIndexFields:         "text,title",
		EnvStoreEmbeddingsKeySecret: "store/embeddings-key",
	}
	c, err := FromEnv(RoleAPI, lookupIn(full))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits != (runs.Limits{MaxRecursionLimit: 500, MaxStoredBytes: 10000000000}) || c.RunTimeout != 20*time.Minute || c.StreamBudget != 10*time.Minute {
		t.Fatalf("limits %+v, run time %v", c.Limits, c.RunTimeout)
	}
	if c.TablePrefix != "stepgraph-prod-" || c.SecretsPrefix != "stepgraph/prod/" || c.LogLevel != slog.LevelDebug ||
		c.RunStateMachineARN != full[EnvRunStateMachineARN] || c.RunExpressStateMachineARN != full[EnvRunExpressStateMachineARN] || c.WebhooksAllowPrivate || c.RuntimeRoleARN != full[EnvRuntimeRoleARN] || c.RateLimit != 2.5 ||
		c.CORSOrigins != "https://smith.langchain.com,http://localhost:3000" {
		t.Fatalf("config %+v", c)
	}
	if c.Store != (StoreConfig{EmbeddingsURL: "https://embeddings.example.com/v1", EmbeddingsModel: "text-embedding-3-small",
		EmbeddingsDims: 256, IndexFields: "text,title", KeySecret: "store/embeddings-key"}) {
		t.Fatalf("store config %+v", c.Store)
	}
	for _, bad := range []map[string]string{
		{EnvStoreEmbeddingsURL: "http://embeddings.example.com/v1"},
		{EnvStoreEmbeddingsURL: "https://e.example.com", EnvStoreEmbeddingsDims: "0"},
		{EnvStoreEmbeddingsURL: "https://e.example.com", EnvStoreEmbeddingsKeySecret: "orgs/x"},
	} {
		env := map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/"}
		for k, v := range bad {
			env[k] = v
		}
		if _, err := FromEnv(RoleRunWorker, lookupIn(env)); err == nil {
			t.Errorf("store config %v accepted", bad)
		}
	}
	// Env round-trips.
	back, err := FromEnv(RoleAPI, lookupIn(c.Env()))
	if err != nil || back != c {
		t.Fatalf("Env round trip: %+v, %v; want %+v", back, err, c)
	}

	// The run worker's tenant role: read by the run worker only, an IAM
	// role's ARN, round-tripped.
	tenantEnv := map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/",
		EnvTenantRoleARN: "arn:aws:iam::123456789012:role/stepgraph-prod-tenant"}
	if c, err := FromEnv(RoleRunWorker, lookupIn(tenantEnv)); err != nil || c.TenantRoleARN != tenantEnv[EnvTenantRoleARN] {
		t.Fatalf("run worker: %+v, %v", c, err)
	} else if back, err := FromEnv(RoleRunWorker, lookupIn(c.Env())); err != nil || back != c {
		t.Fatalf("run worker Env round trip: %+v, %v", back, err)
	}
	if c, _ := FromEnv(RoleAPI, lookupIn(tenantEnv)); c.TenantRoleARN != "" {
		t.Errorf("an API function took the tenant role: %+v", c)
	}
	tenantEnv[EnvTenantRoleARN] = "stepgraph-prod-tenant"
	if _, err := FromEnv(RoleRunWorker, lookupIn(tenantEnv)); err == nil || !strings.Contains(err.Error(), EnvTenantRoleARN) {
		t.Errorf("a tenant role that is no ARN: %v", err)
	}

	// Workers need no state machine.
	worker := map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/"}
	if c, err := FromEnv(RoleRunWorker, lookupIn(worker)); err != nil || c.LogLevel != slog.LevelInfo || c.RateLimit != DefaultRateLimit {
		t.Fatalf("worker: %+v, %v", c, err)
	}
	if _, err := FromEnv(RoleAPI, lookupIn(worker)); err == nil ||
		!strings.Contains(err.Error(), EnvRunStateMachineARN) || !strings.Contains(err.Error(), EnvDeployStateMachineARN) {
		t.Fatalf("API without state machines: %v", err)
	}

	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"missing table prefix":         {map[string]string{EnvSecretsPrefix: "p/"}, EnvTablePrefix + " is not set"},
		"blank secrets prefix":         {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "  "}, EnvSecretsPrefix + " is not set"},
		"bad table prefix":             {map[string]string{EnvTablePrefix: "a b", EnvSecretsPrefix: "p/"}, EnvTablePrefix + " must be"},
		"bad log level":                {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvLogLevel: "loud"}, EnvLogLevel},
		"bad webhooks flag":            {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvWebhooksAllowPrivate: "yes"}, EnvWebhooksAllowPrivate},
		"bad runtime role":             {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvRuntimeRoleARN: "stepgraph-runtime"}, EnvRuntimeRoleARN + " must be an IAM role ARN"},
		"rate not a number":            {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvRateLimit: "fast"}, EnvRateLimit + " must be a number"},
		"negative rate":                {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvRateLimit: "-1"}, EnvRateLimit + " must be a number"},
		"infinite rate":                {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvRateLimit: "Inf"}, EnvRateLimit + " must be a number"},
		"bad CORS origin":              {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvCORSOrigins: "https://a.example/app"}, EnvCORSOrigins + ": CORS origin"},
		"bad cap":                      {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvMaxRunningPerOrg: "-3"}, EnvMaxRunningPerOrg + " must be"},
		"bad limit":                    {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", "STEPGRAPH_MAX_NODE_EXECUTIONS": "many"}, "STEPGRAPH_MAX_NODE_EXECUTIONS must be an integer"},
		"zero limit":                   {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", "STEPGRAPH_MAX_SUBGRAPH_DEPTH": "0"}, "STEPGRAPH_MAX_SUBGRAPH_DEPTH must be at least 1"},
		"negative quota":               {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", "STEPGRAPH_MAX_THREADS_PER_ORG": "-5"}, "STEPGRAPH_MAX_THREADS_PER_ORG must be at least 0"},
		"huge limit":                   {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", "STEPGRAPH_MAX_STATE_BYTES": "9999999999"}, "STEPGRAPH_MAX_STATE_BYTES must be at most 2147483647"},
		"stream budget too long":       {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvStreamBudget: "16m"}, EnvStreamBudget + " must be a duration from 100ms to 15m"},
		"stream budget not a duration": {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvStreamBudget: "long"}, EnvStreamBudget + " must be"},
		"bad run time":                 {map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvMaxRunTime: "forever"}, EnvMaxRunTime + " must be a duration"},
	} {
		_, err := FromEnv(RoleRunWorker, lookupIn(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, tc.want)
		}
	}
}

func TestOpenRejectsBadARNsNamingTheVariable(t *testing.T) {
	cfg := Config{Role: RoleAPI, TablePrefix: "p-", SecretsPrefix: "p/",
		RunStateMachineARN: "not-an-arn", DeployStateMachineARN: "arn:aws:states:us-east-1:1:stateMachine:x"}
	if _, err := Open(cfg, testAWS(), nil); err == nil || !strings.Contains(err.Error(), EnvRunStateMachineARN) {
		t.Fatalf("Open: %v, want an error naming %s", err, EnvRunStateMachineARN)
	}
	cfg.RunStateMachineARN, cfg.DeployStateMachineARN = cfg.DeployStateMachineARN, "nope"
	if _, err := Open(cfg, testAWS(), nil); err == nil || !strings.Contains(err.Error(), EnvDeployStateMachineARN) {
		t.Fatalf("Open: %v, want an error naming %s", err, EnvDeployStateMachineARN)
	}
	cfg.DeployStateMachineARN, cfg.RunExpressStateMachineARN = cfg.RunStateMachineARN, "not-an-arn"
	if _, err := Open(cfg, testAWS(), nil); err == nil || !strings.Contains(err.Error(), EnvRunExpressStateMachineARN) {
		t.Fatalf("Open: %v, want an error naming %s", err, EnvRunExpressStateMachineARN)
	}
	cfg.RunExpressStateMachineARN, cfg.SecretsPrefix = "", "bad prefix!"
	if _, err := Open(cfg, testAWS(), nil); err == nil || !strings.Contains(err.Error(), EnvSecretsPrefix) {
		t.Fatalf("Open: %v, want an error naming %s", err, EnvSecretsPrefix)
	}
}

func TestLoadAWSNeedsARegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	if _, err := LoadAWS(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Fatalf("LoadAWS without a region: %v", err)
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	cfg, err := LoadAWS(t.Context())
	if err != nil || cfg.Region != "eu-west-1" || cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:4566" {
		t.Fatalf("LoadAWS: %+v, %v", cfg, err)
	}
}

// The per-organization cap reaches the run worker's runs service (whose
// claims hold it): unset is the service's default, 0 no cap.
func TestMaxRunningPerOrgReachesTheRunWorker(t *testing.T) {
	for v, want := range map[string]int{"": 0, "4": 4, "0": -1} {
		env := map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/"}
		if v != "" {
			env[EnvMaxRunningPerOrg] = v
		}
		c, err := FromEnv(RoleRunWorker, lookupIn(env))
		if err != nil || c.MaxRunningPerOrg != want {
			t.Fatalf("%s=%q: %d, %v; want %d", EnvMaxRunningPerOrg, v, c.MaxRunningPerOrg, err, want)
		}
		if back, err := FromEnv(RoleRunWorker, lookupIn(c.Env())); err != nil || back != c {
			t.Fatalf("%s=%q: Env round trip %+v, %v; want %+v", EnvMaxRunningPerOrg, v, back, err, c)
		}
		a, err := Open(c, testAWS(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Runs.MaxRunningPerOrg != want {
			t.Fatalf("%s=%q: the run worker's MaxRunningPerOrg is %d, want %d", EnvMaxRunningPerOrg, v, a.Runs.MaxRunningPerOrg, want)
		}
	}
}

func TestCronFireConfig(t *testing.T) {
	env := map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvRunStateMachineARN: "arn:aws:states:us-east-1:123456789012:stateMachine:run"}
	_, err := FromEnv(RoleCronFire, lookupIn(env))
	for _, name := range []string{EnvCronScheduleGroup, EnvCronTargetARN, EnvCronRoleARN} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("cron-fire without %s: %v", name, err)
		}
	}
	env[EnvCronScheduleGroup], env[EnvCronTargetARN] = "p-crons", "arn:aws:lambda:us-east-1:123456789012:function:p-cron-fire"
	env[EnvCronRoleARN] = "not-a-role"
	if _, err := FromEnv(RoleCronFire, lookupIn(env)); err == nil || !strings.Contains(err.Error(), EnvCronRoleARN) {
		t.Errorf("a bad role ARN: %v", err)
	}
	env[EnvCronRoleARN] = "arn:aws:iam::123456789012:role/p-cron-scheduler"
	c, err := FromEnv(RoleCronFire, lookupIn(env))
	if err != nil || c.CronScheduleGroup != "p-crons" || c.CronTargetARN != env[EnvCronTargetARN] || c.CronRoleARN != env[EnvCronRoleARN] {
		t.Fatalf("cron-fire config %+v, %v", c, err)
	}
	if back, err := FromEnv(RoleCronFire, lookupIn(c.Env())); err != nil || back.CronRoleARN != c.CronRoleARN {
		t.Fatalf("Env round trip: %+v, %v", back, err)
	}
	// An API function without them keeps no schedules.
	delete(env, EnvCronScheduleGroup)
	delete(env, EnvCronTargetARN)
	delete(env, EnvCronRoleARN)
	env[EnvDeployStateMachineARN] = "arn:aws:states:us-east-1:123456789012:stateMachine:deploy"
	if _, err := FromEnv(RoleAPI, lookupIn(env)); err != nil {
		t.Fatalf("API without cron settings: %v", err)
	}
}
