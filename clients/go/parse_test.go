package seckill

import (
	"errors"
	"testing"
)

// Replies of the wrong shape are ProtocolErrors, never a panic or a
// half-filled value passed off as good.
func TestParsersRefuseBadShapes(t *testing.T) {
	bad := []interface{}{nil, "OK", int64(3), []interface{}{}, []interface{}{"RESERVED"},
		[]interface{}{"WHAT", nil, int64(1)}, []interface{}{"RESERVED", int64(7), int64(1)},
		[]interface{}{"RESERVED", "id", "x"}, []interface{}{int64(1), int64(2), int64(3), int64(4)},
		map[interface{}]interface{}{"total": int64(1)}}
	parsers := map[string]func(interface{}) error{
		"reserve": func(v interface{}) error { _, err := ParseReserved(v); return err },
		"release": func(v interface{}) error { _, err := ParseReleased(v); return err },
		"confirm": func(v interface{}) error { _, err := ParseConfirmed(v); return err },
		"enter":   func(v interface{}) error { _, err := ParseEntered(v); return err },
		"draw":    func(v interface{}) error { _, err := ParseDrawn(v); return err },
		"page":    func(v interface{}) error { _, err := ParseEntrants(v); return err },
		"init":    func(v interface{}) error { _, err := ParseInit(v); return err },
		"unfence": func(v interface{}) error { _, err := ParseUnfence(v); return err },
	}
	for name, parse := range parsers {
		for _, v := range bad {
			if (name == "draw" && isInts(v, 3)) || (name == "init" && v == "OK") {
				continue
			}
			var pe *ProtocolError
			if err := parse(v); !errors.As(err, &pe) {
				t.Fatalf("%s(%#v): %v", name, v, err)
			}
		}
	}
}

func isInts(v interface{}, n int) bool {
	a, ok := v.([]interface{})
	if !ok || len(a) != n {
		return false
	}
	for _, x := range a {
		if _, ok := x.(int64); !ok {
			return false
		}
	}
	return true
}

func TestStatusListsAreTheContracts(t *testing.T) {
	// RELEASE's CONFIRMED and CONFIRM's RELEASED cross; FENCED is a RESERVE
	// and ENTER status (the fence contract), not a RELEASE one.
	if _, err := ParseReleased([]interface{}{"CONFIRMED", int64(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConfirmed([]interface{}{"ALREADY_RELEASED", int64(1)}); err == nil {
		t.Fatal("CONFIRM took ALREADY_RELEASED")
	}
	for _, st := range []string{"FENCED", "DRAW"} {
		if r, err := ParseReserved([]interface{}{st, nil, int64(4)}); err != nil || r.OK() || r.Remaining != 4 {
			t.Fatalf("%s: %+v %v", st, r, err)
		}
	}
	if e, err := ParseEntered([]interface{}{"FENCED", int64(9)}); err != nil || e.OK() {
		t.Fatalf("ENTER FENCED: %+v %v", e, err)
	}
	if _, err := ParseReleased([]interface{}{"FENCED", int64(1)}); err == nil {
		t.Fatal("RELEASE took FENCED")
	}
}

func TestReportFenceAndRequiredFields(t *testing.T) {
	base := []interface{}{"total", int64(5), "remaining", int64(5), "pending", int64(0), "confirmed", int64(0),
		"released", int64(0), "expired", int64(0), "buyers", int64(0), "reservations", int64(0),
		"shards", []interface{}{int64(5)}, "invariant", "ok"}
	r, err := ParseReport(append(append([]interface{}{}, base...), "fence", "fenced"))
	if err != nil || r.Fence != "fenced" || len(r.Extra) != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = ParseReport(`{"total":5,"remaining":5,"pending":0,"confirmed":0,"released":0,"expired":0,"buyers":0,"reservations":0,"shards":[5],"invariant":"ok","fence":"clear"}`)
	if err != nil || r.Fence != "clear" {
		t.Fatalf("JSON: %+v %v", r, err)
	}
	for i := 0; i < len(base); i += 2 {
		name := base[i].(string)
		cut := append(append([]interface{}{}, base[:i]...), base[i+2:]...)
		_, err := ParseReport(cut)
		required := name == "total" || name == "remaining" || name == "pending" || name == "confirmed" || name == "invariant"
		if (err != nil) != required {
			t.Fatalf("without %s: %v", name, err)
		}
	}
	for _, s := range []string{"", "[]", "null", `{"total":1}{}`, `{"total":"x"}`, "{"} {
		if _, err := ParseReport(s); err == nil {
			t.Fatalf("JSON %q accepted", s)
		}
	}
}
