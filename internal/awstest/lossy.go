package awstest

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stepgraph/stepgraph/internal/ministack"
)

// DropFirstAnswers returns cfg with an HTTP client that loses the answer to
// the first attempt of every call of the given operations (X-Amz-Target
// values such as "DynamoDB_20120810.TransactWriteItems" or
// "secretsmanager.CreateSecret"): the request reaches the emulator and takes
// effect, then the client sees a connection reset, and the SDK retries. This
// is what a dropped connection does, and what adapters must survive: a
// retried create must not report a conflict, a retried delete a missing
// record. Retries of the returned config do not back off and are not
// rate-limited, so tests stay fast, and a call gets lossyAttempts attempts:
// the dropped first one, and room for a transient error of a loaded machine
// on a retry (the test is about what a retry does, not about how many).
func DropFirstAnswers(cfg aws.Config, targets ...string) aws.Config {
	want := map[string]bool{}
	for _, t := range targets {
		want[t] = true
	}
	cfg.HTTPClient = &lossyClient{next: ministack.HTTPClient(), targets: want, seen: map[string]bool{}}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			o.RateLimiter = ratelimit.None
			o.MaxAttempts = lossyAttempts
		})
	}
	return cfg
}

// lossyAttempts is how many attempts a call of a DropFirstAnswers config
// gets (the SDK's default is 3).
const lossyAttempts = 8

type lossyClient struct {
	next    aws.HTTPClient
	targets map[string]bool

	mu      sync.Mutex
	seen    map[string]bool // invocation IDs whose first answer was dropped
	dropped int
}

// errDropped looks like a connection reset to the SDK's retryer.
var errDropped = errors.New("read: connection reset by peer (awstest dropped the answer)")

func (c *lossyClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || !c.targets[req.Header.Get("X-Amz-Target")] {
		return resp, err
	}
	id := req.Header.Get("Amz-Sdk-Invocation-Id")
	c.mu.Lock()
	drop := id != "" && !c.seen[id]
	if drop {
		c.seen[id] = true
		c.dropped++
	}
	c.mu.Unlock()
	if !drop {
		return resp, nil
	}
	resp.Body.Close()
	return nil, errDropped
}

// Dropped reports how many answers a config of DropFirstAnswers has dropped
// (0 for any other config).
func Dropped(cfg aws.Config) int {
	c, ok := cfg.HTTPClient.(*lossyClient)
	if !ok {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}
