package seckill

import (
	"errors"
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

// command: "RESERVE" for SECKILL.RESERVE key ...; "" for any other
// command (or a SECKILL one without a key).
func command(args []interface{}) string {
	if len(args) < 2 {
		return ""
	}
	name, ok := args[0].(string)
	if !ok || !strings.HasPrefix(strings.ToUpper(name), "SECKILL.") {
		return ""
	}
	return strings.ToUpper(name[len("SECKILL."):])
}

// toFunctions: SECKILL.X key args... as the Functions library takes it,
// FCALL seckill_x n key keys... args... (FCALL_RO for INFO, GET,
// ENTRANTS), keys the other keys the call touches (docs/managed-redis.md,
// "Calling it"); the sale key comes first, which is what a cluster client
// routes by. Other commands unchanged.
func toFunctions(args []interface{}, keys []string) []interface{} {
	sub := command(args)
	if sub == "" {
		return args
	}
	call := "FCALL"
	if readOnly[sub] {
		call = "FCALL_RO"
	}
	out := make([]interface{}, 0, len(args)+len(keys)+2)
	out = append(out, call, "seckill_"+strings.ToLower(sub), strconv.Itoa(1+len(keys)), args[1])
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args[2:]...)
}

// saleKeyOnly: the functions that touch the sale key alone, called
// without the list.
var saleKeyOnly = map[string]bool{"INFO": true, "GET": true}

// ProbeKey is the key seckill_version is called with when no sale key is
// at hand: the function reads no key, the key only routes the call (and
// keeps it acceptable to services that refuse a call without one).
const ProbeKey = "seckill:probe"

// drawKeys: a draw sale's own keys, key:secret key:entrants key:perm key:wait.
func drawKeys(key string) []string {
	return []string{key + ":secret", key + ":entrants", key + ":perm", key + ":wait"}
}

func word(v interface{}) string {
	s, _ := v.(string)
	return strings.ToUpper(s)
}

// initKeys reads SECKILL.INIT key total options...: the keys INIT
// declares (the STREAM key, then the four draw keys with DRAW) and
// whether REPLACE is among the options, which then adds the keys
// seckill_keys lists for the sale replaced. Options are case-insensitive
// words and their values are skipped as the library reads them (STREAM
// skey [MAXLEN n], SPLIT round n peer..., BEACON name), so a value that
// reads like a word is not taken for one; an unknown word ends the
// reading (the server refuses the call, naming it).
func initKeys(args []interface{}) (keys []string, replace bool) {
	stream, draw := "", false
read:
	for i := 3; i < len(args); {
		switch w := word(args[i]); w {
		case "SHARDS", "LIMIT", "HOLD", "START", "END", "TTL", "BEACON":
			i += 2
		case "STREAM":
			if i+1 < len(args) && stream == "" {
				stream, _ = args[i+1].(string)
			}
			i += 2
			if i < len(args) && word(args[i]) == "MAXLEN" {
				i += 2
			}
		case "SPLIT":
			n := -1
			if i+2 < len(args) {
				if v, err := strconv.Atoi(fmt.Sprint(args[i+2])); err == nil {
					n = v
				}
			}
			if n < 0 {
				break read
			}
			i += 3 + n
		case "DRAW", "FENCE", "REPLACE":
			draw, replace = draw || w == "DRAW", replace || w == "REPLACE"
			i++
		default:
			break read
		}
	}
	if stream != "" {
		keys = append(keys, stream)
	}
	if key, ok := args[1].(string); ok && draw {
		keys = append(keys, drawKeys(key)...)
	}
	return keys, replace
}

// replacedKeys: what INIT ... REPLACE declares beyond the list
// seckill_keys gave for the sale it replaces: a draw sale's four keys (it
// deletes them), the secret among them, which the list leaves out (only
// INIT and DRAW touch it).
func replacedKeys(key string, listed []string) []string {
	four := drawKeys(key)
	for _, k := range listed {
		if k == four[1] {
			return four
		}
	}
	return nil
}

// merged: the lists' keys in order, each once.
func merged(lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, k := range l {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// keysArgs asks the library for the keys calls on the sale at key declare.
func keysArgs(key string) []interface{} {
	return []interface{}{"FCALL_RO", "seckill_keys", "1", key}
}

// parseKeys reads seckill_keys's reply: an array of keys.
func parseKeys(v interface{}) ([]string, error) {
	arr, ok := v.([]interface{})
	if !ok && v != nil {
		return nil, protoErr("FCALL_RO seckill_keys", "%s, not an array of keys", describe(v))
	}
	out := make([]string, 0, len(arr))
	for _, k := range arr {
		s, ok := asString(k)
		if !ok {
			return nil, protoErr("FCALL_RO seckill_keys", "%s among the keys", describe(k))
		}
		out = append(out, s)
	}
	return out, nil
}

// isUndeclared: the library refused a key the call was not given ("ERR
// undeclared key ..."): nothing changed, so the call may go again with the
// list asked again.
func isUndeclared(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && strings.HasPrefix(ce.Message, "ERR undeclared key")
}

// versionArgs asks the library's version with one key: the sale key at
// hand, else ProbeKey.
func versionArgs(key string) []interface{} {
	if key == "" {
		key = ProbeKey
	}
	return []interface{}{"FCALL_RO", "seckill_version", "1", key}
}
