// Package alert delivers budget threshold alerts to a webhook. The meter
// tells a Notifier each quota's level as a request settles (Observe, which
// never blocks: a bounded queue, drops counted); a background worker takes
// each crossing of a configured threshold, claims it so that it is sent
// once per budget period however many llmguard nodes see it (a Claimer:
// SET NX on the shared Redis store, a map in memory), and POSTs it as JSON
// or as a Slack message, retrying with exponential backoff and jitter.
// README, "Reports for finance", shows the payload.
package alert
