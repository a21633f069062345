package pool

import "net/http"

// HTTPQuestionsParked reports whether legacy HTTP session sid has
// requests waiting for a GET stream under a grace (Options.QuestionGrace)
// that has not passed.
func HTTPQuestionsParked(h http.Handler, sid string) bool {
	hs := httpSessionOf(h, sid)
	if hs == nil {
		return false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.park != nil
}
