package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math/big"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	out := make(map[string]*template.Template, len(names))
	for _, n := range names {
		name := path.Base(n)
		if name == "layout.html" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

var funcs = template.FuncMap{
	"time":    formatTime,
	"timep":   formatTimePtr,
	"ago":     ago,
	"agop":    agoPtr,
	"wei":     weiString,
	"big":     bigString,
	"gwei":    gweiString,
	"int64p":  intPtr[int64],
	"intp":    intPtr[int],
	"uint64p": intPtr[uint64],
	"strp": func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	},
	"confirmations": confirmations,
	"detail":        detailString,
	"lower":         strings.ToLower,
	"domid":         func(s string) string { return strings.ReplaceAll(s, ".", "-") },
	"query":         queryEscape,
	"path":          pathEscape,
	"short":         shortID,
	"plus":          func(a, b int) int { return a + b },
	"target":        targetLink,
	"stateClass":    stateClass,
	"percent":       percent,
	"millis":        millis,
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// ago writes how long before now t was, in the largest two units.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + roughDuration(-d)
	case d < time.Second:
		return "just now"
	}
	return roughDuration(d) + " ago"
}

func agoPtr(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return ago(*t, now)
}

func roughDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

func bigString(v *big.Int) string {
	if v == nil {
		return "0"
	}
	return v.String()
}

// weiString writes an amount in wei, with its value in ether beside it.
func weiString(v *big.Int) string {
	if v == nil {
		return "—"
	}
	eth := new(big.Float).Quo(new(big.Float).SetInt(v), big.NewFloat(1e18))
	return fmt.Sprintf("%s wei (%s ETH)", v.String(), eth.Text('f', 6))
}

// gweiString writes a fee per gas in gwei.
func gweiString(v *big.Int) string {
	if v == nil {
		return "—"
	}
	if v.Cmp(big.NewInt(1_000_000)) < 0 {
		return v.String() + " wei"
	}
	g := new(big.Float).Quo(new(big.Float).SetInt(v), big.NewFloat(1e9))
	return strings.TrimRight(strings.TrimRight(g.Text('f', 4), "0"), ".") + " gwei"
}

func intPtr[T int | int64 | uint64](v *T) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprint(*v)
}

// confirmations is how many blocks a mined attempt has (its own counted),
// as of the head confirm last read; "" when not mined or unknown.
func confirmations(head, mined *int64) string {
	if head == nil || mined == nil || *head < *mined {
		return ""
	}
	return strconv.FormatInt(*head-*mined+1, 10)
}

// detailString writes an audit row's detail as key=value pairs.
func detailString(raw json.RawMessage) string {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
		return string(raw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// targetLink is the console page of an audit row's target ("" for one
// without a page): wallet/NAME and wallet/NAME/task/ID.
func targetLink(target string) string {
	parts := strings.Split(target, "/")
	switch {
	case len(parts) == 2 && parts[0] == "wallet":
		return Prefix + "/wallets/" + pathEscape(parts[1])
	case len(parts) == 4 && parts[0] == "wallet" && parts[2] == "task":
		return Prefix + "/wallets/" + pathEscape(parts[1]) + "/tasks/" + pathEscape(parts[3])
	}
	return ""
}
