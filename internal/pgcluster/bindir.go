package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNoBinaries is returned (wrapped, with install instructions) by FindBinDir
// when no directory with the PostgreSQL server programs is found.
var ErrNoBinaries = errors.New("no PostgreSQL server programs (initdb, postgres) found")

// serverPrograms are the programs Start runs; a bin directory must hold all of
// them. pg_ctl is not needed: the server is run directly so that it stays a
// child of ledgerq.
var serverPrograms = []string{"initdb", "postgres"}

// installedBinGlobs are where packagers put versioned server binaries that are
// not on $PATH. The highest version among all matches wins.
var installedBinGlobs = []string{
	"/usr/lib/postgresql/*/bin",                          // Debian, Ubuntu
	"/usr/pgsql-*/bin",                                   // PGDG packages on RHEL, Fedora
	"/opt/homebrew/opt/postgresql@*/bin",                 // Homebrew, Apple silicon
	"/usr/local/opt/postgresql@*/bin",                    // Homebrew, Intel
	"/Applications/Postgres.app/Contents/Versions/*/bin", // Postgres.app
}

// binSearch says where FindBinDir looks. Tests build their own so that the
// machine's real installation does not leak into them.
type binSearch struct {
	pathEnv string   // the value of $PATH
	globs   []string // installedBinGlobs
	// pgConfigBinDir runs `pg_config --bindir` for the pg_config at the given path.
	pgConfigBinDir func(pgConfig string) (string, error)
}

// FindBinDir finds the directory holding the PostgreSQL server programs initdb
// and postgres. It looks on $PATH first (following symlinks to the real
// installation), then asks `pg_config --bindir`, then takes the highest version
// of the usual package locations such as /usr/lib/postgresql/*/bin. The error,
// which wraps ErrNoBinaries, says what to install.
func FindBinDir() (string, error) {
	return binSearch{
		pathEnv:        os.Getenv("PATH"),
		globs:          installedBinGlobs,
		pgConfigBinDir: runPGConfigBinDir,
	}.find()
}

func (s binSearch) find() (string, error) {
	pathDirs := filepath.SplitList(s.pathEnv)

	for _, dir := range pathDirs {
		if dir == "" {
			continue // an empty entry means the working directory; never run servers from there
		}
		if found, ok := serverBinDirVia(filepath.Join(dir, "initdb")); ok {
			return found, nil
		}
	}

	for _, dir := range pathDirs {
		if dir == "" {
			continue
		}
		pgConfig := filepath.Join(dir, "pg_config")
		if !isExecutable(pgConfig) {
			continue
		}
		binDir, err := s.pgConfigBinDir(pgConfig)
		if err == nil && hasServerPrograms(binDir) {
			return binDir, nil
		}
		break // only the pg_config that $PATH would run counts
	}

	var best string
	var bestVersion []int
	for _, glob := range s.globs {
		matches, err := filepath.Glob(glob)
		if err != nil {
			return "", fmt.Errorf("searching %s: %w", glob, err)
		}
		for _, dir := range matches {
			if !hasServerPrograms(dir) {
				continue
			}
			if v := versionInPath(dir); best == "" || slices.Compare(v, bestVersion) > 0 {
				best, bestVersion = dir, v
			}
		}
	}
	if best != "" {
		return best, nil
	}

	return "", fmt.Errorf("%w: looked on $PATH, in `pg_config --bindir` and in %s. "+
		"Install the PostgreSQL server: on Debian/Ubuntu `apt-get install postgresql` "+
		"(the programs land in /usr/lib/postgresql/<version>/bin, which is found without $PATH), "+
		"on Fedora/RHEL `dnf install postgresql-server`, on Alpine `apk add postgresql`, "+
		"on macOS `brew install postgresql@16`; or put the directory that holds initdb on $PATH",
		ErrNoBinaries, strings.Join(s.globs, ", "))
}

// serverBinDirVia returns the directory of the real initdb behind path (which
// may be a symlink, as in /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb)
// when that directory also holds the other server programs.
func serverBinDirVia(initdb string) (string, bool) {
	if !isExecutable(initdb) {
		return "", false
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		if dir, err := filepath.Abs(filepath.Dir(real)); err == nil && hasServerPrograms(dir) {
			return dir, true
		}
	}
	if dir, err := filepath.Abs(filepath.Dir(initdb)); err == nil && hasServerPrograms(dir) {
		return dir, true
	}
	return "", false
}

func runPGConfigBinDir(pgConfig string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("running %s --bindir: %w", pgConfig, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func hasServerPrograms(dir string) bool {
	if dir == "" {
		return false
	}
	for _, name := range serverPrograms {
		if !isExecutable(filepath.Join(dir, name)) {
			return false
		}
	}
	return true
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

var versionPattern = regexp.MustCompile(`\d+(?:\.\d+)*`)

// versionInPath reads the version a package location is named after
// ("/usr/pgsql-9.6/bin" is 9.6, "/usr/lib/postgresql/16/bin" is 16).
func versionInPath(dir string) []int {
	matches := versionPattern.FindAllString(dir, -1)
	if len(matches) == 0 {
		return nil
	}
	var v []int
	for _, part := range strings.Split(matches[len(matches)-1], ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}
