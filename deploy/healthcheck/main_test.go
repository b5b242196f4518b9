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
