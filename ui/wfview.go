package ui

import (
	"fmt"
	"math"
	"time"
)

// wfView is what part of a waterfall is on screen: a span of time and a
// vertical scroll, and whether the span follows now. It is plain data:
// the widget changes it on the UI goroutine and hands a copy to the
// painter.
type wfView struct {
	// To is the right edge; while Follow is on, the painter moves it to
	// now at every frame.
	To     time.Time
	Span   time.Duration
	Follow bool
	// Scroll is how far the lanes are scrolled down, in pixels of the
	// image.
	Scroll int
	// Selected is the request shown in the details, if any.
	Selected wfKey
	// Hang is the age at which a request in flight turns red.
	Hang time.Duration
}

// The zoom range: from 5 ms across the view to a week.
const (
	minSpan = 5 * time.Millisecond
	maxSpan = 7 * 24 * time.Hour
)

// defaultSpan is what the live waterfall opens with.
const defaultSpan = 2 * time.Minute

// from is the left edge.
func (v wfView) from() time.Time { return v.To.Add(-v.Span) }

// at moves a following view's right edge to now.
func (v wfView) at(now time.Time) wfView {
	if v.Follow {
		v.To = now
	}
	return v
}

// zoom scales the span by factor (< 1 zooms in) around the moment at
// fraction frac of the width (0 the left edge, 1 the right), which stays
// where it is. A following view zoomed around its right edge keeps
// following; around any other point it stops.
func (v wfView) zoom(factor, frac float64) wfView {
	frac = math.Min(math.Max(frac, 0), 1)
	span := time.Duration(math.Min(math.Max(float64(v.Span)*factor, float64(minSpan)), float64(maxSpan)))
	anchor := v.from().Add(time.Duration(frac * float64(v.Span)))
	v.To = anchor.Add(time.Duration((1 - frac) * float64(span)))
	v.Span = span
	if frac < 0.98 {
		v.Follow = false
	}
	return v
}

// pan moves the view by frac of its span (negative: into the past). Any
// move stops following; a move that reaches now (limit, when not zero)
// stops there and follows again.
func (v wfView) pan(frac float64, limit time.Time) wfView {
	v.To = v.To.Add(time.Duration(frac * float64(v.Span)))
	v.Follow = false
	if !limit.IsZero() && !v.To.Before(limit) {
		v.To = limit
		v.Follow = frac > 0
	}
	return v
}

// centre puts t at the middle of the view, keeping the span unless it is
// shorter than min, and stops following.
func (v wfView) centre(t time.Time, minSpan time.Duration) wfView {
	v.Span = max(v.Span, minSpan)
	v.To = t.Add(v.Span / 2)
	v.Follow = false
	return v
}

// timeScale maps the view's span onto width pixels.
type timeScale struct {
	from  time.Time
	span  float64 // nanoseconds
	width float64 // pixels
}

func newScale(v wfView, width int) timeScale {
	return timeScale{from: v.from(), span: float64(max(v.Span, time.Nanosecond)), width: float64(width)}
}

// x is where t falls, in pixels from the left edge (may be outside).
func (s timeScale) x(t time.Time) float64 {
	return float64(t.Sub(s.from)) / s.span * s.width
}

// t is the moment at pixel x.
func (s timeScale) t(x float64) time.Time {
	return s.from.Add(time.Duration(x / s.width * s.span))
}

// tick is one mark of the time axis.
type tick struct {
	At    time.Time
	Label string
	Major bool // a labelled tick; minor ones are grid lines only
}

// tickSteps are the grid steps a time axis may use.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// ticks lays out the time axis of a view width pixels wide: labelled
// ticks at least minGap pixels apart, with four grid lines between.
// Labels are wall-clock times in displayZone, precise enough for the step.
func ticks(v wfView, width int, minGap float64) []tick {
	if width <= 0 {
		return nil
	}
	sc := newScale(v, width)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if float64(s)/sc.span*sc.width >= minGap {
			step = s
			break
		}
	}
	minor := step / 5
	if step == 15*time.Second || step == 15*time.Minute || step == 3*time.Hour {
		minor = step / 3
	}
	from := v.from()
	// Align to the step in the display zone (a 1h step lands on hours).
	_, off := from.In(displayZone).Zone()
	shift := time.Duration(off) * time.Second
	start := from.Add(shift).Truncate(minor).Add(-shift)
	var out []tick
	for t := start; !t.After(v.To); t = t.Add(minor) {
		if t.Before(from) {
			continue
		}
		major := t.Add(shift).Truncate(step).Equal(t.Add(shift))
		tk := tick{At: t, Major: major}
		if major {
			tk.Label = clockLabel(t, step)
		}
		out = append(out, tk)
	}
	return out
}

// clockLabel shows t as precisely as a step needs.
func clockLabel(t time.Time, step time.Duration) string {
	lt := t.In(displayZone)
	switch {
	case step < time.Second:
		return lt.Format("15:04:05.000")
	case step >= 24*time.Hour:
		return lt.Format("Jan 2")
	case step >= time.Hour:
		return lt.Format("Jan 2 15:04")
	}
	return lt.Format("15:04:05")
}

// spanLabel says how long a view is: "2m00s", "350 ms".
func spanLabel(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return formatAge(d)
}
