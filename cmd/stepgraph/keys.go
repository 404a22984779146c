package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// keys implements "stepgraph keys create --org NAME", which prints a new key
// for the organization (created when missing) and nothing else, so it can be
// captured with $(...), and "stepgraph keys revoke KEY", after which the key
// is refused at once.
func keys(args []string) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke") {
		return fmt.Errorf("usage: stepgraph keys create --org NAME [--data DIR] | stepgraph keys revoke KEY [--data DIR]")
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	org := fs.String("org", "", "organization name (created when missing)")
	data := fs.String("data", envOr("STEPGRAPH_DATA_DIR", "./.stepgraph"), "data directory (env STEPGRAPH_DATA_DIR)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "create" && *org == "" {
		return fmt.Errorf("keys create: --org is required")
	}
	if args[0] == "revoke" && fs.NArg() != 1 {
		return fmt.Errorf("usage: stepgraph keys revoke KEY [--data DIR] (flags before KEY)")
	}
	if err := ensureDataDir(*data); err != nil {
		return err
	}
	db, err := sqlite.Open(filepath.Join(*data, dbFile))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	k := &auth.Keys{Store: db}
	if args[0] == "revoke" {
		if err := k.Revoke(ctx, fs.Arg(0)); err != nil {
			return fmt.Errorf("keys revoke: %w", err)
		}
		fmt.Println("revoked")
		return nil
	}
	o, _, err := k.EnsureOrganization(ctx, *org)
	if err != nil {
		return err
	}
	key, err := k.Create(ctx, o.ID)
	if err != nil {
		return err
	}
	fmt.Println(key)
	return nil
}
