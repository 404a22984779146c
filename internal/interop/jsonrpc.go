package interop

import (
	"bytes"
	"encoding/json"
	"strings"
)

// JSON-RPC 2.0 error codes (https://www.jsonrpc.org/specification#error_object).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return e.Message }

func rpcErr(code int, msg string) *RPCError { return &RPCError{Code: code, Message: msg} }

// Response is a JSON-RPC response: exactly one of Result and Error is set.
// ID is the request's id as it came (a string or a number), or null.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

var null = json.RawMessage("null")

func result(id json.RawMessage, v any) Response {
	return Response{JSONRPC: "2.0", ID: idOrNull(id), Result: v}
}

func errorResponse(id json.RawMessage, e *RPCError) Response {
	return Response{JSONRPC: "2.0", ID: idOrNull(id), Error: e}
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return null
	}
	return id
}

// Reply is what an endpoint answers: an HTTP status and a JSON body (nil:
// no body, as for 202).
type Reply struct {
	Status int
	Body   any
}

// envelope is one decoded JSON-RPC message. Fields are kept raw so that a
// wrong type is a protocol error, never a decoding failure.
type envelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`

	method string // Method when it is a string
}

// kind of a message, by the members present (the Streamable HTTP rules).
type kind int

const (
	kindInvalid kind = iota
	kindRequest
	kindNotification
	kindResponse
)

// decodeEnvelope parses body as one JSON-RPC message. It fails with a parse
// error for text that is not JSON and an invalid-request error for JSON that
// is not one message object (batches are not served, as upstream).
func decodeEnvelope(body []byte) (envelope, *RPCError) {
	var env envelope
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		return env, rpcErr(CodeParseError, "Parse error: the body is not valid JSON")
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return env, rpcErr(CodeInvalidRequest, "Invalid Request: the body must be one JSON-RPC message object")
	}
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return env, rpcErr(CodeInvalidRequest, "Invalid Request: the body must be one JSON-RPC message object")
	}
	if string(env.JSONRPC) != `"2.0"` {
		return env, rpcErr(CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`)
	}
	if isNull(env.ID) {
		env.ID = nil
	}
	if env.ID != nil && !validID(env.ID) {
		env.ID = nil // an id of the wrong type cannot be echoed back
		return env, rpcErr(CodeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	if env.Method != nil && !isNull(env.Method) {
		if err := json.Unmarshal(env.Method, &env.method); err != nil || env.method == "" {
			// Not a method name at all: no such method (upstream's answer).
			return env, rpcErr(CodeMethodNotFound, "Method not found: method must be a non-empty string")
		}
	}
	if env.Params != nil && !isNull(env.Params) && bytes.TrimSpace(env.Params)[0] != '{' {
		return env, rpcErr(CodeInvalidParams, "Invalid params: params must be an object")
	}
	return env, nil
}

func (e envelope) kind() kind {
	switch {
	case e.ID != nil && e.method != "":
		return kindRequest
	case e.method != "":
		return kindNotification
	case e.ID != nil && (e.Result != nil || e.Error != nil):
		return kindResponse
	}
	return kindInvalid
}

// params decodes the request's params into v; absent params leave v as is.
func (e envelope) params(v any) *RPCError {
	if e.Params == nil || isNull(e.Params) {
		return nil
	}
	if err := json.Unmarshal(e.Params, v); err != nil {
		return rpcErr(CodeInvalidParams, "Invalid params: "+describeJSONError(err))
	}
	return nil
}

func validID(id json.RawMessage) bool {
	c := bytes.TrimSpace(id)
	if len(c) == 0 {
		return false
	}
	switch c[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// describeJSONError names the field and the expected type of a decoding
// failure without echoing the input.
func describeJSONError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		field := te.Field
		if field == "" {
			field = "params"
		}
		return field + " must be " + jsonType(te.Type.Kind().String())
	}
	return "params do not fit the method"
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "float64", "float32", "uint", "uint64":
		return "a number"
	}
	return "of another type"
}

// accepts reports whether an Accept header allows mediaType: exactly, by
// its type's wildcard, or by */* (parameters such as q are ignored).
func accepts(header, mediaType string) bool {
	for _, r := range strings.Split(header, ",") {
		r = strings.ToLower(strings.TrimSpace(strings.SplitN(r, ";", 2)[0]))
		if r == "" {
			continue
		}
		if r == "*/*" || r == mediaType {
			return true
		}
		if t, ok := strings.CutSuffix(r, "/*"); ok && strings.HasPrefix(mediaType, t+"/") {
			return true
		}
	}
	return false
}
