package pool

// BusyRetiredChildren gives each of server's retired children (draining
// after a config change) a call of the fake's sleep tool of the pool's
// own, as a request in flight would keep it running past its sessions'
// last calls, until the pool closes or the call's timeout. It returns
// how many it gave one.
func BusyRetiredChildren(p *Pool, server string) int {
	s, err := p.server(server)
	if err != nil {
		return 0
	}
	s.mu.Lock()
	old := append([]*backend(nil), s.old...)
	s.mu.Unlock()
	for _, b := range old {
		b.internalRequest("tools/call", []byte(`{"name":"sleep","arguments":{"ms":60000}}`))
	}
	return len(old)
}
