package stack

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/awsflow"
)

// runFailuresQueueID is the logical ID of the run failures' dead-letter queue.
func runFailuresQueueID(t *testing.T, js map[string]any) string {
	t.Helper()
	for id, r := range resources(js, "AWS::SQS::Queue") {
		if props(r)["QueueName"] == ResourcePrefix(testStage)+RunFailuresQueueName {
			return id
		}
	}
	t.Fatal("no run failures queue")
	return ""
}

// Review #4 and #11: the run executions that fail, time out or are aborted
// are pushed to the run worker by an EventBridge rule, with a dead-letter
// queue for what could be neither delivered nor handled, and an alarm on
// it. MiniStack emits no execution status events, so the template is what
// is checked here (the worker's handling of the event runs on the
// emulator: functions TestEndedExecutionsEndTheirRuns).
func TestRunFailuresRule(t *testing.T) {
	_, js := synth(t)
	fnID, machineID := map[string]string{}, map[string]string{}
	for id, r := range resources(js, "AWS::Lambda::Function") {
		fnID[strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))] = id
	}
	for id, r := range resources(js, "AWS::StepFunctions::StateMachine") {
		machineID[strings.TrimPrefix(str(props(r)["StateMachineName"]), ResourcePrefix(testStage))] = id
	}
	queue := runFailuresQueueID(t, js)
	worker := "{GetAtt:" + fnID[FnRunWorker] + ".Arn}"

	var rule map[string]any
	var ruleID string
	for id, r := range resources(js, "AWS::Events::Rule") {
		if props(r)["Name"] == ResourcePrefix(testStage)+RunFailuresRuleName {
			rule, ruleID = props(r), id
		}
	}
	if rule == nil {
		t.Fatal("no run failures rule")
	}
	pattern, _ := json.Marshal(rule["EventPattern"])
	var p struct {
		Source     []string `json:"source"`
		DetailType []string `json:"detail-type"`
		Detail     struct {
			StateMachineArn []any    `json:"stateMachineArn"`
			Status          []string `json:"status"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(pattern, &p); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Source, []string{"aws.states"}) || !reflect.DeepEqual(p.DetailType, []string{awsflow.ExecutionStatusChange}) {
		t.Errorf("pattern %s: want source aws.states, detail-type %q", pattern, awsflow.ExecutionStatusChange)
	}
	if !reflect.DeepEqual(p.Detail.Status, []string{"FAILED", "TIMED_OUT", "ABORTED"}) {
		t.Errorf("statuses %v, want FAILED, TIMED_OUT, ABORTED", p.Detail.Status)
	}
	if len(p.Detail.StateMachineArn) != 1 || str(p.Detail.StateMachineArn[0]) != "{Ref:"+machineID[RunStateMachineName]+"}" {
		t.Errorf("state machines %v, want only the run machine", p.Detail.StateMachineArn)
	}
	targets, _ := rule["Targets"].([]any)
	if len(targets) != 1 {
		t.Fatalf("targets %v, want the run worker", targets)
	}
	target := targets[0].(map[string]any)
	if str(target["Arn"]) != worker {
		t.Errorf("target %s, want the run worker %s", str(target["Arn"]), worker)
	}
	if target["Input"] != nil || target["InputTransformer"] != nil {
		t.Errorf("the target reshapes the event (%v): the worker reads it as EventBridge sends it", target)
	}
	dlc, _ := target["DeadLetterConfig"].(map[string]any)
	rp, _ := target["RetryPolicy"].(map[string]any)
	if str(dlc["Arn"]) != "{GetAtt:"+queue+".Arn}" || rp["MaximumEventAgeInSeconds"] != float64(RunFailureMaxAge) {
		t.Errorf("target dead letters %v, retries %v: want the queue, %d s", dlc, rp, RunFailureMaxAge)
	}
	// EventBridge may invoke the run worker from this rule only.
	allowed := false
	for _, r := range resources(js, "AWS::Lambda::Permission") {
		pp := props(r)
		if str(pp["Principal"]) == "events.amazonaws.com" && str(pp["FunctionName"]) == worker {
			allowed = true
			if str(pp["SourceArn"]) != "{GetAtt:"+ruleID+".Arn}" {
				t.Errorf("EventBridge may invoke the run worker from %s, want the rule", str(pp["SourceArn"]))
			}
		}
	}
	if !allowed {
		t.Error("EventBridge may not invoke the run worker")
	}
	// Asynchronous invocations the worker failed on go to the same queue.
	configs := resources(js, "AWS::Lambda::EventInvokeConfig")
	if len(configs) != 1 {
		t.Fatalf("%d asynchronous invocation configs, want the run worker's", len(configs))
	}
	for _, r := range configs {
		c := props(r)
		dest, _ := c["DestinationConfig"].(map[string]any)
		onFailure, _ := dest["OnFailure"].(map[string]any)
		if str(c["FunctionName"]) != "{Ref:"+fnID[FnRunWorker]+"}" || str(onFailure["Destination"]) != "{GetAtt:"+queue+".Arn}" ||
			c["MaximumRetryAttempts"] != float64(RunFailureRetries) || c["MaximumEventAgeInSeconds"] != float64(RunFailureMaxAge) {
			t.Errorf("asynchronous invocation config %v", c)
		}
	}
	// The queue: encrypted, kept 14 days; only EventBridge, from this rule,
	// may send to it by its policy (the worker by its role).
	q := props(resources(js, "AWS::SQS::Queue")[queue])
	if q["SqsManagedSseEnabled"] != true || q["MessageRetentionPeriod"] != float64(14*24*3600) {
		t.Errorf("queue %v: want SSE and 14 days", q)
	}
	for _, r := range resources(js, "AWS::SQS::QueuePolicy") {
		doc, _ := json.Marshal(props(r)["PolicyDocument"])
		if !strings.Contains(string(doc), "events.amazonaws.com") {
			continue
		}
		if !strings.Contains(string(doc), ruleID) {
			t.Errorf("the queue's policy lets EventBridge send from anything but the rule: %s", doc)
		}
	}
}
