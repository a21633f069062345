package pool

// SetReleasingHook runs hook with the client name of each session whose
// moved stakes moveStakes is about to release (the session let them go
// as they moved), between that decision and the release; until restore
// is called (after the pool closed).
func SetReleasingHook(hook func(clientName string)) (restore func()) {
	testHookReleasing = func(s *session) {
		s.mu.Lock()
		name := s.clientName
		s.mu.Unlock()
		hook(name)
	}
	return func() { testHookReleasing = nil }
}

// SetLosingStakesHook runs hook in the end of a subscribe that took back
// sessions' stakes, between that count and the sessions' drop of them;
// until restore is called (after the pool closed).
func SetLosingStakesHook(hook func()) (restore func()) {
	testHookLosingStakes = hook
	return func() { testHookLosingStakes = nil }
}
