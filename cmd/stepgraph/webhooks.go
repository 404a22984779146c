package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/webhooks"
)

const webhooksUsage = "usage: stepgraph webhooks secret --org NAME [--data DIR] | stepgraph webhooks rotate --org NAME [--overlap 24h] [--data DIR]"

// webhooksCommand implements the webhook signing secret's commands:
//
//   - "stepgraph webhooks secret --org NAME" prints the secrets that sign
//     the organization's webhooks (made on first use), one per line, the
//     current one first — the whsec_ keys receivers verify
//     webhook-signature with (Standard Webhooks). During a rotation's
//     overlap the older ones follow; `| head -n1` is the current one.
//   - "stepgraph webhooks rotate --org NAME [--overlap D]" makes a new
//     current secret and prints it; the previous ones keep signing for D
//     (default 24h, 0 drops them at once), so receivers switch without
//     losing a delivery. A running server picks it up on its next delivery.
//
// Only secrets go to stdout, so they can be captured with $(...); notes go
// to stderr.
func webhooksCommand(args []string) error {
	stdout, stderr := os.Stdout, os.Stderr
	if len(args) == 0 || (args[0] != "secret" && args[0] != "rotate") {
		return fmt.Errorf("%s", webhooksUsage)
	}
	fs := flag.NewFlagSet("webhooks "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	org := fs.String("org", "", "organization name")
	data := fs.String("data", envOr("STEPGRAPH_DATA_DIR", "./.stepgraph"), "data directory (env STEPGRAPH_DATA_DIR)")
	overlap := webhooks.DefaultOverlap
	if args[0] == "rotate" {
		fs.DurationVar(&overlap, "overlap", webhooks.DefaultOverlap,
			fmt.Sprintf("how long the previous secrets keep signing (0 to %s; 0 drops them at once, for a leaked secret)", webhooks.MaxOverlap))
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *org == "" {
		return fmt.Errorf("webhooks %s: --org is required", args[0])
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
	k := &webhooks.OrgKeys{Store: db, Secrets: sec}
	if args[0] == "rotate" {
		secret, until, err := k.Rotate(ctx, o.ID, overlap)
		if err != nil {
			return fmt.Errorf("webhooks rotate: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		switch {
		case until.IsZero():
			fmt.Fprintln(stderr, "the organization's first webhook signing secret")
		case overlap == 0:
			fmt.Fprintln(stderr, "the previous secrets no longer sign")
		default:
			fmt.Fprintf(stderr, "the previous secret keeps signing until %s\n", until.Format(time.RFC3339))
		}
		return nil
	}
	secrets, err := k.SigningSecrets(ctx, o.ID)
	if err != nil {
		return err
	}
	for _, s := range secrets {
		fmt.Fprintln(stdout, s)
	}
	if len(secrets) > 1 {
		fmt.Fprintln(stderr, "the first line is the current secret; the others were rotated away and sign until their overlap ends")
	}
	return nil
}
