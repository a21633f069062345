package pool

import "strconv"

// outFacts is what a message for the client is, as the one who makes it
// knows: its method, a request's id, and the request a
// notifications/cancelled withdraws. It travels with the message to the
// session's output, so that a legacy HTTP session's GET stream
// (httpSession.toStream) routes it, keeps it or drops it without parsing
// it again; a stdio session's output does not look at it. The zero value
// is an answer's (the client's request it answers is no business of the
// stream's), and a stdio line's that is no message (resume's end of a
// line cut short).
type outFacts struct {
	method    string // a request's or a notification's method; "" for an answer
	id        wireID // a request's id; none for a notification or an answer
	withdraws wireID // the request a notifications/cancelled withdraws
}

// outSink takes a session's messages for its client in place of a queue
// and a writer (HTTP), each with its facts.
type outSink func(line []byte, f outFacts)

// wireID is an id as a message for the client writes it: a pool id (a
// number), or, where the pool names a request otherwise (roots/list's
// string; a client's own id, a listen's), the id's JSON as written. A
// number is kept as such and written out only for a stream that needs
// it (wire): a stdio session pays nothing for it.
type wireID struct {
	n    uint64 // a pool id; 0: none, or text
	text string // the id's JSON as written, when it is no pool id
}

// wire is the id's JSON as the message writes it; "" for none.
func (w wireID) wire() string {
	if w.text != "" || w.n == 0 {
		return w.text
	}
	return strconv.FormatUint(w.n, 10)
}

// notice is a notification's facts.
func notice(method string) outFacts { return outFacts{method: method} }

// asking is the facts of a request of method the pool sends the client
// under pool id id.
func asking(method string, id uint64) outFacts {
	return outFacts{method: method, id: wireID{n: id}}
}

// withdrawal is the facts of the notifications/cancelled that withdraws
// the pool's request id.
func withdrawal(id uint64) outFacts {
	return outFacts{method: "notifications/cancelled", withdraws: wireID{n: id}}
}

// outMessage is a message for the client with its facts, for those who
// hold messages a while before they deliver them (a round's questions, a
// listen's early changes).
type outMessage struct {
	line  []byte
	facts outFacts
}
