package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// The charts are SVG written here, on the server: a line per series over
// the minutes of a window, with a labelled axis, and the same numbers in a
// table for screen readers and for copying.

// series is one line of a chart: a value per minute of the window.
type series struct {
	Name string
	// Class picks the line's colour (console.css: .s0 … .s5).
	Class  string
	Values []float64
	// Has says which minutes have a value (nil: all): a minute in which
	// nothing ended has no latency, which is not a latency of zero, so the
	// line breaks there.
	Has []bool
}

func (s series) has(i int) bool { return s.Has == nil || s.Has[i] }

// chart is a chart's data, ready for the template.
type chart struct {
	ID, Title, Unit string
	Series          []series
	// Minutes are the window's minutes, oldest first.
	Minutes []time.Time
}

const (
	chartW, chartH         = 420, 190
	chartLeft, chartBottom = 40, 22
	chartTop, chartRight   = 8, 18
)

// SVG renders the chart.
func (ch chart) SVG() template.HTML {
	maxV := 0.0
	for _, s := range ch.Series {
		for _, v := range s.Values {
			maxV = math.Max(maxV, v)
		}
	}
	top := niceCeil(maxV)
	plotW := float64(chartW - chartLeft - chartRight)
	plotH := float64(chartH - chartTop - chartBottom)
	n := len(ch.Minutes)
	x := func(i int) float64 {
		if n <= 1 {
			return float64(chartLeft)
		}
		return float64(chartLeft) + plotW*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return float64(chartTop) + plotH*(1-v/top) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title">`, chartW, chartH, ch.ID)
	fmt.Fprintf(&b, `<title id="%s-title">%s</title>`, ch.ID, template.HTMLEscapeString(ch.Title+" ("+ch.Unit+"), per minute, last hour"))
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, chartLeft, chartW-chartRight, y(v), y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, chartLeft-6, y(v)+4, formatNumber(v))
	}
	for i, m := range ch.Minutes {
		if i%15 == 0 || i == n-1 {
			fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(i), chartH-6, m.Format("15:04"))
		}
	}
	for _, s := range ch.Series {
		// One polyline per run of minutes with a value; a lone minute is a
		// dot.
		var run []int
		flush := func() {
			switch len(run) {
			case 0:
			case 1:
				fmt.Fprintf(&b, `<circle class="dot %s" cx="%.1f" cy="%.1f" r="2.5"/>`, s.Class, x(run[0]), y(s.Values[run[0]]))
			default:
				var pts strings.Builder
				for _, i := range run {
					fmt.Fprintf(&pts, "%.1f,%.1f ", x(i), y(s.Values[i]))
				}
				fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, s.Class, strings.TrimSpace(pts.String()))
			}
			run = run[:0]
		}
		for i := range s.Values {
			if !s.has(i) {
				flush()
				continue
			}
			run = append(run, i)
		}
		flush()
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// Empty reports whether nothing ended in the window.
func (ch chart) Empty() bool {
	for _, s := range ch.Series {
		for i, v := range s.Values {
			if s.Has != nil && s.Has[i] || s.Has == nil && v != 0 {
				return false
			}
		}
	}
	return true
}

// Rows are the chart's numbers by minute, for its table (minutes with a
// value only).
func (ch chart) Rows() []chartRow {
	var out []chartRow
	for i, m := range ch.Minutes {
		row := chartRow{Minute: m}
		any := false
		for _, s := range ch.Series {
			if !s.has(i) {
				row.Values = append(row.Values, "—")
				continue
			}
			row.Values = append(row.Values, formatNumber(s.Values[i]))
			any = true
		}
		if any {
			out = append(out, row)
		}
	}
	return out
}

type chartRow struct {
	Minute time.Time
	Values []string
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// formatNumber writes v with up to 2 decimals and no trailing zeros.
func formatNumber(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}
