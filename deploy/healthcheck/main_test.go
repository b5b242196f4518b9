package main

import "testing"

func TestTargetURL_PathIsAskedOfTheListenAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target, addr, want string
	}{
		{"/healthz", "", "http://127.0.0.1:8080/healthz"},
		{"/readyz", "0.0.0.0:8080", "http://127.0.0.1:8080/readyz"},
		{"/readyz", ":9090", "http://127.0.0.1:9090/readyz"},
		{"/healthz", "[::]:8080", "http://127.0.0.1:8080/healthz"},
		{"/healthz", "10.1.2.3:8081", "http://10.1.2.3:8081/healthz"},
		{"http://api:8080/readyz", "0.0.0.0:1", "http://api:8080/readyz"},
	} {
		got, err := targetURL(tc.target, tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("targetURL(%q, %q) = %q, %v; want %q", tc.target, tc.addr, got, err, tc.want)
		}
	}
}

func TestTargetURL_RefusesWhatIsNeitherPathNorURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ target, addr string }{
		{"healthz", ""},
		{"/healthz", "8080"},
	} {
		if got, err := targetURL(tc.target, tc.addr); err == nil {
			t.Errorf("targetURL(%q, %q) = %q, want an error", tc.target, tc.addr, got)
		}
	}
}

func TestAPIAddr_TheNewVariableWinsAndTheOldOneStillWorks(t *testing.T) {
	t.Setenv("LEDGERQ_API_ADDR", "")
	t.Setenv("LEDGERQ_HTTP_ADDR", "127.0.0.1:9001")
	if got := apiAddr(); got != "127.0.0.1:9001" {
		t.Errorf("with LEDGERQ_HTTP_ADDR only: %q", got)
	}
	t.Setenv("LEDGERQ_API_ADDR", "127.0.0.1:9002")
	if got := apiAddr(); got != "127.0.0.1:9002" {
		t.Errorf("with both: %q", got)
	}
}
