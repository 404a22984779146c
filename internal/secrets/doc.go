// Package secrets is the port for secret values (OAuth client secrets and the
// like). A Store keeps each value under an opaque reference it generates;
// callers persist only the reference, never the value.
//
// The rules every adapter follows:
//
//   - A reference starts with the caller's hint (see ValidHint) and is unique:
//     two Creates with the same hint give two different references.
//   - Get of an unknown reference fails with ErrNotFound; Delete of an unknown
//     reference succeeds, so Delete can always be retried.
//   - No error, log line or panic ever contains a secret value. References and
//     hints are not secret and may appear in errors.
//
// Adapters live in subpackages (local, the embedded default, encrypted on
// disk) and are chosen only in a composition root. The contract every adapter
// must honour is the test suite in secretstest.
package secrets
