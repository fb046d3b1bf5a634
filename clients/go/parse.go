package seckill

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The parsers take a reply as go-redis's Do(...).Result() hands it over:
// string (simple and bulk strings), int64, nil, []interface{} (arrays; a
// RESP2 report is a flat field/value array), map[interface{}]interface{}
// (a RESP3 map). They never panic on a reply of another shape: they return
// a *ProtocolError.

func asString(v interface{}) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

func asInt(v interface{}) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case float64: // a RESP3 double; the contract sends none, but an exact one reads
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
}

func asArray(v interface{}, command string, n int) ([]interface{}, error) {
	a, ok := v.([]interface{})
	if !ok || (n >= 0 && len(a) != n) {
		return nil, protoErr(command, "%s, not an array of %d", describe(v), n)
	}
	return a, nil
}

func describe(v interface{}) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// statusReply: an array of n whose first item is one of allowed.
func statusReply(v interface{}, command string, n int, allowed map[Status]bool) ([]interface{}, Status, error) {
	a, err := asArray(v, command, n)
	if err != nil {
		return nil, "", err
	}
	st, err := parseStatus(a[0], allowed, command)
	return a, st, err
}

func parseStatus(v interface{}, allowed map[Status]bool, command string) (Status, error) {
	s, ok := asString(v)
	if !ok || !allowed[Status(s)] {
		return "", protoErr(command, "an unknown status %s", describe(v))
	}
	return Status(s), nil
}

func intAt(a []interface{}, i int, command, what string) (int64, error) {
	n, ok := asInt(a[i])
	if !ok {
		return 0, protoErr(command, "%s that is not an integer: %s", what, describe(a[i]))
	}
	return n, nil
}

// ParseInit: true when INIT created or replaced the sale (OK), false when
// it existed (EXISTS).
func ParseInit(v interface{}) (bool, error) {
	switch s, _ := asString(v); s {
	case "OK":
		return true, nil
	case "EXISTS":
		return false, nil
	}
	return false, protoErr("SECKILL.INIT", "%s", describe(v))
}

// ParseReserved parses RESERVE's [status, id or nil, remaining].
func ParseReserved(v interface{}) (Reserved, error) {
	const cmd = "SECKILL.RESERVE"
	a, st, err := statusReply(v, cmd, 3, reserveStatuses)
	if err != nil {
		return Reserved{}, err
	}
	id, ok := asString(a[1])
	if !ok && a[1] != nil {
		return Reserved{}, protoErr(cmd, "an id that is not a string: %s", describe(a[1]))
	}
	rem, err := intAt(a, 2, cmd, "remaining")
	return Reserved{Status: st, ID: id, Remaining: rem}, err
}

func parseSettled(v interface{}, command string, allowed map[Status]bool) (Settled, error) {
	a, st, err := statusReply(v, command, 2, allowed)
	if err != nil {
		return Settled{}, err
	}
	rem, err := intAt(a, 1, command, "remaining")
	return Settled{Status: st, Remaining: rem}, err
}

// ParseReleased parses RELEASE's [status, remaining].
func ParseReleased(v interface{}) (Settled, error) {
	return parseSettled(v, "SECKILL.RELEASE", releaseStatuses)
}

// ParseConfirmed parses CONFIRM's [status, remaining].
func ParseConfirmed(v interface{}) (Settled, error) {
	return parseSettled(v, "SECKILL.CONFIRM", confirmStatuses)
}

// ParseUnfence parses UNFENCE's status: UNFENCED, NOT_FENCED or NO_SALE.
func ParseUnfence(v interface{}) (Status, error) {
	return parseStatus(v, unfenceStatuses, "SECKILL.UNFENCE")
}

// ParseEntered parses ENTER's [status, entrants].
func ParseEntered(v interface{}) (Entered, error) {
	const cmd = "SECKILL.ENTER"
	a, st, err := statusReply(v, cmd, 2, enterStatuses)
	if err != nil {
		return Entered{}, err
	}
	n, err := intAt(a, 1, cmd, "entrants")
	return Entered{Status: st, Entrants: n}, err
}

// ParseDrawn parses DRAW's [drawn, remaining, left_to_draw].
func ParseDrawn(v interface{}) (Drawn, error) {
	const cmd = "SECKILL.DRAW"
	a, err := asArray(v, cmd, 3)
	if err != nil {
		return Drawn{}, err
	}
	var n [3]int64
	for i, what := range []string{"drawn", "remaining", "left_to_draw"} {
		if n[i], err = intAt(a, i, cmd, what); err != nil {
			return Drawn{}, err
		}
	}
	return Drawn{Drawn: n[0], Remaining: n[1], LeftToDraw: n[2]}, nil
}

// ParseEntrants parses ENTRANTS' [next_cursor, [user, qty, result, ...]].
func ParseEntrants(v interface{}) (EntrantsPage, error) {
	const cmd = "SECKILL.ENTRANTS"
	a, err := asArray(v, cmd, 2)
	if err != nil {
		return EntrantsPage{}, err
	}
	cursor, ok := asString(a[0])
	if !ok {
		return EntrantsPage{}, protoErr(cmd, "a cursor that is not a string: %s", describe(a[0]))
	}
	flat, ok := a[1].([]interface{})
	if !ok || len(flat)%3 != 0 {
		return EntrantsPage{}, protoErr(cmd, "a page that is not (user, qty, result) triples: %s", describe(a[1]))
	}
	page := EntrantsPage{Cursor: cursor, Entrants: make([]Entrant, 0, len(flat)/3)}
	for i := 0; i < len(flat); i += 3 {
		user, ok1 := asString(flat[i])
		qty, ok2 := asInt(flat[i+1])
		result, ok3 := asString(flat[i+2])
		if !ok1 || !ok2 || !ok3 || (result != ResultEntered && result != ResultDrawn && result != ResultPromoted) {
			return EntrantsPage{}, protoErr(cmd, "an entrant %s", describe(flat[i:i+3]))
		}
		page.Entrants = append(page.Entrants, Entrant{User: user, Qty: qty, Result: result})
	}
	return page, nil
}

type pair struct {
	name  string
	value interface{}
}

// pairs: a RESP2 field/value array, a RESP3 map or a decoded JSON object as
// pairs; nil for a nil reply (a missing key).
func pairs(v interface{}, command string) ([]pair, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []interface{}:
		if len(x)%2 != 0 {
			return nil, protoErr(command, "an odd number of field/value items: %s", describe(v))
		}
		out := make([]pair, 0, len(x)/2)
		for i := 0; i < len(x); i += 2 {
			name, ok := asString(x[i])
			if !ok {
				return nil, protoErr(command, "a field name that is not a string: %s", describe(x[i]))
			}
			out = append(out, pair{name, x[i+1]})
		}
		return out, nil
	case map[interface{}]interface{}:
		out := make([]pair, 0, len(x))
		for k, val := range x {
			name, ok := asString(k)
			if !ok {
				return nil, protoErr(command, "a field name that is not a string: %s", describe(k))
			}
			out = append(out, pair{name, val})
		}
		return out, nil
	case map[string]interface{}:
		out := make([]pair, 0, len(x))
		for k, val := range x {
			out = append(out, pair{k, val})
		}
		return out, nil
	}
	return nil, protoErr(command, "%s, not field/value pairs", describe(v))
}

// fieldPairs: pairs of a RESP report or of FORMAT JSON's string.
func fieldPairs(v interface{}, command string) ([]pair, error) {
	if s, ok := v.(string); ok {
		m, err := decodeJSON(s, command)
		if err != nil {
			return nil, err
		}
		v = m
	}
	return pairs(v, command)
}

// decodeJSON reads a FORMAT JSON reply: an object with numbers kept exact.
func decodeJSON(s, command string) (map[string]interface{}, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]interface{}
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, protoErr(command, "JSON that is not an object: %q", s)
	}
	if d.More() {
		return nil, protoErr(command, "more than one JSON value: %q", s)
	}
	return m, nil
}

// ParseGet parses GET's user, qty, state, created_ms, deadline_ms (RESP
// pairs or FORMAT JSON's string); nil when the key or the id is unknown.
func ParseGet(v interface{}) (*Reservation, error) {
	const cmd = "SECKILL.GET"
	ps, err := fieldPairs(v, cmd)
	if err != nil || ps == nil {
		return nil, err
	}
	r := &Reservation{}
	seen := 0
	for _, p := range ps {
		var ok bool
		switch p.name {
		case "user":
			r.User, ok = asString(p.value)
		case "state":
			r.State, ok = asString(p.value)
		case "qty":
			r.Qty, ok = asInt(p.value)
		case "created_ms":
			r.CreatedMs, ok = asInt(p.value)
		case "deadline_ms":
			r.DeadlineMs, ok = asInt(p.value)
		default:
			continue
		}
		if !ok {
			return nil, protoErr(cmd, "a %s of the wrong type: %s", p.name, describe(p.value))
		}
		seen++
	}
	if seen != 5 {
		return nil, protoErr(cmd, "%d of the 5 fields user, qty, state, created_ms, deadline_ms", seen)
	}
	return r, nil
}
