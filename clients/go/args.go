package seckill

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxIDBytes bounds user ids and reservation ids (1 to 256 bytes).
const MaxIDBytes = 256

// MaxChunk is the most order rows one RECONCILE call takes.
const MaxChunk = 1000

// MaxBeaconName and MaxBeaconValue bound a draw sale's beacon: INIT's
// BEACON name (1 to 256 bytes) and DRAW's BEACON value (1 to 1024 bytes).
const (
	MaxBeaconName  = 256
	MaxBeaconValue = 1024
)

// MaxDrawCount bounds DRAW's and ENTRANTS' COUNT (1 to 1000).
const MaxDrawCount = 1000

// InitOptions are INIT's options; a zero field is not sent (the server's
// default applies). Range checks stay with the server, which names the
// bad argument in its error.
type InitOptions struct {
	Shards     int64
	Limit      int64
	HoldMs     int64 // 0: holds never run out
	StartMs    int64 // unix ms by the server's clock
	EndMs      int64
	TTLSeconds int64
	Stream     string // the reservation stream key (same hash tag as the sale)
	MaxLen     int64  // with Stream
	Split      *Split // a key of a split sale (docs/cluster.md)
	Draw       bool   // a draw sale: EndMs is required
	// Beacon: a draw sale's declared beacon (INIT's DRAW BEACON name, 1 to
	// MaxBeaconName bytes), the public value its first DRAW must take
	// (Sale.DrawBeacon); "" declares none. Only with Draw.
	Beacon  string
	Fence   bool // refuse to sell after a failover until UNFENCE
	Replace bool // start a new round over an existing sale
}

// Split is INIT's SPLIT round n peer ...: the round and the declared peers.
type Split struct {
	Round string
	Peers []string
}

// ReserveOptions are RESERVE's options. Send a ReqID (your order id) with
// every RESERVE: any retry then answers DUPLICATE with the same id.
type ReserveOptions struct {
	Qty   int64 // 0 or 1: one unit
	ReqID string
}

// EnterOptions are ENTER's options (draw sales).
type EnterOptions struct {
	Qty   int64
	ReqID string
}

func checkID(what, id string) error {
	if len(id) < 1 || len(id) > MaxIDBytes {
		return fmt.Errorf("seckill: %s must be 1 to %d bytes, got %d", what, MaxIDBytes, len(id))
	}
	return nil
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func initArgs(key string, total int64, o InitOptions) ([]interface{}, error) {
	if o.Draw && o.EndMs == 0 {
		return nil, fmt.Errorf("seckill: a draw sale needs EndMs, the end of registration")
	}
	if o.Beacon != "" && !o.Draw {
		return nil, fmt.Errorf("seckill: a Beacon needs a draw sale (Draw)")
	}
	if len(o.Beacon) > MaxBeaconName {
		return nil, fmt.Errorf("seckill: BEACON name must be 1 to %d bytes, got %d", MaxBeaconName, len(o.Beacon))
	}
	if o.MaxLen != 0 && o.Stream == "" {
		return nil, fmt.Errorf("seckill: MaxLen needs a Stream")
	}
	args := []interface{}{"SECKILL.INIT", key, i64(total)}
	for _, opt := range []struct {
		name string
		v    int64
	}{{"SHARDS", o.Shards}, {"LIMIT", o.Limit}, {"HOLD", o.HoldMs}, {"START", o.StartMs},
		{"END", o.EndMs}, {"TTL", o.TTLSeconds}} {
		if opt.v != 0 {
			args = append(args, opt.name, i64(opt.v))
		}
	}
	if o.Stream != "" {
		args = append(args, "STREAM", o.Stream)
		if o.MaxLen != 0 {
			args = append(args, "MAXLEN", i64(o.MaxLen))
		}
	}
	if o.Split != nil {
		args = append(args, "SPLIT", o.Split.Round, strconv.Itoa(len(o.Split.Peers)))
		for _, p := range o.Split.Peers {
			args = append(args, p)
		}
	}
	if o.Draw {
		args = append(args, "DRAW")
		if o.Beacon != "" {
			args = append(args, "BEACON", o.Beacon)
		}
	}
	for _, flag := range []struct {
		name string
		on   bool
	}{{"FENCE", o.Fence}, {"REPLACE", o.Replace}} {
		if flag.on {
			args = append(args, flag.name)
		}
	}
	return args, nil
}

// drawArgs: SECKILL.DRAW key COUNT n [BEACON value]; beacon "" sends no
// BEACON.
func drawArgs(key string, count int, beacon string) ([]interface{}, error) {
	if count < 1 || count > MaxDrawCount {
		return nil, fmt.Errorf("seckill: DRAW COUNT must be 1..%d, got %d", MaxDrawCount, count)
	}
	args := []interface{}{"SECKILL.DRAW", key, "COUNT", strconv.Itoa(count)}
	if beacon != "" {
		if len(beacon) > MaxBeaconValue {
			return nil, fmt.Errorf("seckill: BEACON value must be 1 to %d bytes, got %d", MaxBeaconValue, len(beacon))
		}
		args = append(args, "BEACON", beacon)
	}
	return args, nil
}

// userArgs: COMMAND key user [QTY n] [REQID id], shared by RESERVE and ENTER.
func userArgs(command, key, user string, qty int64, reqID string) ([]interface{}, error) {
	if err := checkID("user", user); err != nil {
		return nil, err
	}
	args := []interface{}{command, key, user}
	if qty != 0 && qty != 1 {
		args = append(args, "QTY", i64(qty))
	}
	if reqID != "" {
		if err := checkID("reqid", reqID); err != nil {
			return nil, err
		}
		args = append(args, "REQID", reqID)
	}
	return args, nil
}

// chunks splits a ledger into runs of at most size rows (1..MaxChunk).
func chunks(orders []Order, size int) ([][]Order, error) {
	if size < 1 || size > MaxChunk {
		return nil, fmt.Errorf("seckill: chunk size must be 1 to %d, got %d", MaxChunk, size)
	}
	var out [][]Order
	for len(orders) > 0 {
		n := min(size, len(orders))
		out = append(out, orders[:n])
		orders = orders[n:]
	}
	return out, nil
}

func checkOrder(o Order) error {
	if o.Qty < 1 {
		return fmt.Errorf("seckill: order %q: qty must be at least 1", o.RID)
	}
	if err := checkID("reservation id", o.RID); err != nil {
		return err
	}
	return checkID("user", o.User)
}

func reconcileArgs(key string, chunk []Order, expire, apply bool) []interface{} {
	args := []interface{}{"SECKILL.RECONCILE", key}
	if expire {
		args = append(args, "EXPIRE")
	}
	if len(chunk) > 0 {
		args = append(args, "ORDERS", strconv.Itoa(len(chunk)))
		for _, o := range chunk {
			args = append(args, o.RID, o.User, i64(o.Qty))
		}
	}
	if apply {
		args = append(args, "APPLY")
	}
	return args
}

// reconcileCalls: one call per chunk, EXPIRE with the first only (later
// calls see the same clock), APPLY with every one; an empty ledger is one
// call without ORDERS or APPLY (the report alone, as the Python client).
func reconcileCalls(key string, orders []Order, expire, apply bool, size int) ([][]interface{}, error) {
	for _, o := range orders {
		if err := checkOrder(o); err != nil {
			return nil, err
		}
	}
	cs, err := chunks(orders, size)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return [][]interface{}{reconcileArgs(key, nil, expire, false)}, nil
	}
	calls := make([][]interface{}, len(cs))
	for i, c := range cs {
		calls[i] = reconcileArgs(key, c, expire && i == 0, apply)
	}
	return calls, nil
}

// readOnly: the library's no-writes functions, called with FCALL_RO (they
// run on replicas, and ACLs see a read).
var readOnly = map[string]bool{"INFO": true, "GET": true, "ENTRANTS": true}

// toFunctions: SECKILL.X key args... as the Functions library takes it,
// FCALL seckill_x 1 key args... (FCALL_RO for INFO, GET, ENTRANTS). The
// library takes exactly one key, the sale's (its stream and a draw sale's
// keys share the sale's hash tag); numkeys 1 makes the sale key FCALL's
// key, which is what a cluster client routes by. Other commands unchanged.
func toFunctions(args []interface{}) []interface{} {
	if len(args) < 2 {
		return args
	}
	name, ok := args[0].(string)
	if !ok || !strings.HasPrefix(strings.ToUpper(name), "SECKILL.") {
		return args
	}
	sub := strings.ToUpper(name[len("SECKILL."):])
	call := "FCALL"
	if readOnly[sub] {
		call = "FCALL_RO"
	}
	out := make([]interface{}, 0, len(args)+2)
	out = append(out, call, "seckill_"+strings.ToLower(sub), "1")
	return append(out, args[1:]...)
}
