package main

import (
	"math"
	"sort"
	"strconv"

	"github.com/stepgraph/stepgraph/bench/cmd/awscost/internal/meter"
)

// Usage is what the AWS path consumed: for one iteration, or the mean of
// several.
type Usage struct {
	// Lambda, per function.
	Lambda map[string]*FnUsage `json:"lambda"`
	// Step Functions (Standard): executions and billed state transitions.
	Executions  float64 `json:"sfn_executions"`
	Transitions float64 `json:"sfn_transitions"`
	Retries     float64 `json:"sfn_retries"`
	// ExecutionMs is the executions' duration (history timestamps); priced
	// for the Express alternative only.
	ExecutionMs float64 `json:"sfn_execution_ms"`
	// ExpressExecutions of the run machine's Express front, and their
	// billed duration: each rounded up to 100 ms, summed (seconds).
	ExpressExecutions float64 `json:"sfn_express_executions,omitempty"`
	ExpressBilledS    float64 `json:"sfn_express_billed_s,omitempty"`
	// DynamoDB request units, per function, operation and target
	// ("fn op target", meter.Call.Target).
	Dynamo map[string]*OpUsage `json:"dynamodb"`
	// Other AWS API calls, per "fn service op" (Secrets Manager is priced;
	// Step Functions API calls are not billed for Standard workflows).
	Calls map[string]float64 `json:"calls"`
	// SecretsCalls: Secrets Manager API calls.
	SecretsCalls float64 `json:"secretsmanager_calls"`
	// S3Writes (PUT, LIST) and S3Reads (GET): the payload store's priced
	// requests (DELETE is free).
	S3Writes float64 `json:"s3_writes"`
	S3Reads  float64 `json:"s3_reads"`
	// API Gateway (HTTP API): requests, and billed units (512 KB each).
	APIRequests float64 `json:"apigateway_requests"`
	APIUnits    float64 `json:"apigateway_units"`
	// LogBytes the functions wrote to CloudWatch Logs (their own lines; the
	// Lambda platform's START/END/REPORT lines are not counted).
	LogBytes float64 `json:"log_bytes"`
	// Unmodelled DynamoDB calls (must be 0).
	Unmodelled float64 `json:"unmodelled_dynamodb_calls"`
	// Meter overhead taken out of the durations (ms).
	OverheadMs float64 `json:"meter_overhead_ms"`
}

// FnUsage is one function's invocations and compute.
type FnUsage struct {
	MemoryMB    int     `json:"memory_mb"`
	Invocations float64 `json:"invocations"`
	// BilledMs: durations rounded up to the millisecond, summed.
	BilledMs  float64 `json:"billed_ms"`
	GBSeconds float64 `json:"gb_seconds"`
}

// OpUsage is one DynamoDB operation of one function.
type OpUsage struct {
	Calls    float64 `json:"calls"`
	RRU      float64 `json:"rru"`
	WRU      float64 `json:"wru"`
	IndexWRU float64 `json:"index_wru"`
	Items    float64 `json:"items"`
	// MaxItemBytes: the largest item seen (a maximum, not a mean).
	MaxItemBytes int `json:"max_item_bytes"`
	// Reported: MiniStack's ConsumedCapacity (size-blind).
	Reported float64 `json:"ministack_reported_cu"`
}

// Totals of the DynamoDB units.
func (u *Usage) RRU() float64 { return sumOps(u.Dynamo, func(o *OpUsage) float64 { return o.RRU }) }
func (u *Usage) WRU() float64 { return sumOps(u.Dynamo, func(o *OpUsage) float64 { return o.WRU }) }
func (u *Usage) IndexWRU() float64 {
	return sumOps(u.Dynamo, func(o *OpUsage) float64 { return o.IndexWRU })
}
func (u *Usage) Reported() float64 {
	return sumOps(u.Dynamo, func(o *OpUsage) float64 { return o.Reported })
}
func (u *Usage) DynamoCalls() float64 {
	return sumOps(u.Dynamo, func(o *OpUsage) float64 { return o.Calls })
}

func sumOps(m map[string]*OpUsage, f func(*OpUsage) float64) float64 {
	t := 0.0
	for _, o := range m {
		t += f(o)
	}
	return t
}

func newUsage() Usage {
	return Usage{Lambda: map[string]*FnUsage{}, Dynamo: map[string]*OpUsage{}, Calls: map[string]float64{}}
}

// apiUnitBytes: HTTP APIs meter requests in 512 KB increments.
const apiUnitBytes = 512 * 1024

// usageOf prices nothing: it counts what an iteration consumed. memory is
// the stack's memory size per function.
func usageOf(it *Iteration, memory map[string]int) Usage {
	u := newUsage()
	fn := func(name string) *FnUsage {
		f := u.Lambda[name]
		if f == nil {
			f = &FnUsage{MemoryMB: memory[name]}
			u.Lambda[name] = f
		}
		return f
	}
	bill := func(name string, micros int64) {
		f := fn(name)
		f.Invocations++
		ms := math.Ceil(float64(micros) / 1000)
		f.BilledMs += ms
		f.GBSeconds += ms / 1000 * float64(f.MemoryMB) / 1024
	}
	for _, r := range it.Requests {
		bill(r.Fn, r.Micros)
		u.APIRequests++
		u.APIUnits += math.Max(1, math.Ceil(float64(r.ReqBytes+r.RespBytes)/apiUnitBytes))
		u.LogBytes += float64(r.LogBytes)
		u.OverheadMs += float64(r.OverheadMicros) / 1000
	}
	for _, inv := range it.Invocations {
		bill(inv.Fn, inv.Micros)
		u.LogBytes += float64(inv.LogBytes)
		u.OverheadMs += float64(inv.OverheadMicros) / 1000
	}
	for _, e := range it.Executions {
		if e.Express {
			u.ExpressExecutions++
			u.ExpressBilledS += math.Ceil(e.DurationMs/100) * 0.1
			continue
		}
		u.Executions++
		u.Transitions += float64(e.Transitions)
		u.Retries += float64(e.Retries)
		u.ExecutionMs += e.DurationMs
	}
	for _, c := range it.Calls {
		if c.Phase != meter.PhaseInvoke {
			continue
		}
		if c.Dynamo != nil {
			name := c.Fn + " " + c.Op + " " + c.Target
			o := u.Dynamo[name]
			if o == nil {
				o = &OpUsage{}
				u.Dynamo[name] = o
			}
			o.Calls++
			o.RRU += c.Dynamo.RRU
			o.WRU += c.Dynamo.WRU
			o.IndexWRU += c.Dynamo.IndexWRU
			o.Items += float64(c.Dynamo.Items)
			o.MaxItemBytes = max(o.MaxItemBytes, c.Dynamo.MaxItemBytes)
			o.Reported += c.Dynamo.Reported
			if c.Dynamo.Unmodelled {
				u.Unmodelled++
			}
			continue
		}
		u.Calls[c.Fn+" "+c.Service+" "+c.Op]++
		switch {
		case c.Service == "Secrets Manager":
			u.SecretsCalls++
		case c.Service == "S3" && (c.Op == "PutObject" || c.Op == "CopyObject" || c.Op == "ListObjectsV2" || c.Op == "CreateMultipartUpload" || c.Op == "UploadPart"):
			u.S3Writes++
		case c.Service == "S3" && (c.Op == "GetObject" || c.Op == "HeadObject"):
			u.S3Reads++
		}
	}
	return u
}

// mean averages usages.
func mean(us []Usage) Usage {
	m := newUsage()
	if len(us) == 0 {
		return m
	}
	k := 1 / float64(len(us))
	for _, u := range us {
		for name, f := range u.Lambda {
			g := m.Lambda[name]
			if g == nil {
				g = &FnUsage{MemoryMB: f.MemoryMB}
				m.Lambda[name] = g
			}
			g.Invocations += k * f.Invocations
			g.BilledMs += k * f.BilledMs
			g.GBSeconds += k * f.GBSeconds
		}
		for name, o := range u.Dynamo {
			p := m.Dynamo[name]
			if p == nil {
				p = &OpUsage{}
				m.Dynamo[name] = p
			}
			p.Calls += k * o.Calls
			p.RRU += k * o.RRU
			p.WRU += k * o.WRU
			p.IndexWRU += k * o.IndexWRU
			p.Items += k * o.Items
			p.Reported += k * o.Reported
			p.MaxItemBytes = max(p.MaxItemBytes, o.MaxItemBytes)
		}
		for name, n := range u.Calls {
			m.Calls[name] += k * n
		}
		m.Executions += k * u.Executions
		m.Transitions += k * u.Transitions
		m.Retries += k * u.Retries
		m.ExecutionMs += k * u.ExecutionMs
		m.ExpressExecutions += k * u.ExpressExecutions
		m.ExpressBilledS += k * u.ExpressBilledS
		m.SecretsCalls += k * u.SecretsCalls
		m.S3Writes += k * u.S3Writes
		m.S3Reads += k * u.S3Reads
		m.APIRequests += k * u.APIRequests
		m.APIUnits += k * u.APIUnits
		m.LogBytes += k * u.LogBytes
		m.Unmodelled += k * u.Unmodelled
		m.OverheadMs += k * u.OverheadMs
	}
	return m
}

// CostLine is one priced line of an iteration's cost.
type CostLine struct {
	Item     string  `json:"item"`
	Quantity float64 `json:"quantity"`
	Unit     string  `json:"unit"`
	Dollars  float64 `json:"dollars"` // per iteration
}

// Cost is an iteration's cost, line by line.
type Cost struct {
	Lines []CostLine `json:"lines"`
	// Total per iteration; Per1000 per 1,000 iterations.
	Total   float64 `json:"total"`
	Per1000 float64 `json:"per_1000"`
}

// costOf prices a usage at p.
func costOf(u Usage, p Prices) Cost {
	var c Cost
	add := func(item string, q float64, unit string, price float64) {
		c.Lines = append(c.Lines, CostLine{Item: item, Quantity: q, Unit: unit, Dollars: q * price})
	}
	names := make([]string, 0, len(u.Lambda))
	invocations := 0.0
	for name, f := range u.Lambda {
		names = append(names, name)
		invocations += f.Invocations
	}
	sort.Strings(names)
	add("Lambda requests", invocations, "requests", p.LambdaPerRequest)
	for _, name := range names {
		f := u.Lambda[name]
		add("Lambda compute: "+name+" ("+itoa(f.MemoryMB)+" MB)", f.GBSeconds, "GB-s", p.LambdaPerGBSecond)
	}
	add("Step Functions Standard: state transitions", u.Transitions, "transitions", p.SFNPerTransition)
	if u.ExpressExecutions > 0 {
		add("Step Functions Express: requests", u.ExpressExecutions, "requests", p.ExpressPerRequest)
		add("Step Functions Express: duration (64 MB)", u.ExpressBilledS*expressMemoryGB, "GB-s", p.ExpressPerGBSecond)
	}
	add("DynamoDB writes: tables", u.WRU(), "WRU", p.DynamoPerWRU)
	add("DynamoDB writes: global secondary indexes", u.IndexWRU(), "WRU", p.DynamoPerWRU)
	add("DynamoDB reads", u.RRU(), "RRU", p.DynamoPerRRU)
	add("Secrets Manager API calls", u.SecretsCalls, "calls", p.SecretsPerCall)
	add("S3 requests: PUT and LIST (payload store)", u.S3Writes, "requests", p.S3PerWrite)
	add("S3 requests: GET (payload store)", u.S3Reads, "requests", p.S3PerRead)
	add("API Gateway HTTP API", u.APIUnits, "requests", p.APIGatewayPerReq)
	add("CloudWatch Logs ingestion (function log lines)", u.LogBytes/1e9, "GB", p.LogsPerGB)
	for _, l := range c.Lines {
		c.Total += l.Dollars
	}
	c.Per1000 = c.Total * 1000
	return c
}

// expressCost is what the executions would cost as Express workflows:
// a request each, and their duration rounded up to 100 ms at the smallest
// memory chunk (64 MB; these executions carry a few KB).
func expressCost(u Usage, p Prices) float64 {
	if u.Executions == 0 {
		return 0
	}
	per := u.ExecutionMs / u.Executions
	billedS := math.Ceil(per/100) * 0.1
	return u.Executions * (p.ExpressPerRequest + billedS*expressMemoryGB*p.ExpressPerGBSecond)
}

// expressMemoryGB is the memory Express bills an execution at: its
// smallest chunk, 64 MB (a run's execution carries a few KB).
const expressMemoryGB = 64.0 / 1024

func itoa(n int) string {
	if n == 0 {
		return "?"
	}
	return strconv.Itoa(n)
}
