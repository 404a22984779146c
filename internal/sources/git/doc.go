// Package git is the go-git adapter of the sources port (sources.Checker):
// it checks the source of a hosted_repo deployment revision, for the local
// server and the AWS deploy worker alike: that the repository is reachable, that the ref
// resolves to a commit, and that the graph config file exists at that commit
// and parses as a JSON or YAML object.
//
// Repositories are reached in one of two ways:
//
//   - https:// URLs are fetched through Checker.HTTPClient, the platform's
//     SSRF-guarded client (internal/weburl: private, loopback, link-local
//     and metadata addresses are refused at dial time, after DNS and on
//     every redirect). The client is handed to go-git's session for this
//     check only (githttp.NewClient), never installed in go-git's
//     process-wide protocol table. The fetch is shallow (depth 1 of the
//     one ref) whenever the wanted commit is the tip of an advertised
//     branch or tag, and goes to a temporary directory on disk, removed
//     when the check ends: the pack streams to a file, its object headers
//     are checked, then it is indexed with go-git's filesystem storage.
//     Credentials embedded in the URL (https://user:token@host/...) are
//     stripped from the URL and sent as HTTP basic auth; they never appear
//     in a message.
//   - file:// URLs and absolute local paths, only inside Checker.LocalDirs
//     (the -allow-local-repos flag; none by default), are opened in place,
//     read-only, with go-git (no git binary is needed and nothing is
//     copied). The repository, its git directory and a work tree's common
//     directory must each be inside an allowed directory once symbolic
//     links are evaluated, never under /proc, /sys or /dev; inside them,
//     files are read through a file system bound to the directory. Every
//     failure to open one has the same message (missing, not a directory,
//     not readable, not a repository, outside): the answer tells a tenant
//     nothing about the host's files.
//
// Every other form (http://, ssh://, git://, scp-like git@host:path, relative
// paths, and URLs with a query string or a fragment, where tokens hide) is
// rejected. CheckURL gives that rule without reaching the repository, so
// that the deployments use case can refuse a URL when it is given.
//
// Limits, each naming itself in the message when passed: MaxBytes (200 MiB)
// read from the network per check; MaxObjectBytes (64 MiB) per object,
// inflated, and at most 100,000 objects per fetch, checked before the pack
// is indexed (indexing holds an object whole in memory); Timeout (2
// minutes) per check; MaxConcurrent (4) checks at once, others waiting for
// a slot. Memory per check stays about one object plus buffers, however
// large the repository.
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
