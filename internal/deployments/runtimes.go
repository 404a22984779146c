package deployments

import (
	"context"
	"errors"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// RuntimeProvisioner makes the runtime of an external_docker deployment
// that has an image_uri and no custom_url: on AWS, a Lambda function made
// from the image (internal/lambdaruntime). The local server has none: such
// a revision deploys without graphs there.
type RuntimeProvisioner interface {
	// EnsureRuntime creates the deployment's runtime, or updates it, to run
	// imageURI, and returns where it answers: a runtime URL as a custom_url
	// would give it (for Lambda, the function's ARN, qualified by the
	// version made for this revision). A *RuntimeRefusedError says why the
	// revision cannot get a runtime (it fails with that reason); any other
	// error is passing (provisioning is tried again).
	// The runtime holds none of the revision's secrets: they travel with
	// each call (RevisionGraphs.RuntimeSecrets; docs/runtime-protocol.md).
	EnsureRuntime(ctx context.Context, deploymentID, imageURI string) (runtimeURL string, err error)
	// Reserved reports whether runtimeURL names one of the runtimes it
	// makes, for any deployment: a custom_url may not name one, or a
	// deployment could call another's runtime (and its secrets).
	Reserved(runtimeURL string) bool
	// DeleteRuntime removes the deployment's runtime with every version of
	// it; nil when it has none. It is part of deleting the deployment.
	DeleteRuntime(ctx context.Context, deploymentID string) error
}

// RuntimeRefusedError is a runtime that cannot be made as asked: the
// platform is not configured for it, or the image or the environment is
// refused.
type RuntimeRefusedError struct{ Reason string }

func (e *RuntimeRefusedError) Error() string { return e.Reason }

// provisionRuntime gives an external_docker revision without a custom_url
// the runtime made from its image, once (a revision keeps its runtime URL:
// a redeploy serves it again): the runtime URL, or the reason the revision
// fails.
func (l *lifecycle) provisionRuntime(ctx context.Context, deploymentID string) (string, string, error) {
	if l.doc.RuntimeURL != "" {
		return l.doc.RuntimeURL, "", nil
	}
	url, err := l.s.Runtimes.EnsureRuntime(ctx, deploymentID, deref(l.doc.SourceRevisionConfig.ImageURI))
	var refused *RuntimeRefusedError
	switch {
	case errors.As(err, &refused):
		return "", "source_revision_config.image_uri: the deployment's runtime cannot be made from the image: " + refused.Reason, nil
	case err != nil:
		return "", "", err
	}
	l.doc.RuntimeURL = url
	return url, "", nil
}

// checkReservedRuntime: a custom_url may not name a runtime the platform
// made (another deployment's).
func (s *Service) checkReservedRuntime(c *fail.Checks, customURL *string) {
	c.Add(customURL != nil && s.Runtimes != nil && s.Runtimes.Reserved(*customURL), "source_config.custom_url",
		"names a runtime function the platform makes for deployments from their image_uri: give the URL or the Lambda function ARN of your own runtime")
}
