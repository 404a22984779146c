package runs

import (
	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// CheckRunRequest applies the rules of a run request that need neither the
// store nor the graph — the same ones CreateRun applies first — so a
// request kept to be run later (a cron's payload) is refused when it is
// given, not when it runs. threadID is "" for a stateless run.
func (s *Service) CheckRunRequest(req RunRequest, threadID string) error {
	p, err := parse(req, threadID == "", s.Limits)
	if err != nil {
		return err
	}
	if p.kw.Webhook != nil {
		if s.Webhooks == nil {
			return fail.Invalid("webhook", "is not enabled on this server")
		}
		if err := s.Webhooks.Check(*p.kw.Webhook); err != nil {
			return err
		}
	}
	if p.kw.Resumable && s.Events == nil {
		return fail.Invalid("stream_resumable", "is not supported by this server: it keeps no event log")
	}
	if threadID != "" {
		if _, err := uuid.Parse(threadID); err != nil {
			return fail.Invalid("thread_id", "Invalid thread ID: must be a UUID")
		}
	}
	return nil
}
