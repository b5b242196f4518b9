package monitor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The webhook retention and the access retention (console sessions, audit
// rows): what ended, or was written, longer than the age ago is deleted; a
// delivery still due or being retried, a session that can still open the
// console and an audit row younger than the age are kept.

// delivery stores a delivery to endpoint, created ago before the clock's
// now; state is delivered or gave-up (ended ago before now too), due (never
// tried) or retrying (failed once, due again). It returns its id.
func (r *retentionSetup) delivery(endpoint, state string, ago time.Duration) string {
	r.t.Helper()
	at := r.clock.Now().Add(-ago)
	var id string
	require.NoError(r.t, r.st.DB().QueryRow(r.t.Context(), `
		INSERT INTO ledgerq.webhook_deliveries (endpoint_id, event_type, task_id, payload, created_at, next_attempt_at,
			attempts, last_attempt_at, delivered_at, gave_up_at, last_status, last_error)
		SELECT $1, 'confirmed', 't', '{}', $2::timestamptz, $2::timestamptz + CASE WHEN $3::text = 'retrying' THEN interval '1 hour' ELSE interval '0' END,
			a, CASE WHEN a > 0 THEN $2::timestamptz END,
			CASE WHEN $3::text = 'delivered' THEN $2::timestamptz END, CASE WHEN $3::text = 'gave-up' THEN $2::timestamptz END,
			CASE WHEN $3::text = 'delivered' THEN 200 WHEN a > 0 THEN 500 END, CASE WHEN $3::text IN ('gave-up', 'retrying') THEN 'HTTP 500' END
		FROM (SELECT CASE WHEN $3::text = 'due' THEN 0 ELSE 1 END AS a) s
		RETURNING id`, endpoint, at, state).Scan(&id))
	return id
}

func TestWebhookRetention_EndedDeliveriesOlderThanTheAgeAreDeletedDueRetryingAndYoungerOnesKept(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	ep := r.rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{}).ID
	oldDelivered := r.delivery(ep, "delivered", 48*time.Hour)
	oldGaveUp := r.delivery(ep, "gave-up", 48*time.Hour)
	young := r.delivery(ep, "delivered", 23*time.Hour)
	youngGaveUp := r.delivery(ep, "gave-up", 23*time.Hour)
	due := r.delivery(ep, "due", 48*time.Hour)
	retrying := r.delivery(ep, "retrying", 48*time.Hour)

	ret := monitor.NewWebhookRetention(r.st, r.deps, r.cfg)
	require.Equal(t, 2, r.rows.Run("webhook retention", ret.RunOnce))
	kept := func(id string) bool { return r.count("webhook_deliveries", "id = $1", id) == 1 }
	require.False(t, kept(oldDelivered), "a delivery delivered longer than the age ago is deleted")
	require.False(t, kept(oldGaveUp), "a delivery given up longer than the age ago is deleted")
	for name, id := range map[string]string{"delivered 23 h ago": young, "given up 23 h ago": youngGaveUp, "due": due, "being retried": retrying} {
		require.True(t, kept(id), "a delivery %s is kept", name)
	}
	require.Zero(t, r.rows.Run("webhook retention", ret.RunOnce))
}

func TestWebhookRetention_DeletesAtMostBatchSizePerRound(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.cfg.BatchSize = 2
	ep := r.rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{}).ID
	for range 3 {
		r.delivery(ep, "delivered", 48*time.Hour)
	}
	ret := monitor.NewWebhookRetention(r.st, r.deps, r.cfg)
	require.Equal(t, 2, r.rows.Run("webhook retention", ret.RunOnce))
	require.Equal(t, 1, r.rows.Run("webhook retention", ret.RunOnce))
}

// access is the access retention on r's store with an audit age and r.cfg's
// batch size.
func (r *retentionSetup) access(auditAge time.Duration) *monitor.Retention {
	r.t.Helper()
	ret, err := monitor.NewAccessRetention(r.st, r.deps, monitor.AccessRetentionConfig{
		AuditAge: auditAge, BatchSize: r.cfg.BatchSize, Interval: r.cfg.Interval,
	})
	require.NoError(r.t, err)
	return ret
}

// audit records an operator's action ago before the clock's now.
func (r *retentionSetup) audit(ago time.Duration) {
	r.t.Helper()
	r.exec(`INSERT INTO ledgerq.audit_log (at, key_name, action, target, detail) VALUES ($1, 'ops', 'wallet.hold', 'w', '{}')`,
		r.clock.Now().Add(-ago))
}

func TestAccessRetention_SessionsThatEndedAreDeletedOnesThatCanStillOpenTheConsoleKept(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	ctx, now := t.Context(), r.clock.Now()
	key, _, err := r.st.APIKeyCreate(ctx, store.APIKeyCreateParams{Now: now.Add(-48 * time.Hour), Name: "ops", Scopes: []store.Scope{"admin"}})
	require.NoError(t, err)
	login := func(at time.Time, ttl time.Duration) string {
		t.Helper()
		token, err := r.st.ConsoleSessionCreate(ctx, key.ID, at, ttl)
		require.NoError(t, err)
		return token
	}
	// Logins long ago (in this order, so that none forgets another): one
	// that expired, one logged out, and one that still lasts.
	lasting := login(now.Add(-47*time.Hour), 72*time.Hour)
	expired := login(now.Add(-47*time.Hour), time.Hour)
	loggedOut := login(now.Add(-46*time.Hour), 72*time.Hour)
	require.NoError(t, r.st.ConsoleSessionEnd(ctx, loggedOut, now.Add(-45*time.Hour)))
	require.Equal(t, 3, r.count("console_sessions", "true"))

	require.Equal(t, 2, r.rows.Run("access retention", r.access(0).RunOnce), "with the audit kept forever, sessions are still deleted")
	require.Equal(t, 1, r.count("console_sessions", "true"))
	_, err = r.st.ConsoleSessionKey(ctx, lasting, now)
	require.NoError(t, err, "the session that can still open the console is kept")
	_, err = r.st.ConsoleSessionKey(ctx, expired, now)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestAccessRetention_AuditRowsOlderThanTheAgeAreDeletedYoungerOnesKept(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.audit(100 * 24 * time.Hour)
	r.audit(95 * 24 * time.Hour)
	r.audit(10 * 24 * time.Hour)
	r.audit(time.Hour)
	require.Equal(t, 4, r.count("audit_log", "true"))

	require.Zero(t, r.rows.Run("access retention", r.access(0).RunOnce), "age 0 keeps the audit forever")
	require.Equal(t, 2, r.rows.Run("access retention", r.access(90*24*time.Hour).RunOnce))
	require.Zero(t, r.count("audit_log", "at < $1", r.clock.Now().Add(-90*24*time.Hour)), "the rows older than the age are gone")
	require.Equal(t, 2, r.count("audit_log", "true"), "the younger ones are kept")
}
