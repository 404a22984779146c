// Package providers owns the OAuth provider registry (/v2/auth/providers): the
// rules a provider registration must satisfy, the defaults, and the handling of
// its client secret, which lives only in the secrets store and is never
// returned, logged or echoed in an error.
package providers
