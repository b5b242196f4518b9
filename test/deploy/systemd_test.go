package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const systemdDir = repoRoot + "/deploy/systemd"

// unit is a parsed unit file: section → key → values, in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok && section != "", "%s:%d: %q", path, n, line)
			u[section][k] = append(u[section][k], v)
		}
	}
	require.NoError(t, sc.Err())
	return u
}

// parseEnvFile reads an EnvironmentFile: KEY=VALUE lines and comments.
func parseEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", path, line)
		env[k] = v
	}
	return env
}

// hardening is what every ledgerq service unit sets, as the unit spells it.
var hardening = map[string]string{
	"DynamicUser":             "yes",
	"NoNewPrivileges":         "yes",
	"ProtectSystem":           "strict",
	"ProtectHome":             "yes",
	"PrivateTmp":              "yes",
	"PrivateDevices":          "yes",
	"ProtectKernelTunables":   "yes",
	"ProtectKernelModules":    "yes",
	"ProtectKernelLogs":       "yes",
	"ProtectControlGroups":    "yes",
	"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
	"SystemCallFilter":        "@system-service",
	"CapabilityBoundingSet":   "",
	"MemoryDenyWriteExecute":  "yes",
	"LockPersonality":         "yes",
	"ReadOnlyPaths":           "/etc/ledgerq",
}

func TestSystemd_ServicesAreHardenedAndRunLedgerq(t *testing.T) {
	t.Parallel()
	env := parseEnvFile(t, filepath.Join(systemdDir, "ledgerq.env"))
	shutdown, err := time.ParseDuration(env["LEDGERQ_SHUTDOWN_TIMEOUT"])
	require.NoError(t, err, "LEDGERQ_SHUTDOWN_TIMEOUT in ledgerq.env")
	var uses []envUse
	for _, tc := range []struct {
		file string
		args []string
	}{
		{"ledgerq.service", []string{"serve"}},
		{"ledgerq-once.service", []string{"once"}},
	} {
		u := parseUnit(t, filepath.Join(systemdDir, tc.file))
		s := u["Service"]
		require.NotNil(t, s, tc.file)
		for k, v := range hardening {
			require.Contains(t, s[k], v, "%s: %s=%s", tc.file, k, v)
		}
		require.Equal(t, []string{"/etc/ledgerq/ledgerq.env"}, s["EnvironmentFile"], tc.file)
		exec := strings.Fields(s["ExecStart"][0])
		require.Equal(t, "/usr/local/bin/ledgerq", exec[0], tc.file)
		require.Equal(t, tc.args, exec[1:], tc.file)
		checkCommand(t, tc.file, exec[1:], env)
		uses = append(uses, envUse{exec[1], env})
		stop, err := time.ParseDuration(s["TimeoutStopSec"][0])
		require.NoError(t, err, tc.file)
		require.Greater(t, stop, shutdown, "%s: TimeoutStopSec must exceed LEDGERQ_SHUTDOWN_TIMEOUT, or SIGKILL cuts the drain", tc.file)
	}
	checkEnvRead(t, "ledgerq.env", uses)
	serve := parseUnit(t, filepath.Join(systemdDir, "ledgerq.service"))["Service"]
	require.Equal(t, []string{"on-failure"}, serve["Restart"])
	once := parseUnit(t, filepath.Join(systemdDir, "ledgerq-once.service"))["Service"]
	require.Equal(t, []string{"oneshot"}, once["Type"])
	timer := parseUnit(t, filepath.Join(systemdDir, "ledgerq-once.timer"))
	require.NotEmpty(t, timer["Timer"]["OnCalendar"])
}

func TestSystemd_WalletDropInSettingsAreLedgerqs(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, filepath.Join(systemdDir, "wallets.conf"))
	env := map[string]string{}
	for _, e := range u["Service"]["Environment"] {
		name, value, _ := strings.Cut(e, "=")
		env[name] = value
	}
	checkEnvRead(t, "wallets.conf", []envUse{{"serve", env}, {"once", env}})
	require.NotEmpty(t, u["Service"]["LoadCredential"])
}

// TestSystemd_UnitsVerify runs systemd-analyze on the units as installed in
// /etc/systemd/system of a scratch root (with the host's own units, which
// they depend on, and a stand-in /usr/local/bin/ledgerq): verify must print
// nothing (it reports bad settings but exits 0 for many of them), and
// security must rate the services' exposure at most 2.0 of 10.
func TestSystemd_UnitsVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is not installed (apt-get install systemd)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	root := t.TempDir()
	etc := filepath.Join(root, "etc/systemd/system")
	for _, dir := range []string{etc + "/ledgerq.service.d", etc + "/ledgerq-once.service.d", root + "/usr/local/bin", root + "/usr/lib/systemd"} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	for _, f := range []string{"ledgerq.service", "ledgerq-once.service", "ledgerq-once.timer"} {
		copyFile(t, filepath.Join(systemdDir, f), filepath.Join(etc, f))
	}
	copyFile(t, filepath.Join(systemdDir, "wallets.conf"), etc+"/ledgerq.service.d/wallets.conf")
	copyFile(t, filepath.Join(systemdDir, "wallets.conf"), etc+"/ledgerq-once.service.d/wallets.conf")
	require.NoError(t, os.WriteFile(root+"/usr/local/bin/ledgerq", []byte("#!/bin/sh\n"), 0o755))
	out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", root+"/usr/lib/systemd/").CombinedOutput()
	require.NoError(t, err, "%s", out)

	units := []string{"ledgerq.service", "ledgerq-once.service", "ledgerq-once.timer"}
	out, err = exec.Command(analyze, append([]string{"verify", "--root=" + root}, units...)...).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify")
	t.Logf("systemd-analyze verify %s: ok", strings.Join(units, " "))

	out, err = exec.Command(analyze, "security", "--offline=true", "--root="+root, "--threshold=20", "--no-pager",
		"ledgerq.service", "ledgerq-once.service").CombinedOutput()
	var overall []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "Overall exposure level") {
			overall = append(overall, strings.TrimSpace(line))
		}
	}
	require.NoError(t, err, "systemd-analyze security:\n%s", out)
	require.Len(t, overall, 2, "systemd-analyze security:\n%s", out)
	t.Logf("systemd-analyze security:\n  %s", strings.Join(overall, "\n  "))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o644))
}
