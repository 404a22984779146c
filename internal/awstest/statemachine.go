package awstest

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// StateMachine creates the state machine in and returns its ARN, failing
// the test otherwise. Like AWS, it is idempotent: the SDK retries a create
// whose answer it did not get (a loaded machine, a dropped loopback
// connection), and AWS then answers the machine the first attempt made,
// when its definition and role are the same; MiniStack answers
// StateMachineAlreadyExists instead, so that case is looked up here. A
// name is a test's own (Prefix), so an existing machine of that name with
// the same definition is the one this call made.
func StateMachine(t testing.TB, c *sfn.Client, in *sfn.CreateStateMachineInput) string {
	t.Helper()
	ctx := context.Background()
	out, err := c.CreateStateMachine(ctx, in)
	if err == nil {
		return aws.ToString(out.StateMachineArn)
	}
	var exists *types.StateMachineAlreadyExists
	if !errors.As(err, &exists) {
		t.Fatalf("create state machine %s: %v", aws.ToString(in.Name), err)
	}
	p := sfn.NewListStateMachinesPaginator(c, &sfn.ListStateMachinesInput{})
	for p.HasMorePages() {
		page, perr := p.NextPage(ctx)
		if perr != nil {
			t.Fatalf("create state machine %s: %v; listing the machines: %v", aws.ToString(in.Name), err, perr)
		}
		for _, m := range page.StateMachines {
			if aws.ToString(m.Name) != aws.ToString(in.Name) {
				continue
			}
			d, derr := c.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: m.StateMachineArn})
			if derr != nil || aws.ToString(d.Definition) != aws.ToString(in.Definition) || aws.ToString(d.RoleArn) != aws.ToString(in.RoleArn) {
				t.Fatalf("create state machine %s: %v (another machine has that name: %v)", aws.ToString(in.Name), err, derr)
			}
			return aws.ToString(m.StateMachineArn)
		}
	}
	t.Fatalf("create state machine %s: %v, yet no machine has that name", aws.ToString(in.Name), err)
	return ""
}
