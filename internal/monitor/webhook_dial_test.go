package monitor_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

// newLoopbackSetup is a hook setup whose wallet "alpha" has two endpoints
// on the loopback receiver, one by the name localhost and one by the
// literal 127.0.0.1, and one confirmed event to deliver to both.
func newLoopbackSetup(t *testing.T, allowPrivate bool) *hookSetup {
	t.Helper()
	s := newHookSetup(t)
	s.cfg.AllowPrivate = allowPrivate
	u, err := url.Parse(s.recv.srv.URL)
	require.NoError(t, err)
	s.endpointAt("alpha", "localhost:"+u.Port(), "/a")
	s.endpointAt("alpha", "127.0.0.1:"+u.Port(), "/b")
	s.emit(hookEvent("alpha", store.WebhookConfirmed, "task-1"))
	return s
}

// Registration refuses non-public targets, but a name may resolve elsewhere
// by the time a delivery connects (DNS rebinding), and rows may be written
// by hand: the deliverer checks the address it actually dials. Here
// "localhost" and the literal 127.0.0.1 stand for a name that now resolves
// to loopback.
func TestWebhookDeliverer_NonPublicAddressIsRefusedAtDialAndNothingReachesTheReceiver(t *testing.T) {
	t.Parallel()
	s := newLoopbackSetup(t, false)
	require.Equal(t, 2, s.runOnce(s.deliverer()))
	require.Empty(t, s.recv.receptions(), "nothing reaches a loopback receiver")
	var n int
	require.NoError(t, s.st.Conns().QueryRow(s.ctx, `SELECT count(*) FROM ledgerq.webhook_deliveries
		WHERE delivered_at IS NULL AND last_status IS NULL AND last_error LIKE '%non-public address (loopback)%'`).Scan(&n))
	require.Equal(t, 2, n, "each attempt failed at dial time, with the reason as its last error")
}

// The same deliveries go through when non-public addresses are allowed
// (tests' and ledgerq dev's loopback receivers).
func TestWebhookDeliverer_AllowPrivateDeliversToALoopbackReceiver(t *testing.T) {
	t.Parallel()
	s := newLoopbackSetup(t, true)
	require.Equal(t, 2, s.runOnce(s.deliverer()))
	require.Len(t, s.recv.receptions(), 2)
}

// A redirect is not followed: it could point anywhere, and the answer is a
// failed attempt.
func TestWebhookDeliverer_RedirectIsAFailedAttemptAndIsNotFollowed(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.endpoint("alpha", "/a")
	s.endpoint("alpha", "/b")
	s.recv.answer = func(path string, _ int) int {
		if path == "/a" {
			return http.StatusTemporaryRedirect
		}
		return http.StatusNoContent
	}
	s.emit(hookEvent("alpha", store.WebhookConfirmed, "task-1"))
	require.Equal(t, 2, s.runOnce(s.deliverer()))
	var a string
	for _, r := range s.recv.receptions() {
		if r.endpoint == "/a" {
			a = r.id
		}
	}
	dv := s.delivery(a)
	require.Nil(t, dv.DeliveredAt)
	require.Equal(t, http.StatusTemporaryRedirect, dv.LastStatus)
}
