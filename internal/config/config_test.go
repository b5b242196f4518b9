package config_test

import (
	"flag"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/config"
)

type inner struct {
	Seed int64 `flag:"seed" help:"a seed"`
	Off  bool  `flag:"verify" value:"negated" help:"verify"`
}

type lane struct {
	Window time.Duration `flag:"window" help:"a window"`
	URL    string        `flag:"url" secret:"url" help:"a URL"`
	Only   int           `flag:"only" only:"ledger" help:"only with the ledger part"`
	Addr   netip.Addr    `flag:"addr" help:"a TextUnmarshaler"`
	Tip    *big.Int      `flag:"tip" value:"wei" help:"wei"`
	Sim    inner         `group:"sim-"`
	Plain  int           // no tag: not a setting
}

func env(name string) []string {
	return []string{"TEST_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func setup(t *testing.T, parts map[string]bool) (*lane, *config.Registry) {
	t.Helper()
	l := &lane{Window: time.Second, Tip: big.NewInt(7), Sim: inner{Seed: 1}}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	reg := config.New(fs, env)
	reg.Struct(l, config.Options{Section: "lane", Prefix: "lane-", Parts: parts, Alias: func(key string) string { return key }})
	return l, reg
}

func file(t *testing.T, text string) func() string {
	p := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return func() string { return p }
}

func TestStruct_RegistersEachTaggedFieldOnceWithItsPrefixAndDefault(t *testing.T) {
	_, reg := setup(t, nil)
	var flags []string
	for _, s := range reg.Settings() {
		flags = append(flags, s.Flag+"="+s.Default)
	}
	require.Equal(t, []string{"lane-window=1s", "lane-url=", "lane-addr=", "lane-tip=7", "lane-sim-seed=1", "lane-sim-verify=true"}, flags)
	_, reg = setup(t, map[string]bool{"ledger": true})
	require.NotNil(t, reg.Lookup("lane-only"))
}

func TestParse_FlagsAliasesEnvironmentAndFile(t *testing.T) {
	l, reg := setup(t, nil)
	t.Setenv("TEST_LANE_SIM_SEED", "5")
	require.NoError(t, reg.Parse([]string{"--window=3s", "--lane-sim-verify=false", "--lane-addr=127.0.0.1"},
		file(t, "lane:\n  window: 9s\n  tip: 11\n  sim-seed: 9\n")))
	require.Equal(t, 3*time.Second, l.Window, "an alias on the command line over the file")
	require.True(t, l.Sim.Off)
	require.Equal(t, int64(5), l.Sim.Seed, "the environment over the file")
	require.Equal(t, big.NewInt(11), l.Tip, "the file over the default")
	require.Equal(t, netip.MustParseAddr("127.0.0.1"), l.Addr)
	require.Equal(t, []string{"flag --window is deprecated: use --lane-window"}, reg.Deprecations())
}

func TestParse_AnUnknownKeyIsAnErrorWithItsLine(t *testing.T) {
	_, reg := setup(t, nil)
	err := reg.Parse(nil, file(t, "lane:\n  window: 1s\n  windw: 2s\n"))
	require.ErrorContains(t, err, "c.yaml:3: unknown setting lane.windw")
}

func TestWriteYAML_RedactsSecrets(t *testing.T) {
	_, reg := setup(t, nil)
	require.NoError(t, reg.Parse([]string{"--lane-url=postgres://u:pw@h/db"}, func() string { return "" }))
	var b strings.Builder
	require.NoError(t, reg.WriteYAML(&b))
	require.Contains(t, b.String(), "lane:\n  window: 1s\n  url: postgres://u:xxxxx@h/db\n")
	require.NotContains(t, b.String(), "pw@")
}

// A declaration with a tag key the registrar does not read is a programming
// error found at registration, not a setting registered where it should
// not be.
func TestStruct_AnUnknownTagKeyPanicsNamingTheField(t *testing.T) {
	var c struct {
		Kind string `flag:"ledger" cmd:"ledger" help:"a ledger"`
	}
	reg := config.New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) []string { return nil })
	require.PanicsWithValue(t, `config: struct { Kind string "flag:\"ledger\" cmd:\"ledger\" help:\"a ledger\"" }.Kind: unknown tag key "cmd" (want one of flag, help, group, value, secret, only, default, json, yaml)`, func() {
		reg.Struct(&c, config.Options{})
	})
	var ok struct {
		Kind string `flag:"ledger" only:"ledger" help:"a \"quoted\" ledger" json:"kind"`
	}
	require.NotPanics(t, func() { reg.Struct(&ok, config.Options{Parts: map[string]bool{"ledger": true}}) })
}

// pairs is a repeatable key=value setting (config.KeyValues).
type pairs []string

func (p *pairs) String() string     { return strings.Join(*p, ";") }
func (p *pairs) Set(v string) error { *p = append(*p, v); return nil }
func (*pairs) KeyValues()           {}

// A KeyValues setting takes a list of mappings in the file, each written as
// the key=value text its flag takes, a list standing for a key repeated.
func TestParse_AKeyValuesSettingTakesMappingsInTheFile(t *testing.T) {
	var c struct {
		Chains pairs `flag:"chain" help:"chains"`
	}
	reg := config.New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) []string { return nil })
	reg.Struct(&c, config.Options{Section: "wallet", Prefix: "wallet-"})
	require.NoError(t, reg.Parse(nil, file(t, "wallet:\n  chain:\n    - name: base\n      chain-id: 8453\n      node: [https://a, https://b]\n    - name=dev,chain-id=1337,node=http://x\n")))
	require.Equal(t, pairs{"name=base,chain-id=8453,node=https://a,node=https://b", "name=dev,chain-id=1337,node=http://x"}, c.Chains)
	err := reg.Parse(nil, file(t, "wallet:\n  chain:\n    - name: base\n      node: {a: 1}\n"))
	require.ErrorContains(t, err, "c.yaml:3: wallet.chain: node: want a value or a list of values")
}
