// Package codebuildlocal is test support only: a CodeBuild that runs
// builds on this machine, for the tests of the app build (the emulator's
// CodeBuild records a build and reports it SUCCEEDED at once without
// Docker: it runs nothing).
//
// Server speaks CodeBuild's JSON 1.1 protocol on 127.0.0.1 (StartBuild,
// BatchGetBuilds: what internal/codebuild's Builder calls) for one project
// (Project: its name, buildspec and environment variables). A build:
//
//   - takes the buildspec of StartBuild's override, or the project's;
//     version 0.2, env.variables, the phases install, pre_build, build
//     and post_build with their commands (runtime-versions is checked
//     against Options.Runtimes, as an image that has those versions);
//   - fetches its S3 source (the override's "bucket/key" zip) from the
//     emulator and unzips it into CODEBUILD_SRC_DIR, the working directory
//     of every command;
//   - runs each command with `bash -c`, in order, with the project's
//     variables, StartBuild's overrides, CODEBUILD_* as CodeBuild sets
//     them, the emulator's endpoint and credentials (AWS_ENDPOINT_URL, so
//     the AWS CLI reaches it) and Options.Env, PATH being Options.Path
//     then the system's directories (never the test's PATH, so a globally
//     installed tool is not used by accident). Each build has a /tmp and
//     an /opt of its own (a private mount namespace: `unshare`, so root),
//     as each CodeBuild build has its own container, so builds at once do
//     not share the buildspec's absolute paths; a module root under the
//     machine's /tmp (a clone there) is bound into the build's /tmp at its
//     path, so its tools stay reachable. The commands of a phase
//     do not share a shell (CodeBuild 0.2 runs them in one): a `cd` or an
//     `export` does not carry to the next command;
//   - stops at the first failing command as CodeBuild does: that phase
//     FAILED with COMMAND_EXECUTION_ERROR, "Error while executing command:
//     <command>. Reason: exit status N", the later phases of install,
//     pre_build and build skipped, post_build run after a failed build;
//   - writes its log (CodeBuild's "[Container] ..." lines and the
//     commands' output) to CloudWatch Logs on the emulator, group
//     /aws/codebuild/<project>, stream the build id's part after the
//     colon, before it ends;
//   - is IN_PROGRESS until then, SUCCEEDED or FAILED after.
//
// What this is not: the CodeBuild image (Amazon Linux, its python3.11 and
// AWS CLI v2, its container credentials). The tests give python3.11 as a
// shim to the project's .venv interpreter and the AWS CLI v1 of
// .venv-awscli (Tools).
package codebuildlocal
