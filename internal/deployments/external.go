package deployments

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// LangGraph apps of external_docker deployments.
//
// An external_docker deployment's runtime (its custom_url, or the function
// made from its image_uri) answers the describe call. A graph-document
// runtime answers its graph config ({"graphs": {...}}); stepgraph's Python
// runtime serving a LangGraph app (an image or a function made from
// `stepgraph build`'s zip) answers {"langgraph_app": {"graphs": {id:
// "./path.py:variable"}}} instead, or {"langgraph_app": {"error": {...}}}
// when it cannot load the app. An app's revision keeps that answer as its
// snapshot (Described and App both set) and is then served like a
// hosted_repo app's, at the revision's runtime URL
// (RevisionGraphs.ExternalApp): nothing is staged, built or started here.

// appDescribeKey marks a runtime's describe answer as a LangGraph app's.
const appDescribeKey = "langgraph_app"

// describedApp tells what a runtime's describe answer is: a graph config
// (app false), a LangGraph app's with its graph ids, or the reason it is
// neither (the revision fails with it). Problems name the file "describe"
// and the JSON path, as the graph config's do.
func describedApp(raw []byte) (app bool, ids []string, reason string) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return false, nil, describeFile + ": the runtime's answer is not a JSON object: " +
			"a runtime answers its graph config ({\"graphs\": {...}}) or, as a LangGraph app, {\"langgraph_app\": {\"graphs\": {...}}}"
	}
	appRaw, isApp := top[appDescribeKey]
	_, isConfig := top["graphs"]
	switch {
	case isApp && isConfig:
		return false, nil, describeFile + ": the runtime's answer has both /graphs and /langgraph_app: " +
			"a graph config or a LangGraph app's answer, not both"
	case isConfig:
		return false, nil, ""
	case !isApp:
		keys := make([]string, 0, len(top))
		for k := range top {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return false, nil, fmt.Sprintf("%s: the runtime's answer is neither a graph config ({\"graphs\": {...}}) "+
			"nor a LangGraph app's ({\"langgraph_app\": {\"graphs\": {...}}}); its keys: [%s]", describeFile, strings.Join(keys, ", "))
	}
	var a struct {
		Graphs map[string]json.RawMessage `json:"graphs"`
		Error  *struct {
			Type      string `json:"error"`
			Message   string `json:"message"`
			Traceback string `json:"traceback"`
		} `json:"error"`
	}
	if err := json.Unmarshal(appRaw, &a); err != nil {
		return true, nil, describeFile + ": /langgraph_app: must be an object {\"graphs\": {\"<graph id>\": \"./path.py:variable\"}}"
	}
	if a.Error != nil {
		reason := fmt.Sprintf("the runtime cannot load the LangGraph app: %s: %s", a.Error.Type, a.Error.Message)
		if a.Error.Traceback != "" {
			reason += "\n" + a.Error.Traceback
		}
		return true, nil, boundReason(reason)
	}
	if len(a.Graphs) == 0 {
		return true, nil, describeFile + ": /langgraph_app/graphs: must name at least one graph (an object of graph ids)"
	}
	config, _ := json.Marshal(map[string]any{"graphs": a.Graphs})
	switch appKind(config) {
	case "js":
		return true, nil, describeFile + ": names JavaScript graphs: JavaScript LangGraph apps are not supported (only Python ones)"
	case "":
		return true, nil, describeFile + ": /langgraph_app/graphs: each graph must be \"./path/to/file.py:variable\" or \"module:variable\""
	}
	for id := range a.Graphs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if strings.TrimSpace(id) == "" {
			return true, nil, describeFile + ": /langgraph_app/graphs: a graph id may not be empty"
		}
	}
	return true, ids, ""
}
