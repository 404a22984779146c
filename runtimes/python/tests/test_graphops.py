"""bulk_update_state (a new thread's supersteps) and subgraphs, against
LangGraph's own answers for the same graph."""

import json
import urllib.error

import pytest

from test_runtime import _reference

# Two supersteps: the input, then two joke writes applied together (one
# checkpoint), as a thread created with supersteps would be.
SUPERSTEPS = [
    [{"values": {"subjects": ["owls", "cats"]}, "as_node": "__input__"}],
    [{"values": {"jokes": ["a joke about owls"]}, "as_node": "joke"},
     {"values": {"jokes": ["a joke about cats"]}, "as_node": "joke"}],
]


def test_bulk_update_state_is_langgraphs(client):
    from langgraph.types import StateUpdate

    ref = _reference("mapreduce")
    c = {"configurable": {"thread_id": "ref"}}
    ref.bulk_update_state(c, [[StateUpdate(u["values"], u["as_node"]) for u in step] for step in SUPERSTEPS])
    want = list(reversed(list(ref.get_state_history(c))))
    got = client.call("/bulk_update_state", {"graph": "mapreduce", "thread_id": "bulk", "checkpoint": None,
                                             "supersteps": SUPERSTEPS})["checkpoints"]
    assert [cp["values"] for cp in got] == [s.values for s in want]
    assert [cp["next"] for cp in got] == [list(s.next) for s in want]
    assert [(cp["metadata"]["source"], cp["metadata"]["step"]) for cp in got] == \
        [(s.metadata["source"], s.metadata["step"]) for s in want]
    assert [cp["parent_id"] for cp in got[1:]] == [cp["id"] for cp in got[:-1]]
    # The last checkpoint continues as a thread: pick runs next.
    msgs = client.run({"graph": "mapreduce", "thread_id": "bulk", "checkpoint": got[-1]["langgraph"]})
    assert msgs[-1]["values"]["best"] == "a joke about cats"


@pytest.mark.parametrize("body, want", [
    ({"supersteps": []}, "supersteps: must hold at least one superstep"),
    ({"supersteps": [{"values": {}}]}, "supersteps[0]: must be a non-empty list of updates"),
    ({"supersteps": [[{"values": {}, "as_node": 3}]]}, "supersteps[0][0]: must be"),
    ({"supersteps": [[{"values": {"jokes": ["x"]}, "as_node": "nope"}]]}, "supersteps:"),
])
def test_bulk_update_state_bad_requests(client, body, want):
    with pytest.raises(urllib.error.HTTPError) as e:
        client.call("/bulk_update_state", {"graph": "mapreduce", "thread_id": "bad", **body})
    assert e.value.code == 400
    assert want in json.loads(e.value.read())["detail"]


def test_subgraphs_come_from_the_compiled_graph(client):
    ref = _reference("nested")
    subs = client.call("/subgraphs", {"graph": "parent"})["subgraphs"]
    assert set(subs) == {ns for ns, _ in ref.get_subgraphs()} == {"sub"}
    assert "text" in subs["sub"]["state_schema"]["properties"]
    assert set(subs["sub"]) == {"input_schema", "output_schema", "state_schema", "config_schema", "context_schema"}
    assert client.call("/subgraphs", {"graph": "parent", "namespace": "sub"})["subgraphs"].keys() == {"sub"}
    assert client.call("/subgraphs", {"graph": "parent", "namespace": "nope"})["subgraphs"] == {}
    assert client.call("/subgraphs", {"graph": "mapreduce", "recurse": True})["subgraphs"] == {}
