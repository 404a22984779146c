package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// keys implements "stepgraph keys create --org NAME", which prints a new key
// for the organization (created when missing) and nothing else, so it can be
// captured with $(...), and "stepgraph keys revoke KEY", after which the key
// is refused at once. With --aws-table-prefix both act on a deployed stack.
func keys(args []string) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke") {
		return fmt.Errorf("usage: stepgraph keys create --org NAME [--data DIR | --aws-table-prefix P] | stepgraph keys revoke KEY [--data DIR | --aws-table-prefix P]")
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	org := fs.String("org", "", "organization name (created when missing)")
	data := fs.String("data", envOr("STEPGRAPH_DATA_DIR", "./.stepgraph"), "data directory (env STEPGRAPH_DATA_DIR)")
	tables := fs.String("aws-table-prefix", "", "act on a deployed stack's DynamoDB tables with this prefix (its TablePrefix output) instead of the data directory; credentials, AWS_REGION and AWS_ENDPOINT_URL as for any AWS tool")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "create" && *org == "" {
		return fmt.Errorf("keys create: --org is required")
	}
	if args[0] == "revoke" && fs.NArg() != 1 {
		return fmt.Errorf("usage: stepgraph keys revoke KEY [--data DIR] (flags before KEY)")
	}
	ctx := context.Background()
	db, err := openOrganizations(ctx, *data, *tables)
	if err != nil {
		return err
	}
	defer db.Close()
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

// organizations is the store the keys commands need.
type organizations interface {
	store.Organizations
	Close() error
}

// openOrganizations opens the local database of dataDir, or the DynamoDB
// tables of a deployed stack when tablePrefix is set.
func openOrganizations(ctx context.Context, dataDir, tablePrefix string) (organizations, error) {
	if tablePrefix == "" {
		warn := func(msg string) { fmt.Fprintln(os.Stderr, "stepgraph: "+msg) }
		if err := ensureDataDir(dataDir, warn); err != nil {
			return nil, err
		}
		return sqlite.Open(filepath.Join(dataDir, dbFile))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("AWS configuration: AWS_REGION is not set")
	}
	return dynamo.New(cfg, dynamo.DeployedOptions(tablePrefix)), nil
}
