package metrics_test

import (
	"testing"

	"github.com/ledgerq/ledgerq/internal/metrics"
)

func TestMethodLabel_StandardMethodsAsTheyAreEveryOtherNameIsOther(t *testing.T) {
	t.Parallel()
	for method, want := range map[string]string{
		"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE",
		"OPTIONS": "OPTIONS", "CONNECT": "CONNECT", "TRACE": "TRACE",
		"get": "other", "Z1": "other", "PROPFIND": "other", "": "other", "GET ": "other",
	} {
		if got := metrics.MethodLabel(method); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", method, got, want)
		}
	}
}
