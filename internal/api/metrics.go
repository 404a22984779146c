package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// GET /metrics: upstream's system metrics (langgraph-api api/meta.py
// meta_metrics; http_metrics.py; self_hosted_metrics.py), in Prometheus'
// text format (default) or JSON (format=json). Upstream's server is one
// deployment's and serves them without authentication; stepgraph's serves
// many organizations, so /metrics needs an API key and answers only what
// concerns the key's organization: its run queue and its own requests to
// this process. Nothing of another organization, and no process-wide
// figure (workers, connection pools) that would show other tenants' load.

// latencyBuckets are upstream's HTTP latency buckets, in seconds
// (http_metrics_utils.py HTTP_LATENCY_BUCKETS).
var latencyBuckets = []float64{0.01, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}

// unmeasured are the routes upstream leaves out of its HTTP metrics
// (http_metrics_utils.py FILTERED_ROUTES).
var unmeasured = map[string]bool{"/ok": true, "/info": true, "/metrics": true, "/docs": true, "/openapi.json": true}

const (
	// maxSeriesPerOrg bounds one organization's request series (method,
	// route, status): ~100 operations times a few statuses fit; a tenant
	// cannot grow the table further.
	maxSeriesPerOrg = 1000
	// maxMetricOrgs bounds the organizations measured by one process.
	maxMetricOrgs = 10000
)

type seriesKey struct {
	method, route string
	status        int
}

type routeKey struct{ method, route string }

type histogram struct {
	buckets []int64 // one per latencyBuckets, then +Inf
	sum     float64
	count   int64
}

// orgMetrics are one organization's request counters.
type orgMetrics struct {
	requests  map[seriesKey]int64
	latencies map[routeKey]*histogram
}

// httpMetrics counts requests per organization, route template and status
// in this process (a Lambda instance's own, on AWS), bounded.
type httpMetrics struct {
	mu   sync.Mutex
	orgs map[string]*orgMetrics
}

func newHTTPMetrics() *httpMetrics { return &httpMetrics{orgs: map[string]*orgMetrics{}} }

// record counts one answered request of orgID to route (the operation's
// path template, so ids make no series of their own).
func (m *httpMetrics) record(orgID, method, route string, status int, took time.Duration) {
	if orgID == "" || route == "" || unmeasured[route] || status == 0 { // 0: nothing was answered
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	om := m.orgs[orgID]
	if om == nil {
		if len(m.orgs) >= maxMetricOrgs {
			return
		}
		om = &orgMetrics{requests: map[seriesKey]int64{}, latencies: map[routeKey]*histogram{}}
		m.orgs[orgID] = om
	}
	k := seriesKey{method, route, status}
	if _, ok := om.requests[k]; !ok && len(om.requests) >= maxSeriesPerOrg {
		return
	}
	om.requests[k]++
	h := om.latencies[routeKey{method, route}]
	if h == nil {
		h = &histogram{buckets: make([]int64, len(latencyBuckets)+1)}
		om.latencies[routeKey{method, route}] = h
	}
	secs := took.Seconds()
	i, _ := slices.BinarySearch(latencyBuckets, secs)
	h.buckets[i]++
	h.sum += secs
	h.count++
}

// snapshot copies orgID's counters, sorted, under the lock.
func (m *httpMetrics) snapshot(orgID string) ([]seriesKey, []int64, []routeKey, []histogram) {
	m.mu.Lock()
	defer m.mu.Unlock()
	om := m.orgs[orgID]
	if om == nil {
		return nil, nil, nil, nil
	}
	keys := make([]seriesKey, 0, len(om.requests))
	for k := range om.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b seriesKey) int {
		return strings.Compare(fmt.Sprint(a.route, a.method, a.status), fmt.Sprint(b.route, b.method, b.status))
	})
	counts := make([]int64, len(keys))
	for i, k := range keys {
		counts[i] = om.requests[k]
	}
	routes := make([]routeKey, 0, len(om.latencies))
	for k := range om.latencies {
		routes = append(routes, k)
	}
	slices.SortFunc(routes, func(a, b routeKey) int { return strings.Compare(a.route+" "+a.method, b.route+" "+b.method) })
	hists := make([]histogram, len(routes))
	for i, k := range routes {
		h := *om.latencies[k]
		h.buckets = slices.Clone(h.buckets)
		hists[i] = h
	}
	return keys, counts, routes, hists
}

func (s *Server) metrics(w http.ResponseWriter, r *request) error {
	var queue *runs.QueueStats
	if s.cfg.Runs != nil {
		q, err := s.cfg.Runs.QueueStats(r.Context(), r.orgID)
		if err != nil {
			return err
		}
		queue = &q
	}
	keys, counts, routes, hists := s.httpMetrics.snapshot(r.orgID)
	if r.URL.Query().Get("format") == "json" {
		requests := make([]map[string]any, len(keys))
		for i, k := range keys {
			requests[i] = map[string]any{"method": k.method, "path": k.route, "status": k.status, "count": counts[i]}
		}
		body := map[string]any{"api": map[string]any{"http_requests_total": requests}}
		if queue != nil {
			body["queue"] = queue
		}
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	var b strings.Builder
	if queue != nil {
		writeQueue(&b, *queue)
	}
	if len(keys) > 0 {
		b.WriteString("# HELP lg_api_http_requests_total Total number of HTTP requests.\n# TYPE lg_api_http_requests_total counter\n")
		for i, k := range keys {
			fmt.Fprintf(&b, "lg_api_http_requests_total{method=%q,path=%q,status=\"%d\"} %d\n", k.method, k.route, k.status, counts[i])
		}
	}
	if len(routes) > 0 {
		b.WriteString("# HELP lg_api_http_requests_latency_seconds HTTP request latency in seconds.\n# TYPE lg_api_http_requests_latency_seconds histogram\n")
		for i, k := range routes {
			var acc int64
			for j, n := range hists[i].buckets {
				acc += n
				le := "+Inf"
				if j < len(latencyBuckets) {
					le = fmt.Sprint(latencyBuckets[j])
				}
				fmt.Fprintf(&b, "lg_api_http_requests_latency_seconds_bucket{method=%q,path=%q,le=%q} %d\n", k.method, k.route, le, acc)
			}
			fmt.Fprintf(&b, "lg_api_http_requests_latency_seconds_sum{method=%q,path=%q} %.6f\n", k.method, k.route, hists[i].sum)
			fmt.Fprintf(&b, "lg_api_http_requests_latency_seconds_count{method=%q,path=%q} %d\n", k.method, k.route, hists[i].count)
		}
	}
	// Prometheus' text exposition format, as upstream's prometheus_client
	// serves it (CONTENT_TYPE_LATEST).
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
	return nil
}

// writeQueue writes the organization's run queue as upstream's gauges
// (self_hosted_metrics.py: lg_api_num_pending_runs, ...); a wait time with
// no pending run is left out, as Prometheus has no null.
func writeQueue(b *strings.Builder, q runs.QueueStats) {
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
	}
	gauge("lg_api_num_pending_runs", "The number of runs currently pending.", float64(q.NPending))
	gauge("lg_api_num_running_runs", "The number of runs currently running.", float64(q.NRunning))
	if q.PendingWaitMaxSecs != nil {
		gauge("lg_api_pending_runs_wait_time_max", "The maximum time a run has been pending, in seconds.", *q.PendingWaitMaxSecs)
	}
	if q.PendingWaitMedSecs != nil {
		gauge("lg_api_pending_runs_wait_time_med", "The median pending wait time across runs, in seconds.", *q.PendingWaitMedSecs)
	}
	if q.PendingUnblockedWaitMaxSecs != nil {
		gauge("lg_api_pending_unblocked_runs_wait_time_max", "The maximum time a run has been pending excluding runs blocked by another run on the same thread, in seconds.", *q.PendingUnblockedWaitMaxSecs)
	}
}
