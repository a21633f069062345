package ui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"fyne.io/fyne/v2"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Hung requests are announced per server, once per hang: the check that
// first finds requests of a server past the threshold sends one bubble,
// which counts them; more of its requests passing the threshold while any
// is still past it send nothing. Once none is, the server has recovered,
// and its next hang is announced again, but not within hangNoteEvery of
// its last bubble: a server that hangs and recovers in turn sends one
// bubble every few minutes at most. The tray icon and the In flight tab
// show every hung request all along.
const hangNoteEvery = 5 * time.Minute

// A failed server is announced the same way, once per failure: the check
// that first finds a failed child of it sends one bubble, however many of
// its children fail (a share "session" server has one per session, and
// each new session's fails too); none more while any of them is still
// failed. Once none is (restarted, replaced by a config change, or gone
// with its sessions), its next failure is announced again, but not within
// failNoteEvery of its last bubble. The tray icon, the overview and the
// Backends tab show every failed child all along.
const failNoteEvery = hangNoteEvery

// maxServerNotes is how many servers that start hanging, or fail, in one
// check get a bubble each; beyond it they share one.
const maxServerNotes = 3

// notifier decides which desktop notifications a new snapshot deserves:
// one when a server starts hanging (see hangNoteEvery), one when a
// server's children start failing (see failNoteEvery). It remembers what
// it announced so nothing is said twice, and forgets servers that
// recovered. It is owned by the event loop's goroutine.
type notifier struct {
	hung      map[string]bool      // servers with a request past the threshold at the last check
	noted     map[string]time.Time // when a server's last hang bubble went out, within hangNoteEvery
	failed    map[string]bool      // servers with a failed child at the last check
	failNoted map[string]time.Time // when a server's last failure bubble went out, within failNoteEvery
}

func newNotifier() *notifier {
	return &notifier{hung: map[string]bool{}, noted: map[string]time.Time{}, failed: map[string]bool{},
		failNoted: map[string]time.Time{}}
}

// check returns the notifications for s at now.
func (n *notifier) check(s pool.Snapshot, now time.Time, hang time.Duration) []*fyne.Notification {
	var out []*fyne.Notification
	hung := map[string][]pool.RequestInfo{} // by server, the requests past the threshold
	for _, r := range s.InFlight {
		if hang > 0 && requestAge(r, s.TakenAt, now) >= hang {
			hung[r.Server] = append(hung[r.Server], r)
		}
	}
	var due []string // servers that started hanging and were not announced lately
	due, n.hung = dueNotes(hung, n.hung, n.noted, now, hangNoteEvery)
	if len(due) > maxServerNotes {
		k := 0
		for _, srv := range due {
			k += len(hung[srv])
		}
		out = append(out, fyne.NewNotification(fmt.Sprintf("%d requests hung on %d servers", k, len(due)),
			fmt.Sprintf("Requests on %s have waited longer than %s; open the dashboard's In flight tab.",
				strings.Join(due, ", "), formatAge(hang))))
		due = nil
	}
	for _, srv := range due {
		rs := hung[srv]
		oldest := slices.MinFunc(rs, func(a, b pool.RequestInfo) int {
			return cmp.Compare(requestAge(b, s.TakenAt, now), requestAge(a, s.TakenAt, now))
		})
		// The name is cut so that why it waits fits in the bubble.
		what := fmt.Sprintf("%s (session %s, PID %s)", truncate(requestWhat(oldest.Method, oldest.Name), maxNoteWhat),
			oldest.Session, pidText(oldest.PID))
		age := formatAge(requestAge(oldest, s.TakenAt, now))
		why := whySentence(hungWhy(s, oldest))
		if len(rs) == 1 {
			out = append(out, fyne.NewNotification("Request hung on "+srv,
				fmt.Sprintf("%s has waited %s; written to the child: %s.%s", what, age, yesNo(oldest.WrittenToChild), why)))
			continue
		}
		out = append(out, fyne.NewNotification(fmt.Sprintf("%d requests hung on %s", len(rs), srv),
			fmt.Sprintf("%d requests have waited longer than %s; the oldest, %s, has waited %s.%s Open the dashboard's In flight tab.",
				len(rs), formatAge(hang), what, age, why)))
	}
	return append(out, n.failures(s, now)...)
}

// dueNotes returns, sorted, the servers of cur that were not in last and
// got no bubble within every, the ones due a bubble now: it forgets in
// noted the bubbles older than every and records those due at now. It
// returns with them the servers of cur, to be last at the next check.
func dueNotes[V any](cur map[string]V, last map[string]bool, noted map[string]time.Time, now time.Time,
	every time.Duration) (due []string, seen map[string]bool) {
	for srv, at := range noted {
		if now.Sub(at) >= every {
			delete(noted, srv)
		}
	}
	seen = make(map[string]bool, len(cur))
	for srv := range cur {
		seen[srv] = true
		if _, lately := noted[srv]; !last[srv] && !lately {
			due = append(due, srv)
		}
	}
	slices.Sort(due)
	for _, srv := range due {
		noted[srv] = now
	}
	return due, seen
}

// whySentence is why a hung request waits (hungWhy) as a sentence to
// follow another, or "" when the pool does not say: it tells a child that
// does not read its input, or has not started, from a request the child
// has and does not answer.
func whySentence(why string) string {
	if why == "" {
		return ""
	}
	return " Why it waits: " + why + "."
}

// failures returns the bubbles for servers whose children started failing
// (see failNoteEvery).
func (n *notifier) failures(s pool.Snapshot, now time.Time) []*fyne.Notification {
	failed := map[string]string{} // by server, the last error of its first failed child
	for _, b := range s.Backends {
		if b.State != pool.StateFailed {
			continue
		}
		if why, seen := failed[b.Server]; !seen || why == "" {
			failed[b.Server] = b.LastError
		}
	}
	var due []string // servers that started failing and were not announced lately
	due, n.failed = dueNotes(failed, n.failed, n.failNoted, now, failNoteEvery)
	if len(due) > maxServerNotes {
		return []*fyne.Notification{fyne.NewNotification(fmt.Sprintf("%d servers failed", len(due)),
			fmt.Sprintf("%s keep crashing; their requests fail fast until you restart them or change their config. "+
				"Open the dashboard's Backends tab.", strings.Join(due, ", ")))}
	}
	var out []*fyne.Notification
	for _, srv := range due {
		msg := "It keeps crashing; requests fail fast until you restart it or change its config."
		if why := failed[srv]; why != "" {
			msg = why + ". " + msg
		}
		out = append(out, fyne.NewNotification("Server "+srv+" failed", msg))
	}
	return out
}

// Notification text limits, in runes: a method or tool name can be as long
// as a message, and a bubble shows a few lines.
// A hang bubble cuts the request's method and name to maxNoteWhat, so
// that why it waits (at most maxWhy) fits in its content.
const (
	maxNoteTitle   = 120
	maxNoteContent = 400
	maxNoteWhat    = 100
)

// desktopNote is n as goos's desktop shows it safely: each text cut to its
// limit, and on Windows kept to letters, digits, spaces and punctuation
// that mean nothing inside a PowerShell string. fyne shows a Windows
// notification by running a PowerShell script with the title and content
// between double quotes, quoted the Go way (backslash escapes, which
// PowerShell does not know). A request's method or tool name, which any
// session chooses, or a child's last error would otherwise end the string
// with a quote (" or a typographic one), expand $(...) or escape with a
// backtick, and run as a command in the user's name. What is left out
// shows as a '?'. On Linux and the BSDs the body goes over D-Bus, where a
// notification server may read it as markup: <, > and & become look-alikes,
// so that a session cannot put a link or an image in Switchboard's name.
func desktopNote(goos string, n *fyne.Notification) *fyne.Notification {
	return fyne.NewNotification(noteText(goos, n.Title, maxNoteTitle), noteText(goos, n.Content, maxNoteContent))
}

// noteText is s for desktopNote.
func noteText(goos, s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			b.WriteRune('…')
			break
		}
		switch {
		case goos == "windows" && !plainRune(r):
			r = '?'
		case goos != "windows" && goos != "darwin":
			r = unmarked(r)
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// plainRune reports whether r is text inside a PowerShell double-quoted
// string: not a quote that ends it, not $ or the backtick.
func plainRune(r rune) bool {
	switch {
	case r == ' ' || unicode.IsLetter(r) || unicode.IsDigit(r):
		return true
	case r < 0x80:
		return strings.ContainsRune(".,:;!?()[]{}<>/\\_-+=*&%#@|~^'", r)
	}
	return false
}

// unmarked is r, or for a character of the notifications' markup a
// look-alike that is not.
func unmarked(r rune) rune {
	switch r {
	case '<':
		return '‹'
	case '>':
		return '›'
	case '&':
		return '＆'
	}
	return r
}
