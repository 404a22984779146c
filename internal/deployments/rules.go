package deployments

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/sources"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

const (
	maxSecretValueLen = 64 << 10
	maxSecrets        = 100
	maxTextLen        = 1024
	// maxResourceSpecLen bounds a resource_spec as JSON: it is copied into
	// every revision, so it must stay small.
	maxResourceSpecLen = 64 << 10
)

var (
	namePattern       = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	secretNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
	// imagePattern is a container image reference: [registry[:port]/]path[:tag][@digest],
	// path components lowercase (the grammar of the distribution reference).
	imagePattern = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?/)?` +
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
		`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`)
)

// reservedSecretNames are set by the platform; a deployment may not define
// them (control-plane reference §1.8).
var reservedSecretNames = []string{
	"LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2", "LANGCHAIN_ENDPOINT", "LANGCHAIN_PROJECT",
	"LANGSMITH_PROJECT", "LANGCHAIN_API_KEY", "LANGSMITH_CONTROL_PLANE_API_KEY", "POSTGRES_URI",
	"POSTGRES_PASSWORD", "DATABASE_URI", "REDIS_URI", "LANGGRAPH_AUTH_TYPE", "LANGSMITH_TENANT_ID",
	"LANGSMITH_HOST_PROJECT_ID", "LANGSMITH_HOST_PROJECT_NAME", "LANGSMITH_HOST_REVISION_ID",
	"LANGSMITH_DEPLOYMENT_NAME", "LANGGRAPH_CLOUD_LICENSE_KEY", "LOG_JSON", "LANGSMITH_API_KEY",
	"LANGSMITH_ENDPOINT", "POSTGRES_URI_CUSTOM", "REDIS_URI_CUSTOM", "PATH", "PORT", "MOUNT_PREFIX",
}

const reservedSecretPrefix = "LSD_"

// checkReadOnly rejects record fields sent in a request.
func checkReadOnly(c *fail.Checks, ro readOnly, rev *SourceRevisionInput) {
	fields := []struct {
		name string
		raw  json.RawMessage
	}{
		{"id", ro.ID}, {"tenant_id", ro.TenantID}, {"created_at", ro.CreatedAt}, {"updated_at", ro.UpdatedAt},
		{"status", ro.Status}, {"latest_revision_id", ro.LatestRevisionID},
		{"active_revision_id", ro.ActiveRevisionID}, {"image_version", ro.ImageVersion},
	}
	for _, f := range fields {
		c.Add(f.raw != nil, f.name, "is read-only")
	}
	if rev != nil {
		c.Add(rev.RepoCommitSHA != nil, "source_revision_config.repo_commit_sha", "is read-only (set when the revision is built)")
		c.Add(rev.GraphConfigPath != nil && rev.LanggraphConfigPath != nil && *rev.GraphConfigPath != *rev.LanggraphConfigPath,
			"source_revision_config.langgraph_config_path", "is an alias of graph_config_path and differs from it: send one of the two")
	}
}

func checkName(c *fail.Checks, name string) {
	c.Add(!namePattern.MatchString(name), "name",
		"must be 1-63 lowercase letters, digits and hyphens, not starting or ending with a hyphen")
}

// normalizeSource maps upstream's alias and reports an unknown source.
func normalizeSource(s string) string {
	if s == sourceGitHubAlias {
		return SourceHostedRepo
	}
	return s
}

// checkConfig applies every per-source rule to a complete configuration:
// what a new deployment asks for, or what a deployment becomes after an
// update. repos is the sources port's rule for a repository URL (nil: the
// server reads no repositories, and the build says so).
func checkConfig(c *fail.Checks, source string, sc SourceConfig, rc SourceRevisionConfig, allowHTTPLoopback bool, repos sources.Checker) {
	switch source {
	case SourceHostedRepo:
		checkHosted(c, sc, rc, repos)
	case SourceExternalDocker:
		checkDocker(c, sc, rc)
	default:
		c.Add(true, "source", "must be one of hosted_repo (alias github), external_docker")
	}
	if sc.CustomURL != nil {
		c.AddErr(checkCustomURL(*sc.CustomURL, allowHTTPLoopback))
	}
	checkResourceSpec(c, sc.ResourceSpec)
	for _, f := range []struct {
		name string
		v    *string
	}{{"source_config.install_command", sc.InstallCommand}, {"source_config.build_command", sc.BuildCommand}} {
		c.Add(f.v != nil && len(*f.v) > maxTextLen, f.name, "must be at most %d characters", maxTextLen)
	}
}

func checkHosted(c *fail.Checks, sc SourceConfig, rc SourceRevisionConfig, repos sources.Checker) {
	if empty(sc.RepoURL) {
		c.Add(true, "source_config.repo_url", "is required for hosted_repo")
	} else {
		c.AddErr(checkRepoURL(*sc.RepoURL, repos))
	}
	c.Add(empty(rc.RepoRef), "source_revision_config.repo_ref", "is required for hosted_repo")
	c.Add(empty(rc.GraphConfigPath), "source_revision_config.graph_config_path", "is required for hosted_repo")
	c.Add(rc.ImageURI != nil, "source_revision_config.image_uri", "must not be set for hosted_repo (only for external_docker)")
	c.Add(sc.ListenerID != nil, "source_config.listener_id", "must not be set for hosted_repo (only for external_docker)")
	c.Add(present(sc.ListenerConfig), "source_config.listener_config", "must not be set for hosted_repo (only for external_docker)")
	if sc.BuildOnPush != nil && *sc.BuildOnPush && rc.RepoRef != nil && sources.IsTagRef(*rc.RepoRef) {
		c.Add(true, "source_config.build_on_push", "cannot be true when repo_ref is a tag (%s)", *rc.RepoRef)
	}
	c.Add(rc.RepoRef != nil && len(*rc.RepoRef) > 255, "source_revision_config.repo_ref", "must be at most 255 characters")
	c.Add(rc.GraphConfigPath != nil && len(*rc.GraphConfigPath) > maxTextLen, "source_revision_config.graph_config_path", "must be at most %d characters", maxTextLen)
}

func checkDocker(c *fail.Checks, sc SourceConfig, rc SourceRevisionConfig) {
	switch {
	case empty(rc.ImageURI):
		c.Add(true, "source_revision_config.image_uri", "is required for external_docker")
	case len(*rc.ImageURI) > 512 || !imagePattern.MatchString(*rc.ImageURI):
		c.Add(true, "source_revision_config.image_uri", "must be a container image reference like registry.example.com/team/agent:1.2")
	}
	const why = "must not be set for external_docker (only for hosted_repo)"
	c.Add(sc.RepoURL != nil, "source_config.repo_url", why)
	c.Add(sc.IntegrationID != nil, "source_config.integration_id", why)
	c.Add(sc.DeploymentType != nil, "source_config.deployment_type", why)
	c.Add(sc.BuildOnPush != nil, "source_config.build_on_push", why)
	c.Add(sc.InstallCommand != nil, "source_config.install_command", why)
	c.Add(sc.BuildCommand != nil, "source_config.build_command", why)
	c.Add(rc.RepoRef != nil, "source_revision_config.repo_ref", why)
	c.Add(rc.GraphConfigPath != nil, "source_revision_config.graph_config_path", why)
}

// checkCustomURL: the deployment's runtime is an http(s) endpoint
// (weburl's rule) or a Lambda function, named by its ARN.
func checkCustomURL(raw string, allowHTTPLoopback bool) error {
	const field = "source_config.custom_url"
	if strings.HasPrefix(raw, "arn:") {
		if !graphdoc.IsLambdaFunctionARN(raw) {
			return fail.Invalid(field, "%s", graphdoc.LambdaARNRule)
		}
		return nil
	}
	return weburl.Check(field, raw, allowHTTPLoopback)
}

// checkRepoURL: https for remote repositories, file:// for local ones;
// never credentials nor a query string (where tokens go), which would be
// stored and shown with the deployment. Then the sources port's own rule,
// decided without reaching the repository: whether this server reads local
// repositories, and which.
func checkRepoURL(raw string, repos sources.Checker) error {
	const field = "source_config.repo_url"
	if len(raw) > weburl.MaxLen {
		return fail.Invalid(field, "must be at most %d characters", weburl.MaxLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return fail.Invalid(field, "must be an absolute https:// or file:// URL")
	}
	if u.User != nil {
		return fail.Invalid(field, "must not contain credentials (use a deployment secret or an integration)")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return fail.Invalid(field, "must not contain a query string or a fragment (a token there would be stored and shown with the deployment)")
	}
	switch {
	case u.Scheme == "https" && u.Host != "":
	case u.Scheme == "file" && u.Path != "":
	default:
		return fail.Invalid(field, "must be an absolute https:// or file:// URL")
	}
	if repos == nil {
		return nil
	}
	if err := repos.CheckURL(raw); err != nil {
		var se *sources.Error
		if errors.As(err, &se) {
			return fail.Invalid(field, "%s", se.Reason)
		}
		return err
	}
	return nil
}

// Resource spec members, grouped by the rule that binds them.
var (
	specCounts = []string{"min_scale", "max_scale", "memory_mb", "memory_limit_mb",
		"queue_min_scale", "queue_max_scale", "queue_memory_mb", "queue_memory_limit_mb",
		"orchestrator_min_scale", "orchestrator_max_scale", "orchestrator_memory_mb", "orchestrator_memory_limit_mb",
		"executor_memory_mb", "executor_memory_limit_mb", "redis_memory_mb", "redis_memory_limit_mb",
		"db_memory_mb", "db_memory_limit_mb", "db_storage_gi", "db_max_connections"}
	specQuantities = []string{"cpu", "cpu_limit", "queue_cpu", "queue_cpu_limit", "orchestrator_cpu",
		"orchestrator_cpu_limit", "executor_cpu", "executor_cpu_limit", "redis_cpu", "redis_cpu_limit",
		"db_cpu", "db_cpu_limit"}
	// specPairs: the first of each pair may not be above the second.
	specPairs = [][2]string{
		{"min_scale", "max_scale"}, {"queue_min_scale", "queue_max_scale"}, {"orchestrator_min_scale", "orchestrator_max_scale"},
		{"cpu", "cpu_limit"}, {"memory_mb", "memory_limit_mb"},
		{"queue_cpu", "queue_cpu_limit"}, {"queue_memory_mb", "queue_memory_limit_mb"},
		{"orchestrator_cpu", "orchestrator_cpu_limit"}, {"orchestrator_memory_mb", "orchestrator_memory_limit_mb"},
		{"executor_cpu", "executor_cpu_limit"}, {"executor_memory_mb", "executor_memory_limit_mb"},
		{"redis_cpu", "redis_cpu_limit"}, {"redis_memory_mb", "redis_memory_limit_mb"},
		{"db_cpu", "db_cpu_limit"}, {"db_memory_mb", "db_memory_limit_mb"},
	}
	// specNamed: lists whose entries need a name; containers also an image.
	specNamed      = []string{"volumes", "volume_mounts", "image_pull_secrets", "init_containers", "sidecars"}
	specContainers = []string{"init_containers", "sidecars"}
)

// checkResourceSpec applies the numeric and shape rules the schema cannot
// express (the document already checked the types).
func checkResourceSpec(c *fail.Checks, spec map[string]any) {
	const prefix = "source_config.resource_spec."
	if raw, err := json.Marshal(spec); err != nil || len(raw) > maxResourceSpecLen {
		c.Add(true, "source_config.resource_spec", "must be at most %d KiB encoded as JSON", maxResourceSpecLen>>10)
	}
	num := func(k string) (float64, bool) {
		f, ok := spec[k].(float64)
		return f, ok
	}
	for _, k := range specCounts {
		if f, ok := num(k); ok {
			c.Add(f < 0 || f != math.Trunc(f), prefix+k, "must be a whole number >= 0")
		}
	}
	for _, k := range specQuantities {
		if f, ok := num(k); ok {
			c.Add(f < 0, prefix+k, "must be >= 0")
		}
	}
	for _, p := range specPairs {
		a, okA := num(p[0])
		b, okB := num(p[1])
		c.Add(okA && okB && a > b, prefix+p[0], "must not be above %s (%v > %v)", p[1], a, b)
	}
	for _, k := range specNamed {
		list, _ := spec[k].([]any)
		for i, item := range list {
			entry, _ := item.(map[string]any)
			name, _ := entry["name"].(string)
			c.Add(strings.TrimSpace(name) == "", fmt.Sprintf("%s%s[%d].name", prefix, k, i), "is required")
			if slices.Contains(specContainers, k) {
				image, _ := entry["image"].(string)
				c.Add(strings.TrimSpace(image) == "", fmt.Sprintf("%s%s[%d].image", prefix, k, i), "is required")
			}
		}
	}
}

// checkSecretNames applies the naming rules to a request's secrets.
func checkSecretNames(c *fail.Checks, list []SecretInput) {
	c.Add(len(list) > maxSecrets, "secrets", "must have at most %d entries", maxSecrets)
	seen := map[string]int{}
	for i, s := range list {
		field := fmt.Sprintf("secrets[%d].name", i)
		switch {
		case !secretNamePattern.MatchString(s.Name):
			c.Add(true, field, "must be an environment variable name (letters, digits and '_', not starting with a digit)")
		case slices.Contains(reservedSecretNames, s.Name) || strings.HasPrefix(s.Name, reservedSecretPrefix):
			c.Add(true, field, "%s is reserved by the platform", s.Name)
		}
		if j, dup := seen[s.Name]; dup {
			c.Add(true, field, "duplicate of secrets[%d].name %q", j, s.Name)
		} else {
			seen[s.Name] = i
		}
	}
}

// secretValue reads a secret's value from a request. remove reports an
// explicit null (allowed only when removing is: on update); keep reports the
// mask (keep the stored value).
func secretValue(c *fail.Checks, i int, s SecretInput, updating bool) (value string, remove, keep bool) {
	field := fmt.Sprintf("secrets[%d].value", i)
	if !present(s.Value) {
		if updating && s.Value != nil {
			return "", true, false
		}
		rule := "is required (a string)"
		if updating {
			rule = `is required (a string, "` + SecretMask + `" to keep it, or null to remove it)`
		}
		c.Add(true, field, "%s", rule)
		return "", false, false
	}
	if err := json.Unmarshal(s.Value, &value); err != nil {
		c.Add(true, field, "must be a string")
		return "", false, false
	}
	if value == SecretMask {
		if !updating {
			c.Add(true, field, "must be the value itself, not the mask")
		}
		return "", false, updating
	}
	c.Add(value == "", field, "must not be empty")
	c.Add(len(value) > maxSecretValueLen, field, "must be at most %d bytes", maxSecretValueLen)
	return value, false, false
}

func empty(p *string) bool { return p == nil || strings.TrimSpace(*p) == "" }

// present reports a JSON value that is there and not null.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}
