package pool

// QueuedNotificationBytes is what the lines that expect no answer (the
// notifications and answers the pool sends children) hold in the write
// queues of server's backends.
func QueuedNotificationBytes(p *Pool, server string) int {
	s, err := p.server(server)
	if err != nil {
		return 0
	}
	n := 0
	for _, b := range s.backends() {
		b.mu.Lock()
		for _, it := range b.queue {
			if it.p == nil {
				n += len(it.line)
			}
		}
		b.mu.Unlock()
	}
	return n
}
