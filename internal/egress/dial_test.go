package egress

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDialControl_RefusesNonPublicAddressesUnlessAllowed(t *testing.T) {
	t.Parallel()
	refuse := dialControl(false)
	for _, c := range []struct{ network, address string }{
		{"tcp4", "127.0.0.1:80"}, {"tcp4", "169.254.169.254:80"}, {"tcp4", "10.0.0.1:443"},
		{"tcp6", "[::1]:80"}, {"tcp6", "[fe80::1%eth0]:80"}, {"tcp6", "[::ffff:127.0.0.1]:80"},
	} {
		err := refuse(c.network, c.address, nil)
		require.Error(t, err, c.address)
		require.Contains(t, err.Error(), "non-public address", c.address)
	}
	require.ErrorContains(t, refuse("tcp", "localhost:80", nil), "not an IP address")
	require.NoError(t, refuse("tcp4", "93.184.215.14:443", nil))
	require.NoError(t, refuse("tcp6", "[2606:4700:4700::1111]:443", nil))

	allow := dialControl(true)
	for _, address := range []string{"127.0.0.1:80", "[::1]:80", "10.0.0.1:443", "93.184.215.14:443"} {
		require.NoError(t, allow("tcp", address, nil), address)
	}
}

// NewClient takes no proxy from the environment (HTTP_PROXY would make the
// proxy connect to the URL, past the dial-time check) and follows no
// redirect.
func TestNewClient_UsesNoProxyAndFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	c := NewClient(false)
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok, "the client has its own transport, not http.DefaultTransport (which takes a proxy from the environment): %T", c.Transport)
	require.Nil(t, tr.Proxy)
	require.NotNil(t, tr.DialContext)
	require.True(t, errors.Is(c.CheckRedirect(nil, nil), http.ErrUseLastResponse))
}
