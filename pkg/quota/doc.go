// Package quota holds provider calls to limits that every ingest replica
// shares: concurrent calls, requests per minute and tokens per minute, per
// provider ("anthropic"), per model ("anthropic:claude-sonnet-4-5") or per
// credential (a Limit whose Match lists what uses the key). N replicas
// stay under one provider quota instead of N.
//
// The shared state lives in the LLMW_QUOTA KV bucket (pkg/provision makes
// it), one record per limit, changed only by compare-and-set on its
// revision: the running calls as leases with an expiry, the window's
// requests and tokens in ten slots, and a cooldown. Every Limiter watches
// the bucket, so it usually writes without reading first, and learns at
// once when another replica frees a call or a provider's 429 cools a limit
// down (Lease.Cooldown, with the provider's Retry-After). A replica renews
// its leases every third of Limits.LeaseTTL while their calls run; one
// that dies stops renewing, and the others count its calls for at most
// LeaseTTL after its last renewal.
//
// A call over a limit waits in this replica's queue for that limit,
// served round-robin across sessions, up to Limits.MaxWait; a full queue
// (Limits.MaxQueue) refuses it with ErrQueueFull. Limits come from a file
// or flags (Config.Limits, SetLimits) or, for every replica at once, from
// the bucket's config key (PutLimits), which wins while it exists.
package quota
