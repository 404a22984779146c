"""The graph's own time: a LangGraph app's graph invoked in this process,
without a server, for loadgen's `react` workload (issue 16/19).

    python graphtime.py APP_DIR GRAPH N

imports GRAPH from APP_DIR/langgraph.json (APP_DIR/src on sys.path, as the
servers see the app), invokes it 3 times untimed, then N times with one user
message, each a fresh invocation (no checkpointer: the graph alone), checks
the agent's answer and prints JSON: per-run wall time (ms, p50 and mean)
and process CPU time per run (ms, user+system).
"""

import importlib.util
import json
import os
import statistics
import sys
import time

QUESTION = "What is the weather in Paris?"
ANSWER = "The weather in Paris is sunny today."


def load_graph(app_dir: str, name: str):
    with open(os.path.join(app_dir, "langgraph.json")) as f:
        ref = json.load(f)["graphs"][name]
    path, attr = ref.rsplit(":", 1)
    sys.path.insert(0, os.path.join(app_dir, "src"))
    spec = importlib.util.spec_from_file_location("bench_app_graph", os.path.join(app_dir, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attr)


def invoke_once(graph, i: int) -> None:
    question = f"{QUESTION} ({i})"
    out = graph.invoke({"messages": [{"role": "user", "content": question}]})
    msgs = out["messages"]
    kinds = [m.type for m in msgs]
    if kinds != ["human", "ai", "tool", "ai"] or msgs[0].content != question or msgs[-1].content != ANSWER:
        raise SystemExit(f"wrong answer: {[(m.type, m.content) for m in msgs]}")


def main() -> None:
    app_dir, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    graph = load_graph(app_dir, name)
    for i in range(3):
        invoke_once(graph, -1 - i)
    wall, cpu = [], []
    for i in range(n):
        w0, c0 = time.perf_counter(), time.process_time()
        invoke_once(graph, i)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    print(json.dumps({
        "runs": n,
        "p50_ms": statistics.median(wall),
        "mean_ms": statistics.fmean(wall),
        "cpu_ms_per_run": statistics.fmean(cpu),
        "python": sys.version.split()[0],
    }))


if __name__ == "__main__":
    main()
