package awsflow_test

import (
	"encoding/json"
	"reflect"
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
	want := map[string]string{"continue": "Step", "wait": "Wait", "done": "Done"}
	if !reflect.DeepEqual(next, want) {
		t.Errorf("choices %v, want %v", next, want)
	}
	var step struct {
		Retry []struct {
			ErrorEquals []string
			MaxAttempts int
			BackoffRate float64
		}
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
		if r.MaxAttempts < 1 || r.MaxAttempts > 6 || r.BackoffRate < 1 {
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
