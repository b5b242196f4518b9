package deploy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
)

const composeFile = repoRoot + "/deploy/compose.yaml"

// loadCompose loads deploy/compose.yaml as `docker compose config` does:
// interpolation, the Compose Specification's schema, then consistency
// (every service, network and volume named exists).
func loadCompose(t *testing.T, env ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithName("ledgerq-test"),
		cli.WithEnv(env),
	)
	require.NoError(t, err)
	return opts.LoadProject(context.Background())
}

func TestCompose_LoadsOnlyWithAPassword(t *testing.T) {
	t.Parallel()
	_, err := loadCompose(t)
	require.ErrorContains(t, err, "set POSTGRES_PASSWORD")
	p, err := loadCompose(t, "POSTGRES_PASSWORD=test")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"postgres", "migrate", "api", "monitor", "simledger"}, p.ServiceNames())
	require.Equal(t, "postgres:16", p.Services["postgres"].Image, "the default PostgreSQL image")
	p, err = loadCompose(t, "POSTGRES_PASSWORD=test", "LEDGERQ_POSTGRES_IMAGE=example/pg:15")
	require.NoError(t, err)
	require.Equal(t, "example/pg:15", p.Services["postgres"].Image, "the user's PostgreSQL image")
}

func TestCompose_LedgerqServicesRunHardened(t *testing.T) {
	t.Parallel()
	p, err := loadCompose(t, "POSTGRES_PASSWORD=test")
	require.NoError(t, err)
	for name, s := range p.Services {
		if name == "postgres" {
			continue
		}
		require.Equal(t, "ledgerq:local", s.Image, name)
		require.True(t, s.ReadOnly, "%s: read_only", name)
		require.Equal(t, []string{"ALL"}, s.CapDrop, "%s: cap_drop", name)
		require.Contains(t, s.SecurityOpt, "no-new-privileges:true", name)
		require.Empty(t, s.User, "%s: the image's user", name)
	}
}

func TestCompose_CommandsAndSettingsAreLedgerqs(t *testing.T) {
	t.Parallel()
	p, err := loadCompose(t, "POSTGRES_PASSWORD=test")
	require.NoError(t, err)
	var uses []envUse
	for name, s := range p.Services {
		if name == "postgres" {
			continue
		}
		env := map[string]string{}
		for k, v := range s.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		checkCommand(t, "compose service "+name, s.Command, env)
		uses = append(uses, envUse{s.Command[0], env})
	}
	checkEnvRead(t, "deploy/compose.yaml", uses)
}

func TestCompose_ServeServicesWaitForMigrateAndAreHealthchecked(t *testing.T) {
	t.Parallel()
	p, err := loadCompose(t, "POSTGRES_PASSWORD=test")
	require.NoError(t, err)

	pg := p.Services["postgres"]
	require.NotNil(t, pg.HealthCheck, "postgres: a healthcheck")
	require.True(t, slices.ContainsFunc(pg.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == "/var/lib/postgresql/data"
	}), "postgres: its data on a named volume")
	require.Equal(t, types.ServiceConditionHealthy, p.Services["migrate"].DependsOn["postgres"].Condition)
	require.Equal(t, []string{"migrate", "up"}, []string(p.Services["migrate"].Command))

	count := map[string]int{}
	for _, name := range []string{"api", "monitor"} {
		s := p.Services[name]
		require.Equal(t, "serve", s.Command[0], name)
		on, err := roles(s.Command)
		require.NoError(t, err, name)
		for role, ok := range on {
			if ok {
				count[role]++
			}
		}
		require.Equal(t, types.ServiceConditionCompletedSuccessfully, s.DependsOn["migrate"].Condition, name)
		require.Equal(t, "false", *s.Environment["LEDGERQ_DATABASE_MIGRATE"], "%s: migrate applies migrations", name)
		require.NotNil(t, s.HealthCheck, "%s: a healthcheck", name)
		require.Equal(t, types.HealthCheckTest{"CMD", "/healthcheck", "/readyz"}, s.HealthCheck.Test, name)
		require.NotNil(t, s.StopGracePeriod, name)
		require.Greater(t, time.Duration(*s.StopGracePeriod), 30*time.Second,
			"%s: stop_grace_period must exceed --shutdown-timeout (30s)", name)
		require.Equal(t, "unless-stopped", s.Restart, name)
	}
	require.Equal(t, map[string]int{"api": 2, "queuer": 1, "submitter": 1, "monitor": 1}, count,
		"every role in exactly one service; the API in both (the monitor's for its healthcheck)")
	require.Len(t, p.Services["api"].Ports, 1, "the api's port is published")
	require.Empty(t, p.Services["monitor"].Ports, "the monitor's API is not published")
}
