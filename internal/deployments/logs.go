package deployments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// A revision's provisioning log: what each stage of its lifecycle did
// (clone, validation, build, deploy) and why it failed, kept in the
// revision's document and served through the routes `langgraph deploy
// logs` reads (build_logs: the build stage's entries; deploy_logs: the
// deploy stage's). Entries never hold secret values: they name what was
// done and the reasons the revision's status_reason already shows.

// Log phases and levels.
const (
	phaseBuild  = "build"
	phaseDeploy = "deploy"

	levelInfo  = "INFO"
	levelError = "ERROR"
)

// maxLogEntries bounds a revision's log; maxLogMessage one entry's text.
const (
	maxLogEntries = 200
	maxLogMessage = 2000
)

// logEntry is one line of a revision's provisioning log.
type logEntry struct {
	Seq     int       `json:"seq"`
	At      time.Time `json:"at"`
	Phase   string    `json:"phase"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

// logf appends an entry to the revision's log (stored with the next status
// change). Past maxLogEntries the oldest entries go.
func (l *lifecycle) logf(phase, level, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxLogMessage {
		msg = msg[:maxLogMessage] + "…"
	}
	seq := 1
	if n := len(l.doc.Log); n > 0 {
		seq = l.doc.Log[n-1].Seq + 1
	}
	l.doc.Log = append(l.doc.Log, logEntry{Seq: seq, At: l.s.now(), Phase: phase, Level: level, Message: msg})
	if over := len(l.doc.Log) - maxLogEntries; over > 0 {
		l.doc.Log = slices.Delete(l.doc.Log, 0, over)
	}
}

// phaseOf is the log phase of a lifecycle status.
func phaseOf(status string) string {
	switch status {
	case RevQueued, RevAwaitingBuild, RevBuilding, RevBuildFailed, RevCreating, RevCreateFailed:
		return phaseBuild
	}
	return phaseDeploy
}

// LogQuery is the body of the log routes (upstream's, as the CLI sends it).
type LogQuery struct {
	Limit     *int    `json:"limit"`
	Order     *string `json:"order"`
	Level     *string `json:"level"`
	Query     *string `json:"query"`
	StartTime *string `json:"start_time"`
	EndTime   *string `json:"end_time"`
	Offset    *string `json:"offset"`
}

// LogLine is one log entry as the CLI prints it.
type LogLine struct {
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"` // epoch milliseconds
	Level     string `json:"level"`
	Message   string `json:"message"`
}

// LogPage is a page of log entries; NextOffset continues after the last.
type LogPage struct {
	Logs       []LogLine `json:"logs"`
	NextOffset *string   `json:"next_offset"`
}

// Logs reads a revision's build or deploy log (kind "build" or "deploy");
// revisionID "" means the deployment's latest revision.
func (s *Service) Logs(ctx context.Context, orgID, deploymentID, revisionID, kind string, q LogQuery) (LogPage, error) {
	var c fail.Checks
	limit := 100
	if q.Limit != nil {
		limit = *q.Limit
		c.Add(limit < 1 || limit > 1000, "limit", "must be between 1 and 1000")
	}
	order := "desc"
	if q.Order != nil {
		order = *q.Order
		c.Add(order != "asc" && order != "desc", "order", "must be one of asc, desc")
	}
	var from, to time.Time
	parse := func(field string, v *string) time.Time {
		if v == nil || *v == "" {
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339Nano, *v)
		c.Add(err != nil, field, "must be an ISO 8601 time like 2026-03-08T00:00:00Z")
		return t
	}
	from, to = parse("start_time", q.StartTime), parse("end_time", q.EndTime)
	after := 0
	if q.Offset != nil && *q.Offset != "" {
		n, err := strconv.Atoi(*q.Offset)
		c.Add(err != nil || n < 0, "offset", "must be a next_offset this route answered")
		after = n
	}
	if err := c.Err(); err != nil {
		return LogPage{}, err
	}
	d, _, err := s.load(ctx, orgID, deploymentID)
	if err != nil {
		return LogPage{}, err
	}
	if revisionID == "" {
		revisionID = d.LatestRevisionID
	}
	rev, err := s.Store.Revision(ctx, orgID, d.ID, revisionID)
	if errors.Is(err, store.ErrNotFound) {
		return LogPage{}, fail.NotFound("revision %q of deployment %q not found", revisionID, deploymentID)
	}
	if err != nil {
		return LogPage{}, err
	}
	doc, err := decodeDoc[revisionDoc](rev.Doc)
	if err != nil {
		return LogPage{}, err
	}
	level := strings.ToUpper(deref(q.Level))
	var lines []LogLine
	for _, e := range doc.Log {
		switch {
		case e.Phase != kind,
			level != "" && e.Level != level,
			q.Query != nil && !strings.Contains(strings.ToLower(e.Message), strings.ToLower(*q.Query)),
			!from.IsZero() && e.At.Before(from),
			!to.IsZero() && e.At.After(to):
			continue
		}
		if after > 0 && ((order == "asc" && e.Seq <= after) || (order == "desc" && e.Seq >= after)) {
			continue
		}
		lines = append(lines, LogLine{ID: rev.ID + "-" + strconv.Itoa(e.Seq), Timestamp: e.At.UnixMilli(),
			Level: e.Level, Message: e.Message})
	}
	if order == "desc" {
		slices.Reverse(lines)
	}
	page := LogPage{Logs: []LogLine{}}
	if len(lines) > limit {
		lines = lines[:limit]
	}
	page.Logs = append(page.Logs, lines...)
	if n := len(page.Logs); n > 0 {
		last := page.Logs[n-1].ID
		next := last[strings.LastIndex(last, "-")+1:]
		page.NextOffset = &next
	}
	return page, nil
}
