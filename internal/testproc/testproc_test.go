package testproc

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The port FreeAddr found free can be taken before the process listens on
// it (CI: `bind: address already in use` on a restarted serve, another
// socket having taken the port in the seconds the process spent decrypting
// its wallets' keys). StartReady starts the process again on another port.
func TestStartReady_APortTakenBeforeTheProcessListensIsPickedAgain(t *testing.T) {
	db := testdb.New(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	var calls atomic.Int32
	freeAddr = func(t testing.TB) string {
		if calls.Add(1) == 1 {
			return held.Addr().String() // free when picked, taken since
		}
		return FreeAddr(t)
	}
	t.Cleanup(func() { freeAddr = FreeAddr })

	p, api := StartReady(t, t.TempDir(), []string{"DATABASE_URL=" + db.URL}, "serve", "--log-level", "warn")
	require.Equal(t, int32(2), calls.Load(), "one start on the taken port, one on another")
	require.NotEqual(t, "http://"+held.Addr().String(), api)
	resp, err := http.Get(api + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, p.exited())
}
