package pool

import (
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// maxSubscriptionURI bounds the URI of a resource subscription, in
// bytes. A subscription outlives its request: the session holds its URI
// until it lets go or ends, and the pool sends it to the child again (as
// the unsubscribe at the session's end, and to a restarted child), none
// of it counted in the bytes of the session's requests in flight. So a
// URI as long as a message may be would let one session hold the pool's
// memory (its share of subscriptions times 64 MiB) and keep the child
// every other session shares busy reading them back. Real resource URIs
// are far shorter; 16 KiB leaves room for long query strings. A shim
// carries subscriptions of URIs up to wire.MaxKeptURI only across a
// resume; those between the two are held, not carried.
const maxSubscriptionURI = 16 << 10

// longSubscriptionURI refuses a subscribe of uri past maxSubscriptionURI
// (nil when it is within), for method's answer.
func longSubscriptionURI(method, uri string) *jsonrpc.Error {
	if len(uri) <= maxSubscriptionURI {
		return nil
	}
	return newError(errBadParams, false, "", method,
		fmt.Errorf("a resource URI of %d bytes is past Switchboard's limit of %d bytes for a subscription", len(uri), maxSubscriptionURI))
}

// longListenURI is longSubscriptionURI for the resources a
// subscriptions/listen's params ask for. Params it cannot read are left
// for the listen to refuse.
func longListenURI(params []byte) *jsonrpc.Error {
	var p struct {
		Notifications struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	for _, uri := range p.Notifications.ResourceSubscriptions {
		if err := longSubscriptionURI("subscriptions/listen", uri); err != nil {
			return err
		}
	}
	return nil
}
