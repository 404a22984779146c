package awsflow_test

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/awsflow"
)

const fakeARN = "arn:aws:lambda:us-east-1:000000000000:function:worker"

func TestDocumentsAreValidJSONWithTheirPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"run", awsflow.RunASL, []string{awsflow.RunWorkerArn}},
		{"express", awsflow.ExpressASL, []string{awsflow.RunMachineArn, awsflow.RunWorkerArn}},
		{"provision", awsflow.ProvisionASL, []string{awsflow.DeployWorkerArn}},
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(tc.doc), &v); err != nil {
			t.Fatalf("%s: not JSON: %v", tc.name, err)
		}
		if got := awsflow.Placeholders(tc.doc); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: placeholders %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSubstitute(t *testing.T) {
	def, err := awsflow.RunDefinition(fakeARN)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(def, "${") || !strings.Contains(def, fakeARN) {
		t.Fatalf("substitution incomplete:\n%s", def)
	}
	var asl struct {
		StartAt string
		States  map[string]map[string]any
	}
	if err := json.Unmarshal([]byte(def), &asl); err != nil {
		t.Fatalf("substituted document is not JSON: %v", err)
	}
	for _, name := range []string{"Step", "Abandon"} {
		params := asl.States[name]["Parameters"].(map[string]any)
		if params["FunctionName"] != fakeARN {
			t.Errorf("%s invokes %v, want %s", name, params["FunctionName"], fakeARN)
		}
	}

	for _, bad := range []map[string]string{
		{},                            // missing
		{awsflow.RunWorkerArn: ""},    // empty
		{awsflow.RunWorkerArn: `a"b`}, // would break the JSON
		{awsflow.RunWorkerArn: fakeARN, "X": "y"}, // names no placeholder
	} {
		if _, err := awsflow.Substitute(awsflow.RunASL, bad); err == nil {
			t.Errorf("Substitute(%v) succeeded, want an error", bad)
		}
	}
	if _, err := awsflow.ProvisionDefinition(fakeARN); err != nil {
		t.Fatal(err)
	}
}

// The run machine's loop and its error path, as the document says them.
func TestRunMachineShape(t *testing.T) {
	var asl struct {
		StartAt string
		States  map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(awsflow.RunASL), &asl); err != nil {
		t.Fatal(err)
	}
	if asl.StartAt != "Step" {
		t.Fatalf("StartAt %q", asl.StartAt)
	}
	var choice struct {
		Choices []struct{ Variable, StringEquals, Next string }
	}
	if err := json.Unmarshal(asl.States["Next"], &choice); err != nil {
		t.Fatal(err)
	}
	next := map[string]string{}
	for _, c := range choice.Choices {
		if c.Variable != "$.status" {
			t.Errorf("choice on %s, want $.status", c.Variable)
		}
		next[c.StringEquals] = c.Next
	}
	want := map[string]string{"continue": "Step", "wait": "Wait", "park": "Park", "done": "Done"}
	if !reflect.DeepEqual(next, want) {
		t.Errorf("choices %v, want %v", next, want)
	}
	var step struct {
		Retry []retrier
		Catch []struct {
			ErrorEquals []string
			Next        string
		}
	}
	if err := json.Unmarshal(asl.States["Step"], &step); err != nil {
		t.Fatal(err)
	}
	retried := map[string]bool{}
	for _, r := range step.Retry {
		if !slices.Contains(r.ErrorEquals, throttled) && (r.MaxAttempts < 1 || r.MaxAttempts > 6 || r.BackoffRate < 1) {
			t.Errorf("retrier %v: want 1..6 attempts with backoff", r)
		}
		for _, e := range r.ErrorEquals {
			retried[e] = true
		}
	}
	for _, e := range []string{"Lambda.ServiceException", "Lambda.TooManyRequestsException", "States.Timeout", "Lambda.Unknown"} {
		if !retried[e] {
			t.Errorf("Step does not retry %s", e)
		}
	}
	if len(step.Catch) != 1 || step.Catch[0].Next != "Abandon" || step.Catch[0].ErrorEquals[0] != "States.ALL" {
		t.Errorf("Step catch %+v, want States.ALL → Abandon", step.Catch)
	}
}

const throttled = "Lambda.TooManyRequestsException"

// Review #12: a run queued behind another run of its thread parks on a
// .waitForTaskToken task handing the token to the run worker, which stores
// it with the run; the task ends when woken, or at its timeout (a lost
// wake-up), and any failure of it leads back to a step, never to Abandon.
func TestParkShape(t *testing.T) {
	var doc struct {
		States map[string]struct {
			Type           string
			Resource       string
			Parameters     struct{ Payload map[string]any }
			TimeoutSeconds int
			ResultPath     *string
			Next           string
			Seconds        int
			Catch          []struct {
				ErrorEquals []string
				Next        string
			}
		}
	}
	if err := json.Unmarshal([]byte(awsflow.RunASL), &doc); err != nil {
		t.Fatal(err)
	}
	park := doc.States["Park"]
	if park.Type != "Task" || park.Resource != "arn:aws:states:::lambda:invoke.waitForTaskToken" {
		t.Fatalf("Park is %s %s, want a lambda:invoke.waitForTaskToken task", park.Type, park.Resource)
	}
	p := park.Parameters.Payload
	if p["action"] != "park" || p["task_token.$"] != "$$.Task.Token" || p["run_id.$"] != "$.run_id" ||
		p["org_id.$"] != "$.org_id" || p["thread_id.$"] != "$.thread_id" {
		t.Errorf("Park payload %v", p)
	}
	if park.TimeoutSeconds < 60 || park.TimeoutSeconds > 3600 {
		t.Errorf("Park times out after %d s: want a repair of a lost wake-up within the hour, not a poll", park.TimeoutSeconds)
	}
	if park.ResultPath != nil || park.Next != "Step" {
		t.Errorf("Park: ResultPath %v next %s, want the state kept (null) and Step", park.ResultPath, park.Next)
	}
	if len(park.Catch) != 1 || park.Catch[0].ErrorEquals[0] != "States.ALL" || doc.States[park.Catch[0].Next].Next != "Step" ||
		doc.States[park.Catch[0].Next].Seconds < 1 {
		t.Errorf("Park catch %+v: want every error, after a pause, back to Step", park.Catch)
	}
}

// Review #16: a step that ran into the Lambda's timeout is retried once,
// not five times: a super-step too long for a Lambda would be started again
// from its last checkpoint each time, its model calls and tool side effects
// with it (the tasks of the super-step that completed are skipped on the
// retry: internal/runs). A crash or a service error keeps its retries.
func TestTimedOutStepIsRetriedOnce(t *testing.T) {
	var doc struct {
		States map[string]struct{ Retry []retrier }
	}
	if err := json.Unmarshal([]byte(awsflow.RunASL), &doc); err != nil {
		t.Fatal(err)
	}
	retry := doc.States["Step"].Retry
	i := slices.IndexFunc(retry, func(r retrier) bool {
		return slices.Contains(r.ErrorEquals, "Sandbox.Timedout") || slices.Contains(r.ErrorEquals, "States.ALL")
	})
	if i < 0 || !slices.Equal(retry[i].ErrorEquals, []string{"Sandbox.Timedout"}) || retry[i].MaxAttempts != 1 {
		t.Fatalf("the first retrier of a timed-out step is %+v, want one of its own with MaxAttempts 1", retry)
	}
	crash := slices.IndexFunc(retry, func(r retrier) bool { return slices.Contains(r.ErrorEquals, "Lambda.Unknown") })
	if crash < 0 || retry[crash].MaxAttempts < 3 {
		t.Errorf("a crashed step (Lambda.Unknown) is retried %+v, want its retries kept", retry)
	}
}

type retrier struct {
	ErrorEquals     []string
	IntervalSeconds float64
	MaxAttempts     int
	BackoffRate     float64
	MaxDelaySeconds float64
	JitterStrategy  string
}

// Every task that invokes a worker retries throttling on its own, first,
// for long enough that a burst past the worker's reserved concurrency
// (infra/stack) waits for a free worker — at least ten minutes of waits
// at most a minute each, jittered so the waiting steps do not return
// together — instead of being abandoned after the other errors' half
// minute.
func TestThrottledTasksWait(t *testing.T) {
	for name, asl := range map[string]string{"run": awsflow.RunASL, "provision": awsflow.ProvisionASL} {
		var doc struct {
			States map[string]struct {
				Type     string
				Resource string
				Retry    []retrier
			}
		}
		if err := json.Unmarshal([]byte(asl), &doc); err != nil {
			t.Fatal(err)
		}
		tasks := 0
		for sname, st := range doc.States {
			if st.Type != "Task" {
				continue
			}
			tasks++
			i := slices.IndexFunc(st.Retry, func(r retrier) bool {
				return slices.Contains(r.ErrorEquals, throttled) || slices.Contains(r.ErrorEquals, "States.ALL")
			})
			if i < 0 || !slices.Equal(st.Retry[i].ErrorEquals, []string{throttled}) {
				t.Errorf("%s/%s: the first retrier that takes throttling is %v, want one of its own", name, sname, st.Retry)
				continue
			}
			r := st.Retry[i]
			total := 0.0
			for k := range r.MaxAttempts {
				total += min(r.IntervalSeconds*math.Pow(r.BackoffRate, float64(k)), r.MaxDelaySeconds)
			}
			if r.MaxDelaySeconds <= 0 || r.MaxDelaySeconds > 60 || total < 600 || r.JitterStrategy != "FULL" {
				t.Errorf("%s/%s: throttling retried %+v: %v s of waits at most, want at least 600, each at most 60 s, jittered",
					name, sname, r, total)
			}
		}
		if tasks == 0 {
			t.Errorf("%s: no task", name)
		}
	}
}

const fakeMachine = "arn:aws:states:us-east-1:000000000000:stateMachine:runs"

// The Express front (docs/aws.md, "Express or Standard"): one step within
// a short budget and no retries; done ends it; any other answer and any
// failure hand the run to the Standard execution named after it, with the
// same input; an existing execution counts as handed over; a hand-over that
// keeps failing abandons the run.
func TestExpressMachineShape(t *testing.T) {
	def, err := awsflow.ExpressDefinition(fakeARN, fakeMachine)
	if err != nil {
		t.Fatal(err)
	}
	type catcher struct {
		ErrorEquals []string
		Next        string
	}
	var doc struct {
		StartAt string
		States  map[string]struct {
			Type           string
			Resource       string
			Parameters     map[string]any
			TimeoutSeconds int
			Retry          []retrier
			Catch          []catcher
			Choices        []struct{ Variable, StringEquals, Next string }
			Default        string
			Next           string
		}
	}
	if err := json.Unmarshal([]byte(def), &doc); err != nil {
		t.Fatal(err)
	}
	step := doc.States[doc.StartAt]
	payload, _ := step.Parameters["Payload"].(map[string]any)
	if doc.StartAt != "Step" || step.Parameters["FunctionName"] != fakeARN || payload["action"] != "step" ||
		payload["budget_seconds"] != float64(awsflow.ExpressStepBudget) || payload["execution_input.$"] != "$$.Execution.Input" {
		t.Fatalf("Step %+v", step)
	}
	if step.TimeoutSeconds != awsflow.ExpressStepTimeout || awsflow.ExpressStepTimeout > 60 ||
		awsflow.ExpressStepBudget >= awsflow.ExpressStepTimeout {
		t.Errorf("Step times out after %d s with a budget of %d s: want a budget inside a timeout of at most 60 s",
			step.TimeoutSeconds, awsflow.ExpressStepBudget)
	}
	if len(step.Retry) != 0 {
		t.Errorf("Step retries %+v: want none (a failure is handed over)", step.Retry)
	}
	if len(step.Catch) != 1 || step.Catch[0].ErrorEquals[0] != "States.ALL" || step.Catch[0].Next != "HandOver" {
		t.Errorf("Step catch %+v, want States.ALL → HandOver", step.Catch)
	}
	next := doc.States[step.Next]
	if next.Type != "Choice" || len(next.Choices) != 1 || next.Choices[0].StringEquals != "done" ||
		doc.States[next.Choices[0].Next].Type != "Succeed" || next.Default != "HandOver" {
		t.Errorf("after the step %+v: want done → Succeed, anything else → HandOver", next)
	}
	hand := doc.States["HandOver"]
	if hand.Resource != "arn:aws:states:::states:startExecution" || hand.Parameters["StateMachineArn"] != fakeMachine ||
		hand.Parameters["Name.$"] != "$$.Execution.Input.run_id" || hand.Parameters["Input.$"] != "$$.Execution.Input" {
		t.Errorf("HandOver %+v: want the Standard execution named after the run, with the same input", hand)
	}
	if doc.States[hand.Next].Type != "Succeed" {
		t.Errorf("HandOver goes to %s", hand.Next)
	}
	exists := []string{"StepFunctions.ExecutionAlreadyExistsException", "ExecutionAlreadyExists"}
	if len(hand.Retry) < 2 || !slices.Equal(hand.Retry[0].ErrorEquals, exists) || hand.Retry[0].MaxAttempts != 0 ||
		hand.Retry[1].ErrorEquals[0] != "States.ALL" || hand.Retry[1].MaxAttempts < 3 {
		t.Errorf("HandOver retries %+v: want an existing execution never retried, anything else retried", hand.Retry)
	}
	if len(hand.Catch) != 2 || !slices.Equal(hand.Catch[0].ErrorEquals, exists) || doc.States[hand.Catch[0].Next].Type != "Succeed" ||
		hand.Catch[1].ErrorEquals[0] != "States.ALL" || hand.Catch[1].Next != "Abandon" {
		t.Errorf("HandOver catch %+v: want an existing execution handed over, anything else abandoned", hand.Catch)
	}
	abandon := doc.States["Abandon"]
	ap, _ := abandon.Parameters["Payload"].(map[string]any)
	if ap["action"] != "abandon" || ap["error.$"] != "$.error" || abandon.Parameters["FunctionName"] != fakeARN ||
		doc.States[abandon.Next].Type != "Fail" {
		t.Errorf("Abandon %+v", abandon)
	}
	// Asynchronous: Lambda keeps and retries the abandon, then hands it to
	// the run worker's dead-letter queue (infra/stack RunWorkerAsyncInvoke),
	// where a synchronous one that failed would leave the run inflight.
	if abandon.Parameters["InvocationType"] != "Event" {
		t.Errorf("Abandon's InvocationType %v, want Event", abandon.Parameters["InvocationType"])
	}
	// Every wait of the machine fits in Express's 5 minutes: the step's
	// timeout, the hand-over's and the abandon's retries at their longest,
	// each of their attempts to its timeout.
	if len(abandon.Retry) != 1 || abandon.TimeoutSeconds < 1 {
		t.Fatalf("Abandon retries %+v, times out after %d s", abandon.Retry, abandon.TimeoutSeconds)
	}
	if hand.TimeoutSeconds < 1 {
		t.Fatalf("HandOver has no timeout")
	}
	total := float64(step.TimeoutSeconds + abandon.TimeoutSeconds*(1+abandon.Retry[0].MaxAttempts) +
		hand.TimeoutSeconds*(1+hand.Retry[1].MaxAttempts))
	for _, r := range append(hand.Retry, abandon.Retry...) {
		for k := range r.MaxAttempts {
			total += min(r.IntervalSeconds*math.Pow(r.BackoffRate, float64(k)), r.MaxDelaySeconds)
		}
	}
	if total > 240 {
		t.Errorf("the machine may wait %v s: want well inside Express's 300", total)
	}
}
