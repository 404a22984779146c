package s3

import (
	"context"
	"os"
	"testing"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/payloads"
	"github.com/stepgraph/stepgraph/internal/payloads/payloadstest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func TestContract(t *testing.T) {
	ep := awstest.Start(t)
	st := New(ep.Config, BucketName(awstest.Prefix(t)), true)
	if err := st.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	payloadstest.Run(t, func(t *testing.T) payloads.Store { return st })
}
