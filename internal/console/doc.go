// Package console serves the web console: a single page app (its sources in
// console/ at the top of the repository, built with the pinned esbuild into
// dist/, which is committed and embedded here) that uses only the public
// API through the official @langchain/langgraph-sdk. It owns the page, its
// assets and their headers (a strict Content-Security-Policy: the page loads
// nothing from elsewhere and talks only to its origin). internal/api routes
// GET / and GET /console/assets/{asset} to it. See docs/console.md.
package console
