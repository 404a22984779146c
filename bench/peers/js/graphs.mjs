// stepgraph's built-in graphs echo, counter and approval, for `langgraphjs dev`.
//
// Same channels, reducers, nodes and outputs as internal/graph/builtin.go, so
// the load generator (bench/cmd/loadgen) checks every server's answers the
// same way.
import { Annotation, END, START, StateGraph, interrupt } from "@langchain/langgraph";

// A state value in a sentence: strings as they are, anything else as JSON.
function text(v) {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

// echo: an append reducer (not messagesStateReducer), so no ids are added.
const EchoState = Annotation.Root({
  messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

export const echo = new StateGraph(EchoState)
  .addNode("echo", (state) => {
    const msgs = state.messages ?? [];
    const last = msgs.length > 0 ? msgs[msgs.length - 1] : undefined;
    const content = last && typeof last === "object" ? text(last.content) : "";
    return { messages: [{ role: "assistant", content: "echo: " + content }] };
  })
  .addEdge(START, "echo")
  .addEdge("echo", END)
  .compile();

// counter: count (add reducer, starts at 0), steps (last value, default 10).
const CounterState = Annotation.Root({
  count: Annotation({ reducer: (a, b) => a + b, default: () => 0 }),
  steps: Annotation(),
});

export const counter = new StateGraph(CounterState)
  .addNode("inc", () => ({ count: 1 }))
  .addEdge(START, "inc")
  .addConditionalEdges(
    "inc",
    (state) => ((state.count ?? 0) < (state.steps ?? 10) ? "inc" : END),
    ["inc", END],
  )
  .compile();

// approval: interrupt with a question; the resume value becomes the answer.
const ApprovalState = Annotation.Root({
  request: Annotation(),
  answer: Annotation(),
});

export const approval = new StateGraph(ApprovalState)
  .addNode("ask", (state) => {
    const answer = interrupt({ question: "approve " + text(state.request) + "?" });
    return { answer };
  })
  .addEdge(START, "ask")
  .addEdge("ask", END)
  .compile();
