package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

const configUsage = `Usage: ledgerq config <command> [flags]

Commands:
  check   validate the settings (--config FILE, the environment, flags) and
          print the effective configuration, secrets redacted
  docs    write docs/configuration.md, every setting, from their declarations
`

// runConfig runs ledgerq config's subcommands.
func runConfig(ctx context.Context, args []string) error {
	return subcommand("ledgerq config", "command", configUsage, args, os.Stdout, os.Stderr, map[string]func([]string) error{
		"check": func(args []string) error { return configCheck(args, os.Stdout) },
		"docs":  func(args []string) error { return configDocs(args, os.Stdout) },
	})
}

// configCheck validates serve's settings as serve reads them (with a
// placeholder database URL when none is set: the file may leave it to the
// environment) and writes the effective configuration to w.
func configCheck(args []string, w io.Writer) error {
	cfg := nodeDefaultsForServe()
	reg, err := parseNodeFlags("config check", "Validate the settings serve would run with (--config FILE, the environment, flags) and print\nthe effective configuration as a configuration file, secrets redacted.",
		&cfg, serveParts, args, "warn", nil)
	if err != nil {
		return err
	}
	if err := cfg.ValidateSettings(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return reg.WriteYAML(w)
}
