package pool

// StreamFacts is a message a legacy HTTP session's GET stream was handed,
// with what its maker told of it (outFacts): its method, a request's id,
// the request a notifications/cancelled withdraws, each as written.
type StreamFacts struct {
	Line                  []byte
	Method, ID, Withdraws string
}

// WatchStreamFacts hands see each message, and its facts, that a legacy
// HTTP session opened from now on hands its GET stream, before the
// stream takes it. restore ends it once the pool has closed.
func WatchStreamFacts(see func(StreamFacts)) (restore func()) {
	testHookStreamSink = func(sink outSink) outSink {
		return func(line []byte, f outFacts) {
			see(StreamFacts{Line: line, Method: f.method, ID: f.id.wire(), Withdraws: f.withdraws.wire()})
			sink(line, f)
		}
	}
	return func() { testHookStreamSink = nil }
}
