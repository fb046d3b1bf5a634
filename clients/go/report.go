package seckill

import "encoding/json"

// ParseReport parses INFO's or RECONCILE's report: a RESP2 field/value
// array, a RESP3 map, or FORMAT JSON's string. nil, nil for a nil reply
// (the key does not exist).
func ParseReport(v interface{}) (*Report, error) {
	const cmd = "SECKILL.INFO"
	ps, err := fieldPairs(v, cmd)
	if err != nil || ps == nil {
		return nil, err
	}
	r := &Report{Extra: map[string]interface{}{}}
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if err := r.setField(p); err != nil {
			return nil, err
		}
		seen[p.name] = true
	}
	for _, name := range requiredFields {
		if !seen[name] {
			return nil, protoErr(cmd, "a report without %s: %s", name, describe(v))
		}
	}
	return r, nil
}

// requiredFields: what every report holds (docs/commands.md).
var requiredFields = []string{"total", "remaining", "pending", "confirmed", "invariant"}

func (r *Report) ints() map[string]*int64 {
	return map[string]*int64{
		"total": &r.Total, "remaining": &r.Remaining, "pending": &r.Pending,
		"confirmed": &r.Confirmed, "released": &r.Released, "expired": &r.Expired,
		"buyers": &r.Buyers, "reservations": &r.Reservations,
	}
}

// setField stores one field: typed when it is one of the fixed ones, else
// normalized into Extra.
func (r *Report) setField(p pair) error {
	const cmd = "SECKILL.INFO"
	if dst, ok := r.ints()[p.name]; ok {
		n, ok := asInt(p.value)
		if !ok {
			return protoErr(cmd, "%s that is not an integer: %s", p.name, describe(p.value))
		}
		*dst = n
		return nil
	}
	switch p.name {
	case "shards":
		a, ok := p.value.([]interface{})
		if !ok {
			return protoErr(cmd, "shards that are not an array: %s", describe(p.value))
		}
		r.Shards = make([]int64, len(a))
		for i, x := range a {
			if r.Shards[i], ok = asInt(x); !ok {
				return protoErr(cmd, "a shard that is not an integer: %s", describe(x))
			}
		}
		return nil
	case "invariant", "fence":
		s, ok := asString(p.value)
		if !ok {
			return protoErr(cmd, "%s that is not a string: %s", p.name, describe(p.value))
		}
		if p.name == "fence" {
			r.Fence = s
		} else {
			r.Invariant = s
		}
		return nil
	}
	r.Extra[p.name] = normalize(p.value)
	return nil
}

// normalize gives RESP and JSON values one form: integers int64, strings
// string, arrays []interface{}, maps map[string]interface{}.
func normalize(v interface{}) interface{} {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		return x.String()
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[describeKey(k)] = normalize(e)
		}
		return out
	}
	return v
}

func describeKey(k interface{}) string {
	if s, ok := k.(string); ok {
		return s
	}
	return describe(k)
}

// Int is an integer field of Extra (a split sale's sent, a draw sale's
// entrants, RECONCILE's orders_ok, ...); false when absent or nil.
func (r *Report) Int(name string) (int64, bool) {
	if r == nil {
		return 0, false
	}
	n, ok := r.Extra[name].(int64)
	return n, ok
}

// String is a string field of Extra (round, mode, seed, ...).
func (r *Report) String(name string) (string, bool) {
	if r == nil {
		return "", false
	}
	s, ok := r.Extra[name].(string)
	return s, ok
}

// IDs is a list of ids in Extra (orders_pending_ids, ...).
func (r *Report) IDs(name string) []string {
	if r == nil {
		return nil
	}
	a, _ := r.Extra[name].([]interface{})
	out := make([]string, 0, len(a))
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
