package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseWait_ReadsWaitAsSawtoothDoes(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		in   *string
		want time.Duration
	}{
		{nil, 0},
		{str("false"), 0},
		{str("False"), 0},
		{str("0"), 0},
		{str("-3"), 0},
		{str("7"), 7 * time.Second},
		{str(""), 285 * time.Second},     // ?wait&id=…
		{str("true"), 285 * time.Second}, // not a number
		{str("86400"), 285 * time.Second},
	} {
		name := "<absent>"
		if tc.in != nil {
			name = *tc.in
		}
		require.Equal(t, tc.want, parseWait(tc.in), "wait=%s", name)
	}
}

func TestSawtoothLink_UsesTheAddressTheClientUsed(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "http://10.0.0.7:8080/batches?service_id=orders&wait", nil)
	require.Equal(t, "http://10.0.0.7:8080/batch_statuses?id=a,b&service_id=orders&wait",
		sawtoothLink(r, "/batch_statuses", "id", "a,b"))

	r.Header.Set("X-Forwarded-Proto", "https")
	r.Header.Set("X-Forwarded-Host", "ledger.example")
	r.Header.Set("X-Forwarded-Path", "/q")
	require.Equal(t, "https://ledger.example/q/batch_statuses?id=a&service_id=orders&wait",
		sawtoothLink(r, "/batch_statuses", "id", "a"))

	r.Header.Set("Forwarded", `for=192.0.2.60;proto=http;host="api.example:81"`)
	require.Equal(t, "http://api.example:81/q/batches?service_id=orders&wait", sawtoothLink(r, "", "", ""))
}
