package graph

import (
	"context"
	"errors"
	"fmt"
)

// Error kinds the engine raises itself. They reuse LangGraph's exception class
// names because the wire format reports the class name to SDK users.
const (
	KindInvalidUpdate = "InvalidUpdateError"
	KindRecursion     = "GraphRecursionError"
	KindEmptyInput    = "EmptyInputError"
	KindValue         = "ValueError"
	KindTimeout       = "TimeoutError"
	KindPanic         = "Panic"
	// KindGeneric is the kind of a node error that does not say its own kind.
	KindGeneric = "Error"
)

// Error is a run failure: a kind (an exception class name, e.g. ValueError)
// and a message. Its JSON form is the body of the API's "__error__" value.
// Nodes return one (see Errorf) to choose the kind callers see.
type Error struct {
	Kind    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// Errorf returns an *Error of the given kind.
func Errorf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// asError classifies any error a node or router returned.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e == nil { // a typed nil *Error is still a failure
			return &Error{Kind: KindGeneric, Message: "a nil *graph.Error was returned as an error"}
		}
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Message: err.Error()}
	}
	return &Error{Kind: KindGeneric, Message: err.Error()}
}

func invalidUpdate(format string, args ...any) *Error {
	return Errorf(KindInvalidUpdate, format, args...)
}

func recursionError(limit int) *Error {
	return Errorf(KindRecursion, "Recursion limit of %d reached without hitting a stop condition. "+
		"You can increase the limit by setting the `recursion_limit` config key.\n"+
		"For troubleshooting, visit: https://docs.langchain.com/oss/python/langgraph/errors/GRAPH_RECURSION_LIMIT", limit)
}
