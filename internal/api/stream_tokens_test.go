package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/testmodel"
)

// supportModel is the support agent's model, streaming: asked without a
// tool result it calls lookup_order for the order the user names, its
// arguments in fragments; with one, it answers in pieces.
func supportModel(t *testing.T, key string) *testmodel.Server {
	digits := regexp.MustCompile(`\d+`)
	return testmodel.Start(t, key, func(r testmodel.Request) testmodel.Turn {
		msgs := r.Messages()
		last := msgs[len(msgs)-1]
		if last["role"] != "tool" {
			order := digits.FindString(fmt.Sprint(last["content"]))
			return testmodel.Turn{ToolCalls: []testmodel.ToolCall{{ID: "call_1", Name: "lookup_order",
				Args: []string{`{"order_`, `id": "` + order, `"}`}}}, Usage: &[3]int{50, 10, 60}}
		}
		var order map[string]any
		_ = json.Unmarshal([]byte(fmt.Sprint(last["content"])), &order)
		return testmodel.Turn{Content: []string{"Order ", fmt.Sprint(order["order_id"]), " is ", fmt.Sprint(order["status"]),
			fmt.Sprintf(" (carrier %v).", order["carrier"])}}
	})
}

// Token streaming end to end: the deployed support agent's chat model
// streams, and a run stream carries its chunks in messages-tuple, messages
// and events, the function's custom event, and the tools' events; the
// final state is what runs/wait gives; a resumable run replays them all.
func TestStreamTokensOfADeployedAgent(t *testing.T) {
	e := newEnv(t)
	apiKey := secret("sk-stream-agent-9Kp4")
	model, rt := supportModel(t, apiKey), newTestRuntime(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, agentDeployment("support-agent", agentRepo(t, model.URL+"/v1"), rt.url, apiKey))
	e.waitFor(e.keyA, "/v2/deployments/"+d["id"].(string), status("READY"))

	thread := e.newThread(e.keyA)
	r := e.do("POST", "/threads/"+thread+"/runs/stream", e.keyA, map[string]any{"assistant_id": "support", "input": orderQuestion,
		"stream_mode": []string{"messages-tuple", "messages", "events", "custom", "updates"}, "stream_resumable": true})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	evs := sseEvents(t, r.Body)
	if strings.Contains(string(r.Body), apiKey) {
		t.Fatal("the model's key is in the stream")
	}

	var order []string // what came, in order, in short
	var answer strings.Builder
	var lastPartial map[string]any
	var chunkIDs = map[string]bool{}
	for _, ev := range evs {
		var data any
		if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
			t.Fatalf("%s: %v", ev.event, err)
		}
		switch ev.event {
		case "messages":
			msg := data.([]any)[0].(map[string]any)
			meta := data.([]any)[1].(map[string]any)
			if msg["type"] == "AIMessageChunk" {
				chunkIDs[msg["id"].(string)] = true
				if meta["langgraph_node"] != "agent" || meta["ls_provider"] != "openai" {
					t.Errorf("chunk metadata %v", meta)
				}
				if n := len(chunkIDs); n == 2 {
					answer.WriteString(msg["content"].(string))
				}
				order = append(order, "chunk")
			} else {
				order = append(order, "message:"+fmt.Sprint(msg["type"]))
			}
		case "messages/partial":
			lastPartial = data.([]any)[0].(map[string]any)
		case "updates":
			for node := range data.(map[string]any) {
				order = append(order, "updates:"+node)
			}
		case "custom":
			b, _ := json.Marshal(data)
			order = append(order, "custom:"+string(b))
		case "events":
			ev := data.(map[string]any)
			if name := ev["event"].(string); strings.HasPrefix(name, "on_chat_model") || strings.HasPrefix(name, "on_tool") {
				if name != "on_chat_model_stream" {
					order = append(order, name+":"+fmt.Sprint(ev["name"]))
				}
			}
		}
		if ev.id == "" {
			t.Errorf("event %s of a resumable run has no id", ev.event)
		}
	}
	got := strings.Join(compress(order), " ")
	want := "custom:{\"step\":\"classify\",\"topic\":\"orders\"} updates:classify " +
		"on_chat_model_start:ChatOpenAI chunk×5 on_chat_model_end:ChatOpenAI updates:agent " +
		"on_tool_start:lookup_order on_tool_end:lookup_order updates:tools message:tool " +
		"on_chat_model_start:ChatOpenAI chunk×6 on_chat_model_end:ChatOpenAI updates:agent"
	if got != want {
		t.Errorf("the stream:\n%s\nwant\n%s", got, want)
	}
	if answer.String() != "Order 42 is shipped (carrier UPS)." {
		t.Errorf("the answer's chunks make %q", answer.String())
	}
	if lastPartial["type"] != "ai" || lastPartial["content"] != "Order 42 is shipped (carrier UPS)." {
		t.Errorf("the last messages/partial %v", lastPartial)
	}
	if strings.Contains(string(r.Body), "messages/complete\r\ndata: [{\"content\":\"Order 42") {
		t.Error("the streamed answer was sent again whole")
	}

	// The state holds the same messages a whole answer gives, with the
	// chunks' ids.
	state := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	values := state["values"].(map[string]any)
	checkSupportAnswer(t, values)
	for _, i := range []int{1, 3} {
		if id := values["messages"].([]any)[i].(map[string]any)["id"].(string); !chunkIDs[id] {
			t.Errorf("message %d has id %s, which no chunk had (%v)", i, id, chunkIDs)
		}
	}

	// A join from the start replays every event, chunks included.
	loc := r.Header.Get("Content-Location")
	replay := e.do("GET", loc+"/stream", e.keyA, nil, "Last-Event-ID", "-1")
	if got := sseEvents(t, replay.Body); len(got) != len(evs) {
		t.Errorf("the replay has %d events, the stream had %d", len(got), len(evs))
	}
}

// compress writes runs of the same entry as entry×n.
func compress(in []string) []string {
	var out []string
	for i := 0; i < len(in); {
		j := i
		for j < len(in) && in[j] == in[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s×%d", in[i], j-i))
		} else {
			out = append(out, in[i])
		}
		i = j
	}
	return out
}

// The thread event protocol with the deployed support agent's streaming
// model: each answer is a message whose pieces are content-block deltas
// (text-delta, tool-call-delta), finished whole — the tool call with its
// arguments parsed, the usage the model reported — before the node's
// update and the run's end; the tools channel follows the tool's run.
func TestProtocolStreamsTokensOfADeployedAgent(t *testing.T) {
	e := newEnv(t)
	apiKey := secret("sk-proto-agent-7Qm2")
	model, rt := supportModel(t, apiKey), newTestRuntime(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, agentDeployment("proto-agent", agentRepo(t, model.URL+"/v1"), rt.url, apiKey))
	e.waitFor(e.keyA, "/v2/deployments/"+d["id"].(string), status("READY"))

	thread := e.newThread(e.keyA)
	e.must(200, "POST", "/threads/"+thread+"/commands", e.keyA, map[string]any{"id": 1, "method": "run.start",
		"params": map[string]any{"assistant_id": "support", "input": orderQuestion}})
	_, evs := e.readEvents(t, e.keyA, thread, map[string]any{"channels": []string{"messages", "tools", "custom", "updates", "lifecycle"}}, runEnded)

	var order []string
	texts := map[string]string{} // message id → its text deltas
	args := map[string]string{}  // message id → its tool-call deltas
	finished := map[string]map[string]any{}
	var usage map[string]any
	for _, ev := range evs {
		b := ev.body
		data := b.Params.Data
		id, _ := data["message_id"].(string)
		switch b.Method {
		case "messages":
			switch data["event"] {
			case "message-start":
				order = append(order, fmt.Sprintf("start:%v@%s", data["role"], b.Params.Node))
			case "content-block-delta":
				delta := data["delta"].(map[string]any)
				order = append(order, fmt.Sprint(delta["type"]))
				if s, ok := delta["text"].(string); ok {
					texts[id] += s
				}
				if s, ok := delta["args"].(string); ok {
					args[id] += s
				}
			case "content-block-finish":
				finished[id] = data["content"].(map[string]any)
				order = append(order, "block-finish")
			case "message-finish":
				if u, ok := data["usage"].(map[string]any); ok {
					usage = u
				}
				order = append(order, "finish")
			default:
				order = append(order, fmt.Sprint(data["event"]))
			}
		case "tools":
			order = append(order, fmt.Sprintf("%v:%v:%v", data["event"], data["tool_name"], data["tool_call_id"]))
		case "lifecycle":
			order = append(order, fmt.Sprint("lifecycle:", data["event"]))
		default:
			order = append(order, b.Method+":"+b.Params.Node)
		}
	}
	got := strings.Join(compress(order), " ")
	want := "lifecycle:running custom: updates:classify " +
		"start:ai@agent content-block-start tool-call-delta×3 block-finish finish updates:agent " +
		"tool-started:lookup_order:call_1 tool-finished:<nil>:call_1 updates:tools start:tool@tools content-block-start text-delta block-finish finish " +
		"start:ai@agent content-block-start text-delta×5 block-finish finish updates:agent lifecycle:completed"
	if got != want {
		t.Errorf("the protocol stream:\n%s\nwant\n%s", got, want)
	}
	var call, answer string
	for id, a := range args {
		call = id
		if a != `{"order_id": "42"}` {
			t.Errorf("the tool call's deltas make %q", a)
		}
	}
	if f := finished[call]; f["type"] != "tool_call" || f["name"] != "lookup_order" || f["id"] != "call_1" ||
		fmt.Sprint(f["args"]) != "map[order_id:42]" {
		t.Errorf("the tool call block finishes as %v", f)
	}
	if usage["input_tokens"] != float64(50) || usage["output_tokens"] != float64(10) || usage["total_tokens"] != float64(60) {
		t.Errorf("the usage of the model's first answer: %v", usage)
	}
	for id, text := range texts {
		if strings.HasPrefix(text, "Order") {
			answer = id
			if text != "Order 42 is shipped (carrier UPS)." {
				t.Errorf("the answer's deltas make %q", text)
			}
		}
	}
	if f := finished[answer]; f["type"] != "text" || f["text"] != "Order 42 is shipped (carrier UPS)." {
		t.Errorf("the answer finishes as %v", f)
	}
	// The messages are the state's, by id.
	values := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)["values"].(map[string]any)
	checkSupportAnswer(t, values)
	msgs := values["messages"].([]any)
	if msgs[1].(map[string]any)["id"] != call || msgs[3].(map[string]any)["id"] != answer {
		t.Errorf("the streamed messages %s and %s are not the state's %v, %v", call, answer, msgs[1], msgs[3])
	}
}
