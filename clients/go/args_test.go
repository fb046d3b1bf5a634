package seckill

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestInitArgs(t *testing.T) {
	got, err := initArgs("sale:{1}", 100, InitOptions{Shards: 8, Limit: 2, HoldMs: 900000, StartMs: 5,
		EndMs: 9, TTLSeconds: 60, Stream: "sale:{1}:events", MaxLen: 1000,
		Split: &Split{Round: "r1", Peers: []string{"sale:{a}", "sale:{b}"}}, Draw: true, Fence: true, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"SECKILL.INIT", "sale:{1}", "100", "SHARDS", "8", "LIMIT", "2", "HOLD", "900000",
		"START", "5", "END", "9", "TTL", "60", "STREAM", "sale:{1}:events", "MAXLEN", "1000",
		"SPLIT", "r1", "2", "sale:{a}", "sale:{b}", "DRAW", "FENCE", "REPLACE"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if got, _ := initArgs("k", 0, InitOptions{}); !reflect.DeepEqual(got, []interface{}{"SECKILL.INIT", "k", "0"}) {
		t.Fatalf("plain INIT: %v", got)
	}
	for _, bad := range []InitOptions{{Draw: true}, {MaxLen: 5}} {
		if _, err := initArgs("k", 1, bad); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}

// BEACON's encoding only: the servers of this tree do not take it yet.
func TestBeaconArgs(t *testing.T) {
	got, err := initArgs("k", 2, InitOptions{EndMs: 9, Draw: true, Beacon: "drand quicknet round 1234567", Fence: true})
	want := []interface{}{"SECKILL.INIT", "k", "2", "END", "9", "DRAW", "BEACON", "drand quicknet round 1234567", "FENCE"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("INIT ... DRAW BEACON name: %v %v", got, err)
	}
	if _, err := initArgs("k", 2, InitOptions{EndMs: 9, Draw: true, Beacon: strings.Repeat("n", MaxBeaconName)}); err != nil {
		t.Fatalf("a %d-byte name refused: %v", MaxBeaconName, err)
	}
	for _, bad := range []InitOptions{{EndMs: 9, Beacon: "b"}, {EndMs: 9, Draw: true, Beacon: strings.Repeat("n", MaxBeaconName+1)}} {
		if _, err := initArgs("k", 2, bad); err == nil {
			t.Fatalf("a beacon of %d bytes, Draw %v: accepted", len(bad.Beacon), bad.Draw)
		}
	}

	for _, c := range []struct {
		count  int
		beacon string
		want   []interface{}
	}{
		{10, "", []interface{}{"SECKILL.DRAW", "k", "COUNT", "10"}},
		{1000, "round 1234567: 8f3e...", []interface{}{"SECKILL.DRAW", "k", "COUNT", "1000", "BEACON", "round 1234567: 8f3e..."}},
		{1, "\x00binary\xff", []interface{}{"SECKILL.DRAW", "k", "COUNT", "1", "BEACON", "\x00binary\xff"}},
	} {
		got, err := drawArgs("k", c.count, c.beacon)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("DRAW %d %q: %v %v", c.count, c.beacon, got, err)
		}
		// through the library: FCALL seckill_draw 1 k COUNT n [BEACON value]
		if f := toFunctions(got, nil); !reflect.DeepEqual(f[:4], []interface{}{"FCALL", "seckill_draw", "1", "k"}) ||
			!reflect.DeepEqual(f[4:], c.want[2:]) {
			t.Fatalf("as FCALL: %v", f)
		}
	}
	if _, err := drawArgs("k", 1, strings.Repeat("v", MaxBeaconValue)); err != nil {
		t.Fatalf("a %d-byte value refused: %v", MaxBeaconValue, err)
	}
	for _, c := range []struct {
		count  int
		beacon string
	}{{0, ""}, {1001, ""}, {1, strings.Repeat("v", MaxBeaconValue+1)}} {
		if _, err := drawArgs("k", c.count, c.beacon); err == nil {
			t.Fatalf("DRAW COUNT %d with a %d-byte beacon accepted", c.count, len(c.beacon))
		}
	}
}

func TestUserArgs(t *testing.T) {
	got, _ := userArgs("SECKILL.RESERVE", "k", "u1", 3, "o1")
	if !reflect.DeepEqual(got, []interface{}{"SECKILL.RESERVE", "k", "u1", "QTY", "3", "REQID", "o1"}) {
		t.Fatalf("got %v", got)
	}
	got, _ = userArgs("SECKILL.ENTER", "k", "u1", 1, "")
	if !reflect.DeepEqual(got, []interface{}{"SECKILL.ENTER", "k", "u1"}) {
		t.Fatalf("QTY 1 and no REQID: %v", got)
	}
	long := strings.Repeat("x", MaxIDBytes+1)
	for _, c := range [][2]string{{"", ""}, {long, ""}, {"u", long}} {
		if _, err := userArgs("SECKILL.RESERVE", "k", c[0], 1, c[1]); err == nil {
			t.Fatalf("user %d bytes, reqid %d bytes accepted", len(c[0]), len(c[1]))
		}
	}
	if _, err := userArgs("SECKILL.RESERVE", "k", strings.Repeat("x", MaxIDBytes), 1, ""); err != nil {
		t.Fatalf("a 256-byte user refused: %v", err)
	}
}

func ledger(n int) []Order {
	out := make([]Order, n)
	for i := range out {
		out[i] = Order{RID: "o" + i64(int64(i)), User: "u" + i64(int64(i)), Qty: 1}
	}
	return out
}

func TestReconcileCalls(t *testing.T) {
	for _, c := range []struct{ rows, size, calls, last int }{
		{0, 1000, 1, 0}, {1, 1000, 1, 1}, {1000, 1000, 1, 1000}, {1001, 1000, 2, 1}, {2500, 1000, 3, 500},
		{250, 100, 3, 50},
	} {
		calls, err := reconcileCalls("k", ledger(c.rows), true, true, c.size)
		if err != nil || len(calls) != c.calls {
			t.Fatalf("%d rows by %d: %d calls, %v", c.rows, c.size, len(calls), err)
		}
		total := 0
		for i, call := range calls {
			words := strings.Fields(strings.Trim(strings.Join(strs(call), " "), " "))
			hasExpire := contains(words, "EXPIRE")
			if hasExpire != (i == 0) {
				t.Fatalf("call %d: EXPIRE %v", i, hasExpire)
			}
			if c.rows > 0 && words[len(words)-1] != "APPLY" {
				t.Fatalf("call %d without APPLY", i)
			}
			if c.rows == 0 && contains(words, "APPLY") {
				t.Fatal("an empty ledger applied")
			}
			rows := (len(call) - 2 - b2i(hasExpire) - b2i(c.rows > 0)*3) / 3
			if rows > c.size || rows > MaxChunk {
				t.Fatalf("call %d has %d rows", i, rows)
			}
			total += rows
			if i == len(calls)-1 && rows != c.last {
				t.Fatalf("last call has %d rows, want %d", rows, c.last)
			}
		}
		if total != c.rows {
			t.Fatalf("%d rows sent of %d", total, c.rows)
		}
	}
	if _, err := reconcileCalls("k", ledger(3), false, false, MaxChunk+1); err == nil {
		t.Fatal("a chunk of 1001 accepted")
	}
	if _, err := reconcileCalls("k", []Order{{RID: "o", User: "u", Qty: 0}}, false, false, 10); err == nil {
		t.Fatal("qty 0 accepted")
	}
}

func strs(a []interface{}) []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = x.(string)
	}
	return out
}

func contains(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestToFunctions(t *testing.T) {
	for _, c := range []struct {
		in   []interface{}
		want []interface{}
	}{
		{[]interface{}{"SECKILL.RESERVE", "k", "u1", "REQID", "o"}, []interface{}{"FCALL", "seckill_reserve", "1", "k", "u1", "REQID", "o"}},
		{[]interface{}{"SECKILL.INFO", "k", "FORMAT", "JSON"}, []interface{}{"FCALL_RO", "seckill_info", "1", "k", "FORMAT", "JSON"}},
		{[]interface{}{"SECKILL.GET", "k", "r"}, []interface{}{"FCALL_RO", "seckill_get", "1", "k", "r"}},
		{[]interface{}{"SECKILL.ENTRANTS", "k", "0"}, []interface{}{"FCALL_RO", "seckill_entrants", "1", "k", "0"}},
		{[]interface{}{"SECKILL.UNFENCE", "k"}, []interface{}{"FCALL", "seckill_unfence", "1", "k"}},
		{[]interface{}{"seckill.release", "k", "r"}, []interface{}{"FCALL", "seckill_release", "1", "k", "r"}},
		{[]interface{}{"GET", "k"}, []interface{}{"GET", "k"}},
		{[]interface{}{"SECKILL.INFO"}, []interface{}{"SECKILL.INFO"}},
	} {
		if got := toFunctions(c.in, nil); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%v -> %v", c.in, got)
		}
	}
	got := toFunctions([]interface{}{"SECKILL.RESERVE", "k", "u1"}, []string{"k:ev", "k:secret"})
	if want := []interface{}{"FCALL", "seckill_reserve", "3", "k", "k:ev", "k:secret", "u1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("with keys: %v", got)
	}
}

func TestInitKeysFromItsArguments(t *testing.T) {
	draw4 := []string{"s:secret", "s:entrants", "s:perm", "s:wait"}
	for _, c := range []struct {
		opts    []interface{}
		keys    []string
		replace bool
	}{
		{nil, nil, false},
		{[]interface{}{"STREAM", "s:ev"}, []string{"s:ev"}, false},
		{[]interface{}{"stream", "s:ev", "maxlen", "10", "REPLACE"}, []string{"s:ev"}, true},
		{[]interface{}{"END", "5", "DRAW"}, draw4, false},
		{[]interface{}{"END", "5", "draw", "BEACON", "nist", "Replace"}, draw4, true},
		{[]interface{}{"STREAM", "s:ev", "END", "5", "DRAW"}, append([]string{"s:ev"}, draw4...), false},
		// values that read like option words are values
		{[]interface{}{"STREAM", "draw", "MAXLEN", "5"}, []string{"draw"}, false},
		{[]interface{}{"END", "5", "DRAW", "BEACON", "REPLACE"}, draw4, false},
		{[]interface{}{"SPLIT", "r1", "2", "DRAW", "REPLACE", "STREAM", "s:ev"}, []string{"s:ev"}, false},
		{[]interface{}{"LIMIT", "2", "HOLD", "1", "START", "1", "TTL", "9", "SHARDS", "2", "FENCE", "STREAM", "s:ev"}, []string{"s:ev"}, false},
		// an unknown word or a bad SPLIT count ends the reading: the server refuses the call
		{[]interface{}{"BOGUS", "DRAW"}, nil, false},
		{[]interface{}{"SPLIT", "r1", "x", "DRAW"}, nil, false},
		{[]interface{}{"STREAM"}, nil, false},
	} {
		keys, replace := initKeys(append([]interface{}{"SECKILL.INIT", "s", "10"}, c.opts...))
		if !reflect.DeepEqual(keys, c.keys) || replace != c.replace {
			t.Fatalf("%v: %v %v", c.opts, keys, replace)
		}
	}
	// the INIT the client builds
	args, err := initArgs("s", 10, InitOptions{EndMs: 5, Stream: "s:ev", MaxLen: 3, Draw: true, Beacon: "b", Fence: true, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if keys, replace := initKeys(args); !reflect.DeepEqual(keys, append([]string{"s:ev"}, draw4...)) || !replace {
		t.Fatalf("initArgs: %v %v", keys, replace)
	}
}

func TestLibraryKeysProtocol(t *testing.T) {
	undeclared := &CommandError{Code: "ERR", Message: "ERR undeclared key s:ev: pass the keys FCALL_RO seckill_keys 1 s"}
	if !isUndeclared(undeclared) || !isUndeclared(fmt.Errorf("wrapped: %w", undeclared)) {
		t.Fatal("the refusal not recognized")
	}
	if isUndeclared(&CommandError{Code: "ERR", Message: "ERR QTY must be from 1"}) || isUndeclared(nil) {
		t.Fatal("another error taken for the refusal")
	}
	keys, err := parseKeys([]interface{}{"s:ev", "s:secret"})
	if err != nil || !reflect.DeepEqual(keys, []string{"s:ev", "s:secret"}) {
		t.Fatalf("parseKeys: %v %v", keys, err)
	}
	if keys, err := parseKeys([]interface{}{}); err != nil || len(keys) != 0 {
		t.Fatalf("parseKeys empty: %v %v", keys, err)
	}
	if _, err := parseKeys("OK"); err == nil {
		t.Fatal("parseKeys took a string")
	}
	if got := versionArgs(""); !reflect.DeepEqual(got, []interface{}{"FCALL_RO", "seckill_version", "1", "seckill:probe"}) {
		t.Fatalf("versionArgs: %v", got)
	}
	if got := versionArgs("s"); !reflect.DeepEqual(got, []interface{}{"FCALL_RO", "seckill_version", "1", "s"}) {
		t.Fatalf("versionArgs: %v", got)
	}
	if got := merged([]string{"a", "b"}, []string{"b", "c"}); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("merged: %v", got)
	}
	if got := replacedKeys("s", []string{"s:ev"}); got != nil {
		t.Fatalf("replacedKeys of a plain sale: %v", got)
	}
	if got := replacedKeys("s", []string{"s:ev", "s:entrants", "s:perm", "s:wait"}); !reflect.DeepEqual(got, drawKeys("s")) {
		t.Fatalf("replacedKeys of a draw sale: %v", got)
	}
}

func TestReconcileMerge(t *testing.T) {
	chunk := func(ok, unknown int64, ids ...interface{}) *Report {
		r, err := ParseReport([]interface{}{"total", int64(5), "remaining", int64(5), "pending", int64(0),
			"confirmed", int64(0), "invariant", "ok", "fence", "fenced", "orders_ok", ok, "orders_pending", int64(0),
			"orders_released", int64(0), "orders_unknown", unknown, "orders_conflict", int64(0),
			"orders_pending_ids", []interface{}{}, "orders_released_ids", []interface{}{},
			"orders_unknown_ids", ids, "orders_conflict_ids", []interface{}{}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	res := newReconcileResult()
	res.merge(chunk(3, 1, "a"))
	res.merge(chunk(0, 2, "b", "c"))
	if res.Calls != 2 || res.Counts["ok"] != 3 || res.Counts["unknown"] != 3 ||
		!reflect.DeepEqual(res.IDs["unknown"], []string{"a", "b", "c"}) || res.Clean() {
		t.Fatalf("%+v", res)
	}
	if len(res.Report.Extra) != 0 || res.Report.Fence != "fenced" {
		t.Fatalf("the report kept orders_* or lost the fence: %+v", res.Report)
	}
	if clean := newReconcileResult(); !clean.Clean() || len(clean.IDs["conflict"]) != 0 {
		t.Fatal("an empty result is not clean")
	}
}
