// Package cpcodec is the checkpoint storage format both store adapters use:
// it splits a checkpoint's bytes into a head, a small manifest and the
// values of its channels, each stored once per version, with append-only
// channels (a conversation's messages) stored as what was appended to the
// parent's version. Bytes written per step then follow what the step
// changed, not the size of the state (issue 19).
//
// # The port does not change
//
// store.Checkpoint.Data stays opaque bytes: Encode only splits data shaped
// like the engine's checkpoint JSON (a top-level "values" object, compact,
// as encoding/json writes it), and only when joining the parts gives back
// exactly the same bytes; anything else (another runtime's checkpoint
// format, say) is stored whole. Decode returns the bytes that were put,
// byte for byte.
//
// # Format
//
// A split checkpoint is stored as
//
//   - head: Data with the values object cut out (Manifest.At says where);
//   - manifest (JSON, a few dozen bytes per channel): per channel, in the
//     order of the values object, its raw key and either its value inline
//     (values up to InlineMax bytes: counters, flags, short strings) or a
//     reference to a blob: N, the value's length, and H, the SHA-256 of the
//     value without its last byte (for an array, everything but "]");
//   - blobs, keyed by (thread, ID) where ID is the first 32 hex digits of H
//     (content-addressed: a version is written once however many
//     checkpoints hold it). A blob is either the whole value (Base "") or,
//     for an array that extends the parent checkpoint's version of the same
//     channel, the appended elements only (Base = the parent version's ID).
//
// A channel whose value did not change costs only its manifest entry. The
// append check needs no read of the parent's value: the new array extends
// the parent's when its first N-1 bytes hash to the parent's H and byte N-1
// is ",". Hashing is one pass over the new value, which the engine has
// just serialized anyway.
//
// # Reading: bounded chains
//
// A value is materialized from its chain of blobs: the full base and the
// appends after it, oldest first. An adapter reads a chain in one query
// (SQLite: a recursive CTE; DynamoDB: one Query on the blob prefix). The
// chain is bounded: a version whose chain would exceed MaxDepth links is
// written whole instead (so reads of a long conversation follow at most
// MaxDepth links; the whole value is written once every MaxDepth appends,
// amortized state/MaxDepth bytes per step).
//
// # The other copies of the state
//
// A thread's values summary and a run's result are the state of a
// checkpoint: EncodeObject splits such a document against the latest
// checkpoint's manifest, so it references the same versions and writes a
// manifest, not the state again.
//
// # What the adapters keep
//
// The parent's manifest is what Encode needs: an adapter reads it from the
// parent checkpoint's row (or from the previous checkpoint of the same
// batch). When it cannot (the parent is gone or not yet written, as in a
// copy written newest page first), every channel is written whole: always
// correct, just not smaller.
//
// Deleting checkpoints (prune, rollback) or a run leaves blobs nothing
// reaches; the adapter deletes them in the same operation (the live set:
// the manifests of the remaining checkpoints, thread values and run
// results, and the bases of what they reach; Manifest.Refs). Deleting a
// thread deletes its blobs.
//
// Checkpoints stored before this format (no manifest) are read as they
// are: the format is chosen per row, so no migration rewrites old data.
package cpcodec
