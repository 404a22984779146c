// Package storeapi is the use case of the long-term memory store: the
// Agent Server's /store API (put, get, delete and search items, list
// namespaces) and the store graphs reach while they run. It owns the
// rules: what a namespace, key, value, TTL and index may be (upstream's
// rules, e.g. labels are non-empty and contain no "."), the limits per
// organization (item size, namespace depth, page sizes, the items a
// search considers) and the stored-bytes quota items share with threads,
// the filter language of searches (upstream's: equality, nested objects,
// $eq/$ne/$gt/$gte/$lt/$lte), TTLs in minutes refreshed on read, and
// semantic search: an item's index fields are embedded by the operator's
// OpenAI-compatible endpoint (Embedder) when it is written, a query is
// embedded when it searches, and results are ranked by cosine similarity.
//
// Items are kept by the store.Items port (SQLite locally, DynamoDB on
// AWS), scoped to an organization.
package storeapi
