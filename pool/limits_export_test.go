package pool

// MaxSubscriptionURI is maxSubscriptionURI, for tests.
const MaxSubscriptionURI = maxSubscriptionURI
