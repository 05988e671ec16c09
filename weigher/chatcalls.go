package weigher

import "github.com/tidwall/gjson"

// A chat message's tool_calls in one pass. rawElements found each call's
// end with a pass over it (jsonscan.Skip), callsTally's rawMembers then
// stepped over each of its values (the function object with another
// pass) and callTallyOf's over the function's name and arguments: the
// arguments' bytes were read three times before they were counted. Now
// callsArrayTally walks the calls, their members and the function's
// members once, each value stepped over once, and finds each call's end
// where its walk stops. The counts and verdicts are callsTally's, call by
// call (TestCallsArrayTallySameAsPerCall, FuzzCallsArrayTallySameAsPerCall).
// The load benchmark's warm bodies (a call in one turn of three): 1,480
// instructions less a 1 KiB body on average, 1,130 at 16 KiB
// (BenchmarkWeighWarm under callgrind).

// callsArrayTally is the sum over the elements of arr (a message's
// tool_calls array, the text of a JSON array that passed jsonscan) of
// callsTally(enc, call, check, fold) in tokens, and ok false when one of
// them fails its field check (the calls after the first that fails are
// counted unchecked, as the per-call walk counted them).
func callsArrayTally(enc counter, arr string, check bool, fold *[]byte) (n int64, ok bool) {
	ok = true
	i := skipSpace(arr, 1) // past '['
	for i < len(arr) && arr[i] != ']' {
		t, end, cok := callTallyAt(enc, arr[i:], check && ok, fold)
		ok = ok && cok
		n += t
		i = skipSpace(arr, i+end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return n, ok
}

// callTallyAt is callsTally of the value at the start of s (a call, valid
// JSON, followed by anything), and where it ends in s.
func callTallyAt(enc counter, s string, check bool, fold *[]byte) (n int64, end int, ok bool) {
	if s[0] != '{' {
		end := skipValue(s, 0) // checkElements checks objects only
		return countValue(enc, rawValue(s[:end])), end, true
	}
	ok = true
	w := newMemberWalk(s)
	for {
		k, more := w.key()
		if !more {
			break
		}
		if (k == "function" || k == "custom") && w.obj[w.i] == '{' {
			t, e, fok := callMembersAt(enc, w.obj[w.i:], callKinds[k], check && ok, fold)
			n += t
			ok = ok && fok
			w.skipTo(w.i + e)
			continue
		}
		v := w.value()
		if k == "function" || k == "custom" {
			n += countValue(enc, v) // not an object: by its JSON text
		} else {
			n += memberTokens(enc, k, v, chatToolCallKnown(k)) // unknownmembers.go
		}
		if check && ok {
			if !fieldValue(k, v.Type, chatToolCallFields) {
				_, _, ok = checkMember(k, v, elements{v: v, raw: true}, chatToolCallFields, 4, nil, fold)
			}
		}
	}
	return n, w.at() + 1, ok
}

// callMembersAt is callTallyOf of the object at the start of s (valid
// JSON, followed by anything), and where it ends in s.
func callMembersAt(enc counter, s string, ck callKind, check bool, fold *[]byte) (n int64, end int, ok bool) {
	ok = true
	var name, args gjson.Result
	w := newMemberWalk(s)
	for {
		k, more := w.key()
		if !more {
			break
		}
		v := w.value()
		if check && ok {
			if !fieldValue(k, v.Type, ck.fields) {
				_, _, ok = checkMember(k, v, elements{v: v, raw: true}, ck.fields, 5, nil, fold)
			}
		}
		switch k {
		case "name":
			name = v
		case ck.args:
			args = v
		default:
			n += unknownMember(enc, k, v) // unknownmembers.go
		}
	}
	return tokensPerToolCall + countValue(enc, name) + countValue(enc, args) + n, w.at() + 1, ok
}
