// Package oauthtest gives tests a real OAuth 2.0 authorization server on
// loopback — no.nav.security:mock-oauth2-server, run with Java from the jars
// scripts/install-test-deps.sh fetched (test/oauth/pom.xml) — and a
// recording front for its token endpoint, so a test can check what a client
// sent (its client authentication, its PKCE verifier) and see the tokens
// issued (to register them with a leak scan). It also drives a consent the
// way a browser does: follow the redirect chain from the authorization URL.
package oauthtest
