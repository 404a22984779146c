package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// targetAWSCostPer1000 is issue 6's target: dollars per 1,000 simple
// (stateless echo) runs on AWS.
const targetAWSCostPer1000 = 0.20

// awsCost is what this report shows of bench/cmd/awscost's results (`make
// bench-aws-cost`): <date>-aws-cost.json beside the report, else the latest
// one there.
type awsCost struct {
	File      string `json:"-"`
	Date      string `json:"date"`
	Workloads []struct {
		Name      string `json:"name"`
		AgentRuns int    `json:"agent_runs"`
		Variant   bool   `json:"variant"`
		Cost      struct {
			Per1000 float64 `json:"per_1000"`
		} `json:"cost"`
		LangSmithPer1000 float64 `json:"langsmith_per_1000"`
	} `json:"workloads"`
}

func readAWSCost(dir, date string) *awsCost {
	path := filepath.Join(dir, date+"-aws-cost.json")
	if _, err := os.Stat(path); err != nil {
		found, _ := filepath.Glob(filepath.Join(dir, "*-aws-cost.json"))
		if len(found) == 0 {
			return nil
		}
		sort.Strings(found)
		path = found[len(found)-1]
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	c := &awsCost{File: filepath.Base(path)}
	if json.Unmarshal(b, c) != nil {
		return nil
	}
	return c
}

func (c *awsCost) echoPer1000() (float64, bool) {
	if c == nil {
		return 0, false
	}
	for _, w := range c.Workloads {
		if w.Name == "echo" {
			return w.Cost.Per1000, true
		}
	}
	return 0, false
}

// awsCostTargetRow is the targets table's row for the cost target.
func awsCostTargetRow(c *awsCost) string {
	per, ok := c.echoPer1000()
	if !ok {
		return fmt.Sprintf("| cost per 1,000 simple runs on AWS ≤ $%.2f | not in this report: `make bench-aws-cost` measures it | **not measured** |\n", targetAWSCostPer1000)
	}
	return fmt.Sprintf("| cost per 1,000 simple runs on AWS ≤ $%.2f | $%.4f per 1,000 stateless echo runs ([%s](%s)) | %s |\n",
		targetAWSCostPer1000, per, strings.TrimSuffix(c.File, ".json")+".md", strings.TrimSuffix(c.File, ".json")+".md", metWord(per <= targetAWSCostPer1000))
}

// awsCostSection is the report's section on the AWS cost model.
func awsCostSection(c *awsCost) string {
	var sb strings.Builder
	if _, ok := c.echoPer1000(); !ok {
		sb.WriteString("## AWS cost model: not in this report\n\n")
		sb.WriteString("`make bench-aws-cost` (`bench/cmd/awscost`) measures what one run of each workload consumes on the AWS path on MiniStack and prices it at AWS's on-demand prices, next to LangSmith Deployment's $0.005 per run: `bench/results/<date>-aws-cost.md`.\n\n")
		return sb.String()
	}
	md := strings.TrimSuffix(c.File, ".json") + ".md"
	fmt.Fprintf(&sb, "## AWS cost model\n\n")
	fmt.Fprintf(&sb, "Measured by `make bench-aws-cost` on %s: the same workloads through the AWS path on MiniStack (API Gateway, Lambda, Step Functions, DynamoDB, Secrets Manager, CloudWatch Logs), every AWS call metered and priced at AWS's on-demand prices; method, counts, prices and their sources in [%s](%s).\n\n", c.Date, md, md)
	sb.WriteString("| workload | AWS per 1,000 | LangSmith Deployment per 1,000 ($0.005 per Agent Run) |\n|---|--:|--:|\n")
	for _, w := range c.Workloads {
		if w.Variant {
			continue
		}
		fmt.Fprintf(&sb, "| %s | $%.4f | $%.2f |\n", w.Name, w.Cost.Per1000, w.LangSmithPer1000)
	}
	sb.WriteString("\n")
	return sb.String()
}
