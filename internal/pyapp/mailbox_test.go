package pyapp_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// memLog is an event log in memory: the mailboxes the stage keeps.
type memLog struct {
	mu   sync.Mutex
	logs map[string][]store.RunEvent // by org/key
}

func (l *memLog) add(org, key string, msgs ...map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		raw, _ := json.Marshal(m)
		k := org + "/" + key
		l.logs[k] = append(l.logs[k], store.RunEvent{Seq: int64(len(l.logs[k])), Event: pyapp.MailboxEvent, Data: raw})
	}
}

func (l *memLog) RunEvents(_ context.Context, org, key string, after int64, limit int, _ time.Time) ([]store.RunEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []store.RunEvent
	for _, e := range l.logs[org+"/"+key] {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

type invokerFunc func(ctx context.Context, function string, payload []byte) ([]byte, error)

func (f invokerFunc) InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error) {
	return f(ctx, function, payload)
}

func event(seq int, text string) map[string]any {
	return map[string]any{"type": "event", "seq": seq, "mode": "custom", "ns": []string{}, "data": text}
}

// TestLambdaRunHandsOnPostedEventsLive: the events a call on Lambda posts
// as it runs reach the run while the invocation lasts (the function here
// answers only once the platform handed them on), in order; the answer's
// copy of an event already handed on (a batch whose acknowledgement was
// lost) is skipped, the rest follows, each event once.
func TestLambdaRunHandsOnPostedEventsLive(t *testing.T) {
	log := &memLog{logs: map[string][]store.RunEvent{}}
	keys := func(_ context.Context, org string, gen int64, _ bool) ([]byte, error) {
		k := sha256.Sum256(fmt.Appendf(nil, "%s/%d", org, gen))
		return k[:], nil
	}
	signer := &calltoken.Signer{Keys: keys}
	handedOn := make(chan struct{})
	var mailboxes []string
	inv := invokerFunc(func(ctx context.Context, _ string, payload []byte) ([]byte, error) {
		var ev struct {
			Request struct {
				Events *pyapp.Link `json:"events"`
			} `json:"request"`
		}
		if err := json.Unmarshal(payload, &ev); err != nil || ev.Request.Events == nil {
			return nil, fmt.Errorf("the call has no events link: %s", payload)
		}
		c, err := signer.Verify(ctx, ev.Request.Events.Token)
		if err != nil {
			return nil, err
		}
		key := pyapp.MailboxKey(c.ID)
		mailboxes = append(mailboxes, key)
		log.add(c.OrgID, key, event(1, "one"), event(2, "two")) // as /runtime/events appends them
		select {
		case <-handedOn:
		case <-time.After(time.Minute):
			return nil, errors.New("the posted events were not handed on while the call ran")
		}
		answer, _ := json.Marshal(map[string]any{"status": 200, "body": map[string]any{"messages": []any{
			event(2, "two"), event(3, "three"), map[string]any{"type": "end", "status": "success", "values": map[string]any{}}}}})
		return answer, nil
	})
	g := &pyapp.Graph{ID: "g", Runtime: &pyapp.LambdaClient{Function: "f", Invoker: inv, Mailbox: log},
		Bridge: &pyapp.StageLinks{BaseURL: "https://stage.example", Signer: signer, Events: true}}
	var mu sync.Mutex
	var got []string
	emit := func(e runs.ForeignEvent) {
		mu.Lock()
		defer mu.Unlock()
		var text string
		_ = json.Unmarshal(e.Data, &text)
		got = append(got, text)
		if len(got) == 2 {
			close(handedOn)
		}
	}
	put := func(context.Context, graph.Checkpoint) error { return nil }
	out, _, err := g.Run(context.Background(), runs.ForeignRun{OrgID: "org", ThreadID: "th", RunID: "run"}, put, emit)
	if err != nil || out.Status != graph.Done {
		t.Fatalf("run: %+v %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("events %v, want [one two three]: in order, each once", got)
	}
	if len(mailboxes) != 1 {
		t.Fatalf("%d calls", len(mailboxes))
	}
}
