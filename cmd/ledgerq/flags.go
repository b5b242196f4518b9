package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// newFlagSet returns a FlagSet whose usage lists each flag with the
// environment variable that can set it.
func newFlagSet(name, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: ledgerq %s [flags]\n\n%s\n\nFlags (each can also be set by the environment variable shown):\n", name, summary)
		fs.VisitAll(func(f *flag.Flag) {
			if strings.HasPrefix(f.Usage, "deprecated: ") {
				return // an old name of another flag
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(out, "  --%s\t%s%s [%s]\n", f.Name, f.Usage, def, envName(f.Name))
		})
	}
	return fs
}

// envName is the environment variable for a flag: LEDGERQ_ and the flag name
// in upper snake case; --database-url also reads DATABASE_URL.
func envName(flagName string) string {
	if flagName == "database-url" {
		return "DATABASE_URL or LEDGERQ_DATABASE_URL"
	}
	return "LEDGERQ_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, then fills every flag not given on the command line
// from its environment variable. Command-line flags win over the environment.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see ledgerq %s --help)", fs.Arg(0), fs.Name())
	}
	return applyEnv(fs)
}

// flagEnvNames are the environment variables that set flag name.
func flagEnvNames(name string) []string {
	if name == "database-url" {
		return []string{"DATABASE_URL", "LEDGERQ_DATABASE_URL"}
	}
	return []string{"LEDGERQ_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

// applyEnv sets every flag not given on the command line from its
// environment variable.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		for _, n := range flagEnvNames(f.Name) {
			if v, ok := os.LookupEnv(n); ok && v != "" {
				if e := f.Value.Set(v); e != nil {
					err = fmt.Errorf("environment variable %s=%q: %w", n, v, e)
				}
				return
			}
		}
	})
	return err
}
