package pool

import "encoding/json"

// SpoilBridgedAnswers makes each round of a 2026-07-28 child's questions
// to a legacy client hold, besides the client's answers, one that is not
// JSON, so that the pool cannot build the call's retry once the client
// has answered, until restore is called (after the pool closed). Call it
// before the pool is made.
func SpoilBridgedAnswers() (restore func()) {
	testHookRoundShared = func(x *inputRound) {
		x.mu.Lock()
		x.answer["spoiled"] = json.RawMessage(`{`)
		x.mu.Unlock()
	}
	return func() { testHookRoundShared = nil }
}
