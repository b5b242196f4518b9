package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := newFlagSet("migrate", "Apply or inspect the schema migrations embedded in this binary.\n\nUsage: ledgerq migrate [flags] up|down|status|version\n  up       apply every pending migration\n  down     roll back the latest migration (--to N: down to version N; 0 removes everything)\n  status   list migrations and whether each is applied\n  version  print the database's schema version and this binary's latest")
	databaseURL := fs.String("database-url", "", "PostgreSQL connection URL")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	to := fs.Int64("to", -1, "with down: roll back to this version")
	// Flags may stand before or after the verb.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	verb := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q after %s", fs.Arg(0), verb)
	}
	if err := applyEnv(fs); err != nil {
		return err
	}
	logger, err := setupLogger(*logLevel)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	st, err := openStore(ctx, *databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := st.NewMigrator(logger)
	if err != nil {
		return err
	}
	defer m.Close()
	switch verb {
	case "up":
		res, err := m.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("applied %d migration(s); schema version %d\n", len(res), m.LatestVersion())
	case "down":
		if *to >= 0 {
			res, err := m.DownTo(ctx, *to)
			if err != nil {
				return err
			}
			fmt.Printf("rolled back %d migration(s); schema version %d\n", len(res), *to)
			return nil
		}
		res, err := m.Down(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("rolled back %s\n", res.Source.Path)
	case "status":
		st, err := m.Status(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VERSION\tSTATE\tAPPLIED AT\tFILE")
		for _, s := range st {
			at := ""
			if !s.AppliedAt.IsZero() {
				at = s.AppliedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, at, s.Source.Path)
		}
		return w.Flush()
	case "version":
		current, latest, err := m.Versions(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("database: %d\nlatest:   %d\n", current, latest)
	default:
		return errors.New("unknown migrate command " + verb + ": want up, down, status or version")
	}
	return nil
}
