package region

import (
	"strconv"

	"github.com/llmguard/llmguard/policy"
)

// The exchange's keys, all under the {global} hash tag of the limit's
// buckets, and under the fingerprint of its split (policy.Regional), so
// that a new split starts afresh. A limit name cannot hold ';' or '=', so
// none of them is a bucket key:
//
//	llmguard:{global}:<limit>;x=<fingerprint>;plan                       the plan (coordinating region)
//	llmguard:{global}:<limit>;x=<fingerprint>;share=<region>             a region's share record (its Redis)
//	llmguard:{global}:<limit>;x=<fingerprint>;demand=<region>;i=<n>      a region's demand in interval n (its Redis)
//
// Records name their region, so that two regions wrongly given one Redis
// still keep apart.
func keyBase(r *policy.Rule) string {
	return "llmguard:{global}:" + r.Name + ";x=" + r.Regional.Fingerprint
}

func planKey(r *policy.Rule) string { return keyBase(r) + ";plan" }

func shareKey(r *policy.Rule, region string) string { return keyBase(r) + ";share=" + region }

func demandKey(r *policy.Rule, region string, interval int64) string {
	return keyBase(r) + ";demand=" + region + ";i=" + strconv.FormatInt(interval, 10)
}
