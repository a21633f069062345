package pool

// SetListenHook makes hook run in every subscriptions/listen the pool
// answers itself, between the listen's registration (from then on, the
// changes it asked for reach it) and its acknowledgement, with the
// listen's id as the client sent it; until restore is called (after the
// pool closed).
func SetListenHook(hook func(id string)) (restore func()) {
	testHookListening = func(id []byte) { hook(string(id)) }
	return func() { testHookListening = nil }
}
