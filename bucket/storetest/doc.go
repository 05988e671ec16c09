// Package storetest is the behavioural contract every bucket.Store meets: one
// suite of timelines, run against the memory store and against the Redis
// store on miniredis, a real redis-server and a real Redis Cluster. The
// timelines cover token buckets (timelines.go), calendar quotas and takes
// that mix both kinds (quotas.go), and the voids of takes by request id
// (voids.go: a void after the take refunds once, a second void nothing, a
// void before the take makes it apply nothing).
//
// A store under test reads its time from the Clock the suite hands its
// factory, so the suite can walk fixed instants: the memory store takes
// Clock.Now as its clock, and a Redis store whose clock is Redis TIME follows
// it through Clock.OnSet (for miniredis, clock.OnSet(mr.SetTime)). Every
// timeline builds a fresh store and puts its keys and request ids under a
// prefix of its own, with a Redis Cluster hash tag so that one timeline's
// keys share a slot; stores may therefore share one database.
package storetest
