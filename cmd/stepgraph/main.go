// Command stepgraph is the local server and admin CLI: the embedded default.
//
//	stepgraph serve [flags]               serve the API on an embedded store
//	stepgraph keys create --org NAME      print a new API key for an organization
//	stepgraph keys revoke KEY             revoke an API key
//	stepgraph db check                    check the database's integrity
//	stepgraph webhooks secret --org NAME  print the webhook signing secret(s)
//	stepgraph webhooks rotate --org NAME  make a new one; the old signs on for --overlap
//	stepgraph build [DIR] -o app.zip      a LangGraph app as a Lambda zip (-arch, -python-version; -image DIR: a Docker build context)
//	stepgraph version                     print the version
//
// It is a composition root: it reads flags and environment, opens the
// embedded adapters (SQLite, the local secrets file, in-process workers) and
// hands them to the use cases and the HTTP API.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stepgraph:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: stepgraph serve|dev|build|keys|db|webhooks|version (see stepgraph <command> -h)")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "dev":
		return dev(args[1:])
	case "build":
		return build(args[1:])
	case "keys":
		return keys(args[1:])
	case "db":
		return dbCommand(args[1:])
	case "webhooks":
		return webhooksCommand(args[1:])
	case "version":
		fmt.Println(version)
		return nil
	case "-h", "--help", "help":
		fmt.Println("usage: stepgraph serve|dev [DIR]|build [DIR] -o app.zip|-image DIR|keys create --org NAME|db check|webhooks secret|rotate --org NAME|version")
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, dev, build, keys, db, webhooks or version)", args[0])
}
