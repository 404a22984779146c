// Package git is the go-git adapter of the sources port (sources.Checker):
// it checks the source of a hosted_repo deployment revision, for the local
// server and the AWS deploy worker alike: that the repository is reachable, that the ref
// resolves to a commit, and that the graph config file exists at that commit
// and parses as a JSON or YAML object.
//
// Repositories are reached in one of two ways:
//
//   - https:// URLs are fetched with go-git into memory storage (no temporary
//     directories), shallow (depth 1) whenever the wanted commit is the tip of an
//     advertised branch or tag. Credentials embedded in the URL
//     (https://user:token@host/...) are stripped from the URL and sent as HTTP
//     basic auth; they never appear in an error message.
//   - file:// URLs and absolute local paths, only when Checker.AllowFile is set,
//     are opened in place, read-only, with go-git (no git binary is needed and
//     nothing is copied).
//
// Every other form (http://, ssh://, git://, scp-like git@host:path, relative
// paths) is rejected.
//
// A ref is a branch name ("main"), a full ref ("refs/heads/x", "refs/tags/v1"),
// a tag name ("v1"), "HEAD" or a full 40-hex commit sha. A short name is looked
// up as a branch first, then as a tag. Annotated tags are peeled to the commit
// they point at; Checkout.CommitSHA is always a commit.
//
// The graph config is read from the commit's tree (no work tree is checked
// out). Its path must be relative and stay inside the repository; symbolic
// links inside the tree are followed as long as they stay inside too. Files
// ending in .json are parsed as JSON, .yaml/.yml as YAML, anything else as JSON
// and then YAML. The top level must be an object. YAML documents are converted
// to exactly what the equivalent JSON document would decode to (string keys,
// float64 numbers, RFC 3339 strings for timestamps), so consumers see the same
// types whatever the format. Config files larger than 1 MiB are rejected.
//
// CheckFiles also hands its caller the commit's tree as a read-only fs.FS
// for the duration of a callback (the graph documents the config names are
// read through it), under the same rules: paths inside the repository,
// symbolic links followed only while they stay inside, files up to
// MaxFileSize, nothing under .git.
//
// Every failure is a *sources.Error whose message says what is wrong in terms
// the deployment's author can act on. Cancellation and timeouts are
// sources.Errors too, and unwrap to context.Canceled or
// context.DeadlineExceeded.
package git
