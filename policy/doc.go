// Package policy compiles a config into what the hot path asks of it: who a
// credential belongs to (virtual key → principal), which rules apply to a
// request (scope and matchers), what the request costs in each rule's unit
// (requests, tokens or micro-USD at the model's price), and which store key
// holds each bucket (llmguard:{<tenant>}:<rule>:<subject>).
package policy
