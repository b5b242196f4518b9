package deploy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// unreachableDB is a database URL that refuses connections at once: a
// command given it gets past its settings' validation and then fails to
// connect, with this message.
const (
	unreachableDB      = "postgres://ledgerq@127.0.0.1:1/ledgerq?sslmode=disable&connect_timeout=5"
	unreachableMessage = "cannot reach the database"
)

var ledgerqBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("LEDGERQ_BINARY"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "ledgerq-deploy-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ledgerq")
	// The image's build settings, so that its build cache serves this one.
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/ledgerq")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/ledgerq: %w\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("LEDGERQ_BINARY") == "" {
		if bin, err := ledgerqBinary(); err == nil {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

// ledgerq runs the binary with args and exactly the environment env, and
// returns its exit code and combined output.
func ledgerq(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	bin, err := ledgerqBinary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	}
	require.NoError(t, err, "running ledgerq %s", strings.Join(args, " "))
	return 0, out.String()
}

var envInUsage = regexp.MustCompile(`(?m)^  --[a-z0-9-]+\t.*\[([A-Z0-9_ a-z]+)\]$`)

// envNames are the environment variables the command reads, from its usage.
func envNames(t *testing.T, command string) []string {
	t.Helper()
	code, out := ledgerq(t, nil, command, "--help")
	require.Equal(t, 0, code, "ledgerq %s --help:\n%s", command, out)
	var names []string
	for _, m := range envInUsage.FindAllStringSubmatch(out, -1) {
		names = append(names, strings.Split(m[1], " or ")...)
	}
	require.NotEmpty(t, names, "no environment variables in ledgerq %s --help:\n%s", command, out)
	return names
}

// checkCommand checks a ledgerq command line as a deployment gives it, with
// the environment env: its flags parse, and its settings pass the command's
// validation (it fails only at dialling the database).
func checkCommand(t *testing.T, where string, args []string, env map[string]string) {
	t.Helper()
	require.NotEmpty(t, args, "%s: no command", where)
	require.Contains(t, []string{"serve", "once", "migrate", "simledger"}, args[0], "%s: command", where)
	line := "ledgerq " + strings.Join(args, " ")

	code, out := ledgerq(t, nil, append(slices.Clone(args), "--help")...)
	require.Equal(t, 0, code, "%s: %s does not parse:\n%s", where, line, out)
	if args[0] == "simledger" {
		return
	}
	run := maps.Clone(env)
	if run == nil {
		run = map[string]string{}
	}
	run["DATABASE_URL"] = unreachableDB
	code, out = ledgerq(t, run, args...)
	require.NotEqual(t, 0, code, "%s: %s ran against no database", where, line)
	require.Contains(t, out, unreachableMessage, "%s: %s refused its settings", where, line)
}

// envUse is a command and the environment a deployment gives it.
type envUse struct {
	command string
	env     map[string]string
}

// checkEnvRead checks that every DATABASE_URL and LEDGERQ_* variable of the
// uses is read by at least one command that gets it: a misspelt or retired
// variable is ignored by ledgerq, silently. (A shared environment, such as a
// ConfigMap or an EnvironmentFile, may hold variables only some of its
// commands read: LEDGERQ_API_ADDR means nothing to once.)
func checkEnvRead(t *testing.T, where string, uses []envUse) {
	t.Helper()
	read := map[string]bool{}
	given := map[string]bool{}
	for _, u := range uses {
		known := envNames(t, u.command)
		for name := range u.env {
			if name != "DATABASE_URL" && !strings.HasPrefix(name, "LEDGERQ_") {
				continue
			}
			given[name] = true
			if slices.Contains(known, name) {
				read[name] = true
			}
		}
	}
	require.NotEmpty(t, given, "%s: no ledgerq settings", where)
	for name := range given {
		require.True(t, read[name], "%s: no ledgerq command that gets %s reads it", where, name)
	}
}

// roles returns which roles a serve command line runs (the API's is
// --api-enabled). Every role flag defaults to true, so a command that names
// one of --queuer, --submitter and --monitor must name all three, or it
// runs roles it did not mean to.
func roles(args []string) (map[string]bool, error) {
	on := map[string]bool{"api": true, "queuer": true, "submitter": true, "monitor": true}
	named := 0
	for _, a := range args[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if name == "api-enabled" {
			name = "api"
		}
		if _, ok := on[name]; !ok || !strings.HasPrefix(a, "--") {
			continue
		}
		on[name] = value != "false"
		if name != "api" {
			named++
		}
	}
	if named != 0 && named != 3 {
		return nil, fmt.Errorf("%q names %d of --queuer, --submitter and --monitor: name all three (each defaults to true) or none", args, named)
	}
	return on, nil
}

func TestRoles_OneRoleFlagAloneIsRefused(t *testing.T) {
	t.Parallel()
	_, err := roles([]string{"serve", "--monitor", "--api-enabled=false"})
	require.Error(t, err, "serve --monitor --api-enabled=false runs the queuer and the submitter too")
	on, err := roles([]string{"serve", "--queuer", "--submitter=false", "--monitor=false"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"api": true, "queuer": true, "submitter": false, "monitor": false}, on)
	on, err = roles([]string{"serve", "--api-enabled=false"})
	require.NoError(t, err)
	require.False(t, on["api"])
	on, err = roles([]string{"serve"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"api": true, "queuer": true, "submitter": true, "monitor": true}, on)
}
