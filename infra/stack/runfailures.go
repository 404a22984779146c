package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/awsflow"
)

// Delivery of the run executions' failures (RunFailuresRule).
const (
	// RunFailuresRuleName is the rule's name after the stage's prefix, and
	// RunFailuresQueueName its dead-letter queue's.
	RunFailuresRuleName  = "run-failures"
	RunFailuresQueueName = "run-failures-dlq"
	// RunFailureMaxAge bounds how long EventBridge, then Lambda's
	// asynchronous invocation, keep trying to hand a report to the run
	// worker (a throttled worker is retried all that time); past it the
	// report goes to the queue.
	RunFailureMaxAge = 6 * 60 * 60 // seconds
	// RunFailureRetries are the retries of a report the run worker failed
	// on (its store did not answer): Lambda's asynchronous retries, a
	// minute then two apart.
	RunFailureRetries = 2
)

// newRunFailures pushes the run executions that end without their run
// being done (review #4 and #11) to the run worker: an EventBridge rule on
// the run state machine's "Step Functions Execution Status Change" events
// of status FAILED, TIMED_OUT or ABORTED invokes it with the event
// (internal/lambdaapp ends the run: ExecutionLost, its thread free). That
// repairs what nothing else would: an Abandon state that was itself
// throttled or failed, an execution timed out or stopped by an operator,
// for background runs with no waiter. Waiters then ask DescribeExecution
// only after a long silence (internal/runs lostSilence).
//
// EventBridge invokes the worker asynchronously: Lambda keeps a throttled
// invocation for up to RunFailureMaxAge and retries a failed one
// RunFailureRetries times. A report that could not be delivered (by
// EventBridge) or handled (by the worker) lands in the dead-letter queue,
// encrypted, kept 14 days, and its first message raises the alarm
// "run-failures-dlq" on topic: an operator replays it (the event is the
// worker's input as it is) or looks at the run.
func newRunFailures(s awscdk.Stack, prefix, stage string, worker awslambda.Function, runMachine awsstepfunctions.StateMachine,
	topic awssns.Topic) {
	dlq := awssqs.NewQueue(s, jsii.String("RunFailuresDLQ"), &awssqs.QueueProps{
		QueueName:       jsii.String(prefix + RunFailuresQueueName),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	})
	var statuses []*string
	for _, st := range awsflow.RunEndedStatuses {
		statuses = append(statuses, jsii.String(st))
	}
	awsevents.NewRule(s, jsii.String("RunFailures"), &awsevents.RuleProps{
		RuleName:    jsii.String(prefix + RunFailuresRuleName),
		Description: jsii.String("stepgraph " + stage + ": a run execution that failed, timed out or was aborted ends its run"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.states"),
			DetailType: jsii.Strings(awsflow.ExecutionStatusChange),
			Detail: &map[string]any{
				"stateMachineArn": []any{runMachine.StateMachineArn()},
				"status":          statuses,
			},
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(worker, &awseventstargets.LambdaFunctionProps{
			DeadLetterQueue: dlq,
			MaxEventAge:     awscdk.Duration_Seconds(jsii.Number(RunFailureMaxAge)),
			RetryAttempts:   jsii.Number(185), // EventBridge's most, within MaxEventAge
		})},
	})
	// What the worker could not handle: Lambda's asynchronous invocation
	// config of the worker (EventBridge is its only asynchronous caller;
	// the state machines invoke it synchronously).
	awslambda.NewCfnEventInvokeConfig(s, jsii.String("RunWorkerAsyncInvoke"), &awslambda.CfnEventInvokeConfigProps{
		FunctionName:             worker.FunctionName(),
		Qualifier:                jsii.String("$LATEST"),
		MaximumEventAgeInSeconds: jsii.Number(RunFailureMaxAge),
		MaximumRetryAttempts:     jsii.Number(RunFailureRetries),
		DestinationConfig: &awslambda.CfnEventInvokeConfig_DestinationConfigProperty{
			OnFailure: &awslambda.CfnEventInvokeConfig_OnFailureProperty{Destination: dlq.QueueArn()},
		},
	})
	// Lambda sends the failed invocation with the function's role: that
	// one action on that one queue (the queue's key is SQS's own).
	worker.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: jsii.Strings(*dlq.QueueArn()),
	}))
	alarm := awscloudwatch.NewAlarm(s, jsii.String("Alarm-run-failures-dlq"), &awscloudwatch.AlarmProps{
		AlarmName:        jsii.String(prefix + RunFailuresQueueName),
		AlarmDescription: jsii.String("A run execution's failure could not be handed to the run worker: replay the queue's messages to it"),
		Metric: dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(5)),
		}),
		Threshold: jsii.Number(1), EvaluationPeriods: jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	alarm.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
}
