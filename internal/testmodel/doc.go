// Package testmodel is a fake OpenAI-compatible Chat Completions endpoint
// for tests: it listens on 127.0.0.1 and answers each request with the
// turn a script gives, streamed as chat.completion.chunk server-sent events
// (content in pieces, tool calls as argument fragments by index, usage,
// [DONE]) when the request asks for a stream, as one completion otherwise.
// It is the model of chat_model nodes in the tests of graphdoc, api and
// test/conformance; no test reaches a real model.
package testmodel
