package sfn

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// TaskAPI is the part of the Step Functions client a Waker uses.
type TaskAPI interface {
	SendTaskSuccess(ctx context.Context, in *awssfn.SendTaskSuccessInput, optFns ...func(*awssfn.Options)) (*awssfn.SendTaskSuccessOutput, error)
}

// Waker is a runs.Waker: it ends the .waitForTaskToken task a queued run's
// execution parked on (internal/awsflow, state Park), so the execution
// steps the run again.
type Waker struct{ client TaskAPI }

// NewWaker returns a Waker sending through client.
func NewWaker(client TaskAPI) *Waker { return &Waker{client: client} }

// woken is the parked task's output; the state machine discards it.
const woken = `{"woken":true}`

// Wake implements runs.Waker. A token whose task is over (it timed out and
// the execution stepped on, the execution ended, or it was woken already)
// is not an error: there is nothing left to wake.
func (w *Waker) Wake(ctx context.Context, token string) error {
	_, err := w.client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(token), Output: aws.String(woken)})
	var timedOut *types.TaskTimedOut
	var missing *types.TaskDoesNotExist
	var invalid *types.InvalidToken
	switch {
	case err == nil, errors.As(err, &timedOut), errors.As(err, &missing), errors.As(err, &invalid):
		return nil
	}
	return fmt.Errorf("wake a parked run execution: %w", err) // the token is not in the message: it is a credential of the task
}
