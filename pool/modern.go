package pool

// A legacy child answers in its own revision; a 2026-07-28 client reading
// that answer needs what its revision requires of every result. The pool
// adds it on the way back, so a modern client of a legacy child sees a
// modern server (DESIGN.md, "era").

// cacheableMethods are the requests whose 2026-07-28 results extend
// CacheableResult: ttlMs and cacheScope are required on them.
var cacheableMethods = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// Error codes 2026-07-28 defines (basic/index "Error Codes").
const (
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
	// codeLegacyNotFound is 2025-11-25's "resource not found", which
	// 2026-07-28 forbids emitting (replaced by -32602).
	codeLegacyNotFound = -32002
	// codeURLElicitationRequired is 2025-11-25's URLElicitationRequiredError,
	// which 2026-07-28 retired (the code stays reserved): a URL
	// interaction is an input request of an InputRequiredResult there.
	codeURLElicitationRequired = -32042
)

// childIsLegacy reports whether the child speaks a legacy revision (or
// has not said yet): the answers to a 2026-07-28 client's requests are
// rewritten for it then.
func (b *backend) childIsLegacy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hs == nil || b.hs.era == EraLegacy
}

// legacyInfo is childIsLegacy, with the _meta member naming a legacy
// child that its results carry to a modern client (nil before the
// handshake).
func (b *backend) legacyInfo() (infoMeta []byte, legacy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hs == nil {
		return nil, true
	}
	return b.hs.infoMeta, b.hs.era == EraLegacy
}
