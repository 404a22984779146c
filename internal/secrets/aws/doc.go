// Package aws is the AWS Secrets Manager adapter of the secrets port
// (package secrets): every value is one secret, created once and never
// changed, read through a small in-process cache — or, with
// Options.Grouped (the deployed functions), the values of one owner share
// one secret, a JSON map written with compare-and-set on the AWSCURRENT
// version, so that the count of secrets (and the bill, $0.40 each a month)
// grows with organizations and deployments instead of values (grouped.go
// says how; docs/aws.md the cost). The sections below describe a value
// stored one per secret; grouped references (with "@<shard>") are read and
// deleted through their owner's map.
//
// # Names and references
//
// Create names the secret Prefix + ref, where ref is the caller's hint, "-"
// and 24 random hex digits (96 bits): unique without a lookup, and never
// ending in "-" plus six characters, the shape Secrets Manager reserves for
// the suffix of an ARN. The reference returned (and stored by callers) is
// ref, without Prefix, so it begins with the hint as the port requires;
// Prefix (e.g. "stepgraph/prod/") keeps one deployment's secrets apart from
// another's in the same account and is what IAM policies can scope to
// (arn:aws:secretsmanager:*:*:secret:stepgraph/prod/*). A reference that is
// not of this shape is reported missing without a call.
//
// Values that are valid, non-empty UTF-8 are stored as SecretString (what the
// console and other tools show); anything else as SecretBinary. Get returns
// whichever is set, byte for byte. Secrets Manager holds at most 64 KiB per
// value.
//
// Create survives the SDK's retry of a CreateSecret whose answer was lost:
// Secrets Manager recognises the retry by its ClientRequestToken; an
// emulator that does not answers ResourceExistsException, and the secret
// under the name is taken as ours when it holds the value being created.
//
// # Tags
//
// With Options.Tags, a new secret (grouped or not) is created with the tags
// it gives for the secret's name: the deployed functions tag an
// organization's secrets org=<its id>, which the run worker's tenant
// sessions are held to (secretsmanager:ResourceTag/org). Secrets created
// before keep no tag.
//
// # Deletion
//
// Delete uses ForceDeleteWithoutRecovery: a secret deleted with a recovery
// window keeps its name reserved for 7-30 days, but names here are never
// reused, so recovery would only keep a value callers have forgotten.
// Deleting an unknown or already deleted reference succeeds.
//
// # Tags and teardown
//
// Every secret a Store with a Prefix creates is tagged TagKey
// ("stepgraph:prefix") = Prefix. DeleteAll (teardown.go) deletes, without
// recovery, the secrets named under Prefix that carry that tag: the stack's
// teardown, which never touches another prefix's secrets nor one put under
// the prefix by hand.
//
// # Cache
//
// Get keeps each value for CacheTTL (5 minutes by default): values never
// change under a reference, so the TTL only bounds how long a secret deleted
// by another process stays readable here. Create puts the new value in the
// cache and Delete removes it, so a process always reads its own writes.
// The cache holds at most CacheSize values.
//
// # Errors
//
// Secrets Manager's ResourceNotFoundException, and the InvalidRequestException
// it answers for a secret being deleted, become secrets.ErrNotFound. Error
// texts name the operation and the reference, never the value: an error of
// Create is rebuilt from the service's error code and message, with the value
// removed should the service ever echo it.
package aws
