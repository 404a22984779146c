package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// dbCommand implements "stepgraph db check": SQLite's integrity and
// foreign-key checks on the data directory's database. It prints "ok" or
// fails with what is wrong.
func dbCommand(args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("usage: stepgraph db check [-data DIR]")
	}
	fs := flag.NewFlagSet("db check", flag.ContinueOnError)
	data := fs.String("data", envOr("STEPGRAPH_DATA_DIR", "./.stepgraph"), "data directory (env STEPGRAPH_DATA_DIR)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	db, err := sqlite.Open(filepath.Join(*data, dbFile))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.IntegrityCheck(context.Background()); err != nil {
		return err
	}
	fmt.Println("ok")
	return nil
}
