// stepgraph's built-in graphs echo, counter and approval, and the chat graph, for `langgraphjs dev`.
//
// Same channels, reducers, nodes and outputs as internal/graph/builtin.go, so
// the load generator (bench/cmd/loadgen) checks every server's answers the
// same way.
import { Annotation, END, MessagesAnnotation, START, StateGraph, interrupt } from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";

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

// chat: one chat model call (the stream-chat workload). stepgraph's side is a
// graph document with a chat_model node (bench/cmd/loadgen/chatgraph.go); both
// call loadgen's local OpenAI-compatible endpoint, whose URL loadgen passes in
// BENCH_MODEL_URL (and its dummy key in OPENAI_API_KEY). With streamMode
// messages-tuple, LangGraph's messages handler makes ChatOpenAI stream, and
// each token chunk is an event.
const model = new ChatOpenAI({
  model: "bench-model",
  apiKey: process.env.OPENAI_API_KEY ?? "unset",
  configuration: { baseURL: process.env.BENCH_MODEL_URL ?? "http://127.0.0.1:9/v1" },
  maxRetries: 0,
});

export const chat = new StateGraph(MessagesAnnotation)
  .addNode("model", async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addEdge(START, "model")
  .addEdge("model", END)
  .compile();
