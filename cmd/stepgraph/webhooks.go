package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/webhooks"
)

// webhooksCommand implements "stepgraph webhooks secret --org NAME": it
// prints the organization's webhook signing secret (made on first use), the
// whsec_ key receivers verify webhook-signature with (Standard Webhooks).
// Only the secret is printed, so it can be captured with $(...).
func webhooksCommand(args []string) error {
	if len(args) == 0 || args[0] != "secret" {
		return fmt.Errorf("usage: stepgraph webhooks secret --org NAME [--data DIR]")
	}
	fs := flag.NewFlagSet("webhooks secret", flag.ContinueOnError)
	org := fs.String("org", "", "organization name")
	data := fs.String("data", envOr("STEPGRAPH_DATA_DIR", "./.stepgraph"), "data directory (env STEPGRAPH_DATA_DIR)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *org == "" {
		return fmt.Errorf("webhooks secret: --org is required")
	}
	db, err := sqlite.Open(filepath.Join(*data, dbFile))
	if err != nil {
		return err
	}
	defer db.Close()
	sec, err := local.Open(*data)
	if err != nil {
		return err
	}
	ctx := context.Background()
	o, err := db.OrganizationByName(ctx, *org)
	if err != nil {
		return fmt.Errorf("organization %q: %w", *org, err)
	}
	keys, err := (&webhooks.OrgKeys{Store: db, Secrets: sec}).SigningSecrets(ctx, o.ID)
	if err != nil {
		return err
	}
	fmt.Println(keys[0])
	return nil
}
