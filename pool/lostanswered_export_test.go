package pool

// CountLostAnswers makes each answering of a resumed session's lost
// requests send how many it answered on the returned channel (which
// holds 16; more are dropped), until restore is called (after the pool
// closed).
func CountLostAnswers() (answered <-chan int, restore func()) {
	c := make(chan int, 16)
	testHookLostAnswered = func(n int) {
		select {
		case c <- n:
		default:
		}
	}
	return c, func() { testHookLostAnswered = nil }
}

// MaxLost is how many lost requests a resume may list on p.
func (p *Pool) MaxLost() int { return p.maxLost() }
