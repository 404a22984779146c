package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAWSCostFromTheCostReport(t *testing.T) {
	dir := t.TempDir()
	if readAWSCost(dir, "2026-01-02") != nil {
		t.Fatal("a cost report out of nothing")
	}
	doc := `{"date":"2026-01-01","workloads":[{"name":"echo","cost":{"per_1000":0.25},"langsmith_per_1000":5},` +
		`{"name":"counter-exit","variant":true,"cost":{"per_1000":0.3}}]}`
	if err := os.WriteFile(filepath.Join(dir, "2026-01-01-aws-cost.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := sampleResults()
	r.AWSCost = readAWSCost(dir, r.Date) // another date: the latest one there
	md := markdown(r)
	for _, want := range []string{
		"| cost per 1,000 simple runs on AWS ≤ $0.20 | $0.2500 per 1,000 stateless echo runs ([2026-01-01-aws-cost.md](2026-01-01-aws-cost.md)) | **not met** |",
		"| echo | $0.2500 | $5.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "counter-exit") {
		t.Error("the variant is in the report")
	}
}
