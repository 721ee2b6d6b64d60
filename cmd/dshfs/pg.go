package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"github.com/dshfs/dshfs/eventstore/postgres"
)

// cmdPg runs the fleet store's administration: `dshfs pg init DSN`.
func cmdPg(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) == 0 || pos[0] != "init" {
		return exitUsageErr, &usageError{"pg needs a subcommand: init DSN"}
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"pg init needs exactly one DSN"}
	}
	dsn := pos[1]
	if !postgres.IsDSN(dsn) {
		return exitUsageErr, &usageError{"pg init needs a postgres:// or postgresql:// DSN, got " + postgres.Redact(dsn)}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	b, err := postgres.Open(ctx, dsn, postgres.Options{Host: cfg.Fleet.Host, ReleaseAfter: cfg.Fleet.ReleaseAfter, Timeout: cfg.Fleet.Timeout})
	if err != nil {
		var se *postgres.SchemaError
		if errors.As(err, &se) {
			return exitFound, err
		}
		return exitUsageErr, err
	}
	defer b.Close()
	fmt.Fprintf(out, "fleet store %s ready: schema version %d, store id %s\n", b.Location(), b.SchemaVersion(), b.StoreID())
	return exitOK, nil
}
