package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is how often one key may be served: Count requests per Period on
// average, and up to Burst at once after a quiet spell. The zero Rate (a
// Count of 0) is unlimited.
type Rate struct {
	Count  int
	Period time.Duration
	Burst  int
}

// Parse bounds: they keep a bucket's arithmetic far from int64 overflow and
// are far beyond any useful limit of one API key.
const (
	maxCount = 1_000_000_000
	maxBurst = 1_000_000
)

var rateUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate parses a rate written COUNT/UNIT:BURST, such as "50/s:100" (50
// requests a second, 100 at once) or "600/m:20"; UNIT is s, m or h. "0" is
// the unlimited rate.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return Rate{}, nil
	}
	r, err := parseRate(s)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: %w; want COUNT/UNIT:BURST such as 50/s:100 (UNIT s, m or h), or 0 for unlimited", s, err)
	}
	return r, nil
}

func parseRate(s string) (Rate, error) {
	countText, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, errors.New("no /UNIT")
	}
	unit, burstText, ok := strings.Cut(rest, ":")
	if !ok {
		return Rate{}, errors.New("no :BURST")
	}
	count, err := parseBounded("count", countText, maxCount)
	if err != nil {
		return Rate{}, err
	}
	period, ok := rateUnits[unit]
	if !ok {
		return Rate{}, fmt.Errorf("unit %q is not s, m or h", unit)
	}
	burst, err := parseBounded("burst", burstText, maxBurst)
	if err != nil {
		return Rate{}, err
	}
	return Rate{Count: count, Period: period, Burst: burst}, nil
}

func parseBounded(name, s string, limit int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > limit {
		return 0, fmt.Errorf("%s %q is not a whole number from 1 to %d", name, s, limit)
	}
	return n, nil
}

// Unlimited reports whether r limits nothing.
func (r Rate) Unlimited() bool { return r.Count <= 0 }

// String writes r as ParseRate reads it.
func (r Rate) String() string {
	if r.Unlimited() {
		return "0"
	}
	unit := r.Period.String()
	for u, d := range rateUnits {
		if d == r.Period {
			unit = u
		}
	}
	return fmt.Sprintf("%d/%s:%d", r.Count, unit, r.Burst)
}

// Set parses s into r, so that a Rate is a flag.Value.
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// gcra returns r's emission interval (the time one request's token takes to
// come back) and its burst tolerance (how far ahead of now a bucket's
// theoretical arrival time may run), both in nanoseconds. A Rate built in
// code with a Burst below 1 behaves as a Burst of 1, and a Period below one
// nanosecond per request as one nanosecond.
func (r Rate) gcra() (interval, tolerance int64) {
	interval = max(int64(r.Period)/int64(r.Count), 1)
	burst := int64(max(r.Burst, 1))
	if burst-1 > math.MaxInt64/4/interval {
		// A burst no one can spend: saturate rather than overflow, with
		// room left to add an interval and a clock reading.
		return interval, math.MaxInt64 / 4
	}
	return interval, (burst - 1) * interval
}
