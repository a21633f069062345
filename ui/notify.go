package ui

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"fyne.io/fyne/v2"

	"github.com/switchboard-mcp/switchboard/pool"
)

// maxHangNotes is how many hung requests get a notification each in one
// check; beyond it they share one, so a stuck server does not bury the
// desktop in bubbles.
const maxHangNotes = 3

// notifier decides which desktop notifications a new snapshot deserves:
// one per request that passed the hang threshold, one per backend that
// entered the failed state. It remembers what it announced so nothing is
// said twice, and forgets requests and backends that are gone. It is owned
// by the event loop's goroutine.
type notifier struct {
	hung   map[uint64]bool
	failed map[string]bool
}

func newNotifier() *notifier {
	return &notifier{hung: map[uint64]bool{}, failed: map[string]bool{}}
}

// check returns the notifications for s at now.
func (n *notifier) check(s pool.Snapshot, now time.Time, hang time.Duration) []*fyne.Notification {
	var out []*fyne.Notification
	var fresh []pool.RequestInfo
	live := make(map[uint64]bool, len(n.hung))
	for _, r := range s.InFlight {
		if hang <= 0 || requestAge(r, s.TakenAt, now) < hang {
			continue
		}
		live[r.PoolID] = true
		if !n.hung[r.PoolID] {
			fresh = append(fresh, r)
		}
	}
	n.hung = live
	if len(fresh) > maxHangNotes {
		out = append(out, fyne.NewNotification(fmt.Sprintf("%d requests hung", len(fresh)),
			fmt.Sprintf("%d requests have waited longer than %s; open the dashboard's In flight tab.",
				len(fresh), formatAge(hang))))
	} else {
		for _, r := range fresh {
			out = append(out, fyne.NewNotification("Request hung on "+r.Server,
				fmt.Sprintf("%s (session %s, PID %s) has waited %s; written to the child: %s.",
					requestWhat(r.Method, r.Name), r.Session, pidText(r.PID), formatAge(requestAge(r, s.TakenAt, now)), yesNo(r.WrittenToChild))))
		}
	}

	failed := map[string]bool{}
	for _, b := range s.Backends {
		if b.State != pool.StateFailed {
			continue
		}
		key := b.Server + "\x00" + b.Session
		failed[key] = true
		if n.failed[key] {
			continue
		}
		msg := "It keeps crashing; requests fail fast until you restart it or change its config."
		if b.LastError != "" {
			msg = b.LastError + ". " + msg
		}
		out = append(out, fyne.NewNotification("Server "+b.Server+" failed", msg))
	}
	n.failed = failed
	return out
}

// Notification text limits, in runes: a method or tool name can be as long
// as a message, and a bubble shows a few lines.
const (
	maxNoteTitle   = 120
	maxNoteContent = 400
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
