package ratelimit

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRate_ReadsCountUnitAndBurst(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]Rate{
		"50/s:100": {Count: 50, Period: time.Second, Burst: 100},
		"600/m:20": {Count: 600, Period: time.Minute, Burst: 20},
		"1/h:1":    {Count: 1, Period: time.Hour, Burst: 1},
		" 5/s:5 ":  {Count: 5, Period: time.Second, Burst: 5},
		"0":        {},
	} {
		got, err := ParseRate(text)
		require.NoError(t, err, text)
		require.Equal(t, want, got, text)
	}
}

func TestParseRate_BadTextIsAnErrorThatQuotesItAndShowsTheForm(t *testing.T) {
	t.Parallel()
	for text, why := range map[string]string{
		"":             "no /UNIT",
		"50":           "no /UNIT",
		"50/s":         "no :BURST",
		"50/d:1":       `unit "d" is not s, m or h`,
		"50/sec:1":     `unit "sec" is not s, m or h`,
		"0/s:1":        `count "0" is not a whole number`,
		"-1/s:1":       `count "-1" is not a whole number`,
		"1.5/s:1":      `count "1.5" is not a whole number`,
		"50/s:0":       `burst "0" is not a whole number`,
		"50/s:1:2":     `burst "1:2" is not a whole number`,
		"50/s:x":       `burst "x" is not a whole number`,
		"50/s:2000000": `burst "2000000" is not a whole number from 1 to 1000000`,
		"00":           "no /UNIT",
		"unlimited":    "no /UNIT",
	} {
		_, err := ParseRate(text)
		require.Error(t, err, text)
		require.ErrorContains(t, err, why, text)
		require.ErrorContains(t, err, "want COUNT/UNIT:BURST such as 50/s:100", text)
	}
}

func TestRate_StringIsWhatParseRateReads(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"50/s:100", "600/m:20", "1/h:1", "0"} {
		r, err := ParseRate(text)
		require.NoError(t, err)
		require.Equal(t, text, r.String())
	}
}

func TestRate_IsAFlagValue(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	r := Rate{Count: 10, Period: time.Second, Burst: 10}
	fs.Var(&r, "rate", "requests per API key")
	require.NoError(t, fs.Parse([]string{"-rate", "50/s:100"}))
	require.Equal(t, Rate{Count: 50, Period: time.Second, Burst: 100}, r)
	require.ErrorContains(t, fs.Parse([]string{"-rate", "50/s"}), `invalid value "50/s" for flag -rate: rate "50/s": no :BURST`)
}
