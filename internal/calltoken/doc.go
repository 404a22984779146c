// Package calltoken owns the rules of the per-call tokens of LangGraph apps'
// runtime calls on AWS (docs/runtime-protocol.md, "The bridge on AWS").
//
// Locally a run call's graph reaches the platform through pyapp's loopback
// Bridge, whose grants live in memory. A Lambda function cannot reach
// loopback, and the stage's API functions share no memory: there the call
// carries a signed token instead, checked by whichever API function
// instance serves the graph's request.
//
// A token is "sgc1.<claims>.<mac>": the claims (the call's id, organization,
// run, assistant, user, expiry and key generation) in base64url JSON, and
// an HMAC-SHA256 of "sgc1.<claims>" under the organization's key of that
// generation. Keys come from the caller (Keys: the stage's secrets, one key
// per organization and generation, created on first use), so this package
// imports no adapter. A generation lasts Period; a token signed under the
// previous generation is still accepted (the overlap of a rotation: a
// token's life is a call's budget, far shorter than a period), older ones
// are refused. Tokens expire a little past the call's budget.
//
// What a call may spend (its token requests, its events) is counted in
// store.CallBudgets, keyed by the token's id, so the bound holds across
// function instances. A token is a credential: it is never logged, never in
// an error, never in a checkpoint; errors of Verify name the rule broken,
// never the token.
package calltoken
