// Package local is the embedded secrets.Store adapter: secret values are kept
// encrypted in a directory on the local disk. It is the default of the local
// server; the stepgraph CLI may use the directory while the server runs.
//
// The package owns two files in its directory, which Open creates (0700) if
// missing:
//
//   - secrets.key: the 32-byte AES-256 key, raw bytes, mode 0600, created from
//     crypto/rand on first Open. Open refuses a key file of any other length.
//     Losing it makes every stored value unreadable.
//   - secrets.json: the sealed values, mode 0600.
//
// secrets.json is a JSON object mapping each reference to its sealed value,
// both fields standard base64 with padding:
//
//	{"providers/org-1/github/9f86d081884c7d65": {"nonce": "<base64>", "ciphertext": "<base64>"}}
//
// Each value is sealed with AES-256-GCM under a fresh random 12-byte nonce,
// with the reference as associated data: a ciphertext that is altered, moved
// to another reference, or read with another key fails to decrypt with
// ErrDecrypt instead of yielding a wrong value. Open rejects a file that is
// not in this format with an error saying it is corrupt.
//
// References are "<hint>/<16 lowercase hex random characters>".
//
// The whole map is held in memory behind a sync.RWMutex and loaded at Open.
// Every Create and Delete rewrites secrets.json atomically: a temporary file
// in the same directory is written and fsynced, renamed over secrets.json, and
// the directory is fsynced. When any step fails the in-memory change is rolled
// back, so a failed call changes nothing, and a crash leaves either the old or
// the new file, never a half-written one (nor a leftover temporary file). A
// write the file system refuses (full, over quota or the file size limit,
// read-only, I/O error, permission) fails with fail.Unavailable, whose
// message is the system's reason without the path.
//
// Several processes may share the directory (the server and the stepgraph
// CLI): a write takes an advisory lock on secrets.lock and starts from the
// file as it is on disk, and a Get that misses re-reads the file.
package local
