// Package keystore keeps virtual keys in the Redis store, managed live and
// shared by every llmguard node (README, "Managing keys").
//
// It sits before the request flow: an operator creates, revokes or rotates
// a key through the admin API (/admin/keys) or `llmguard keys`, which calls
// a Registry. The Registry writes the key's record (its SHA-256, never the
// secret) into one Redis hash, appends the change to an audit stream and
// publishes the record on a channel, all in one MULTI/EXEC. Every node runs
// a Syncer: it holds the records in a Cache, applies each published record
// as it arrives (within milliseconds), and reads the whole registry again
// whenever its subscription (re)connects and every key_store.resync, in
// case a notification was lost. The proxy asks the Cache, in memory, for a
// request's credential after the config file's keys
// (policy.Policy.Authenticate); while Redis is down the Cache keeps
// answering with the keys it knows.
//
// Every Redis key and the channel carry the hash tag {llmguard-keys}, so
// that on a Redis Cluster the registry, its revision counter and the audit
// stream live in one slot (one MULTI/EXEC), and the subscription goes to
// that slot's master.
package keystore
