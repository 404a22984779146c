package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/awsflow"
)

// LogDeliveryActions are what CDK grants a state machine that logs to
// CloudWatch Logs: the vended-logs delivery API, which has no
// resource-level permissions (so on "*", like X-Ray's). Only the Express
// front logs: an Express execution has no history to read otherwise.
var LogDeliveryActions = []string{
	"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
	"logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
}

// newExpressMachine declares the run machine's Express front
// (internal/awsflow, express.asl.json; docs/aws.md, "Express or
// Standard"): it invokes the run worker and starts executions of the run
// machine, nothing else. Express executions keep no history in Step
// Functions: failures (ERROR level, without execution data: no run
// input in the logs) go to a log group of their own.
func newExpressMachine(s constructs.Construct, p Props, prefix string, runWorker awslambda.Function,
	run awsstepfunctions.StateMachine, removal awscdk.RemovalPolicy) awsstepfunctions.StateMachine {
	name := prefix + RunExpressStateMachineName
	logs := awslogs.NewLogGroup(s, jsii.String("Logs-"+RunExpressStateMachineName), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/vendedlogs/states/" + name),
		Retention:     p.LogRetention,
		RemovalPolicy: removal,
	})
	sm := awsstepfunctions.NewStateMachine(s, jsii.String("StateMachine-"+RunExpressStateMachineName), &awsstepfunctions.StateMachineProps{
		StateMachineName: jsii.String(name),
		StateMachineType: awsstepfunctions.StateMachineType_EXPRESS,
		DefinitionBody:   awsstepfunctions.DefinitionBody_FromString(jsii.String(awsflow.ExpressASL)),
		DefinitionSubstitutions: &map[string]*string{
			awsflow.RunWorkerArn:  runWorker.FunctionArn(),
			awsflow.RunMachineArn: run.StateMachineArn(),
		},
		Logs: &awsstepfunctions.LogOptions{
			Destination:          logs,
			Level:                awsstepfunctions.LogLevel_ERROR,
			IncludeExecutionData: jsii.Bool(false),
		},
		RemovalPolicy:  awscdk.RemovalPolicy_DESTROY,
		TracingEnabled: jsii.Bool(true),
	})
	runWorker.GrantInvoke(sm)
	run.GrantStartExecution(sm)
	awscdk.NewCfnOutput(s, jsii.String("RunExpressStateMachineArn"), &awscdk.CfnOutputProps{
		Value: sm.StateMachineArn(), Description: jsii.String("The run machine's Express front (runs that can start now)"),
	})
	return sm
}
