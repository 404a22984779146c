// Package kmsvault is a secrets.Store on DynamoDB items encrypted under a
// KMS key (envelope encryption): agent auth's token vault on AWS, where one
// Secrets Manager secret per token would cost $0.40 a month each
// (docs/agent-auth.md, "On AWS").
//
// Each value is sealed with AES-256-GCM under a data key that KMS makes
// (GenerateDataKey) and wraps; the item keeps the wrapped key, the nonce and
// the ciphertext, never the data key. The KMS encryption context is
// {"stepgraph:vault": <hint>} (for agent auth the hint names organization,
// provider and user), so IAM can scope kms:Decrypt to the vault's contexts
// and CloudTrail names whose value was opened; the GCM additional data is
// the reference, so an item copied under another key does not open.
//
// Data keys are cached briefly and boundedly (DataKeyTTL, DataKeyUses,
// DataKeyCacheSize), per hint for sealing and per wrapped key for opening,
// so a warm function makes about one KMS call per user and provider in
// DataKeyTTL rather than one per read. Values themselves are never cached.
//
// The items live in a table the caller names, under the partition key
// "vault#<reference>" (the providers table on AWS, whose pk/sk schema it
// shares: sk is "value").
package kmsvault
