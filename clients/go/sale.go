package seckill

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Sale is one sale key. Every method is one command (Reconcile: one per
// chunk of the ledger) and returns the typed reply; error replies are
// *CommandError values (errors.Is(err, ErrArgument), ...).
type Sale struct {
	c   *Client
	key string
}

// Key is the sale's key.
func (s *Sale) Key() string { return s.key }

// Init is SECKILL.INIT: true when the sale was created (or replaced),
// false when it existed and nothing changed.
func (s *Sale) Init(ctx context.Context, total int64, o InitOptions) (bool, error) {
	args, err := initArgs(s.key, total, o)
	if err != nil {
		return false, err
	}
	v, err := s.c.do(ctx, args)
	if err != nil {
		return false, err
	}
	return ParseInit(v)
}

// Reserve is SECKILL.RESERVE. With the client's local sold-out flag held,
// it answers Reserved{SOLD_OUT, "", 0} without a round trip.
func (s *Sale) Reserve(ctx context.Context, user string, o ReserveOptions) (Reserved, error) {
	args, err := userArgs("SECKILL.RESERVE", s.key, user, o.Qty, o.ReqID)
	if err != nil {
		return Reserved{}, err
	}
	f := s.c.soldout
	if f == nil {
		return s.reserve(ctx, args)
	}
	if f.answers(s.key, o.ReqID) {
		return Reserved{Status: StatusSoldOut}, nil
	}
	t := f.ticket()
	r, err := s.reserve(ctx, args)
	if err != nil {
		if _, isReply := err.(*CommandError); !isReply {
			f.failed(s.key, t, o.ReqID)
		}
		return r, err
	}
	f.answered(o.ReqID)
	f.observe(s.key, t, r.Remaining, reserveSetsFlag(r))
	return r, nil
}

func (s *Sale) reserve(ctx context.Context, args []interface{}) (Reserved, error) {
	v, err := s.c.do(ctx, args)
	if err != nil {
		return Reserved{}, err
	}
	return ParseReserved(v)
}

// Release is SECKILL.RELEASE of the reservation rid.
func (s *Sale) Release(ctx context.Context, rid string) (Settled, error) {
	return s.settle(ctx, "SECKILL.RELEASE", rid, ParseReleased)
}

// Confirm is SECKILL.CONFIRM of the reservation rid.
func (s *Sale) Confirm(ctx context.Context, rid string) (Settled, error) {
	return s.settle(ctx, "SECKILL.CONFIRM", rid, ParseConfirmed)
}

func (s *Sale) settle(ctx context.Context, command, rid string, parse func(interface{}) (Settled, error)) (Settled, error) {
	if err := checkID("reservation id", rid); err != nil {
		return Settled{}, err
	}
	t := s.ticket()
	v, err := s.c.do(ctx, []interface{}{command, s.key, rid})
	if err != nil {
		return Settled{}, err
	}
	r, err := parse(v)
	if err == nil && r.Status != StatusNotFound {
		s.observe(t, r.Remaining)
	}
	return r, err
}

func (s *Sale) ticket() uint64 {
	if s.c.soldout == nil {
		return 0
	}
	return s.c.soldout.ticket()
}

// observe: a reply that shows the sale's remaining stock (a read).
func (s *Sale) observe(t uint64, remaining int64) {
	if s.c.soldout != nil {
		s.c.soldout.observe(s.key, t, remaining, remaining == 0)
	}
}

// Info is SECKILL.INFO: the report, or nil when the key does not exist.
func (s *Sale) Info(ctx context.Context) (*Report, error) {
	t := s.ticket()
	v, err := s.c.do(ctx, []interface{}{"SECKILL.INFO", s.key})
	if err != nil {
		return nil, err
	}
	r, err := ParseReport(v)
	if mode, _ := r.String("mode"); err == nil && r != nil && mode != "draw" {
		s.observe(t, r.Remaining) // a draw sale's RESERVE answers DRAW, never SOLD_OUT
	}
	return r, err
}

// InfoJSON is SECKILL.INFO ... FORMAT JSON as the server sent it (for a
// dashboard); "" when the key does not exist. ParseReport reads it.
func (s *Sale) InfoJSON(ctx context.Context) (string, error) {
	v, err := s.c.do(ctx, []interface{}{"SECKILL.INFO", s.key, "FORMAT", "JSON"})
	if err != nil || v == nil {
		return "", err
	}
	str, ok := v.(string)
	if !ok {
		return "", protoErr("SECKILL.INFO", "%s, not a JSON string", describe(v))
	}
	return str, nil
}

// Get is SECKILL.GET of the reservation rid; nil when unknown.
func (s *Sale) Get(ctx context.Context, rid string) (*Reservation, error) {
	if err := checkID("reservation id", rid); err != nil {
		return nil, err
	}
	v, err := s.c.do(ctx, []interface{}{"SECKILL.GET", s.key, rid})
	if err != nil {
		return nil, err
	}
	return ParseGet(v)
}

// Unfence is SECKILL.UNFENCE: UNFENCED (the fence is lifted), NOT_FENCED
// or NO_SALE. Lift it only after the order ledger was re-applied
// (Reconcile with Apply does both).
func (s *Sale) Unfence(ctx context.Context) (Status, error) {
	v, err := s.c.do(ctx, []interface{}{"SECKILL.UNFENCE", s.key})
	if err != nil {
		return "", err
	}
	return ParseUnfence(v)
}

// ReconcileOptions: Expire releases the holds that ran out first (with the
// first call); Apply confirms pending orders and takes stock again for
// released or unknown ones; ChunkSize rows per call, 1..MaxChunk (0:
// MaxChunk; with the Functions backend 100 to 200 keeps each call short,
// docs/managed-redis.md).
type ReconcileOptions struct {
	Expire    bool
	Apply     bool
	ChunkSize int
}

// Reconcile is SECKILL.RECONCILE over the ledger orders, in calls of at
// most ChunkSize rows; counts and ids summed over the calls. With Apply
// and a non-empty ledger, a sale the last report shows fenced is unfenced
// once every chunk was applied (Result.Unfenced), as the Python client's
// reconciler does. ErrSaleMissing when the key does not exist.
func (s *Sale) Reconcile(ctx context.Context, orders []Order, o ReconcileOptions) (*ReconcileResult, error) {
	size := o.ChunkSize
	if size == 0 {
		size = MaxChunk
	}
	calls, err := reconcileCalls(s.key, orders, o.Expire, o.Apply, size)
	if err != nil {
		return nil, err
	}
	res := newReconcileResult()
	for _, args := range calls {
		v, err := s.c.do(ctx, args)
		if err != nil {
			return res, err
		}
		r, err := ParseReport(v)
		if err != nil {
			return res, err
		}
		if r == nil {
			return res, ErrSaleMissing
		}
		res.merge(r)
	}
	if o.Apply && len(orders) > 0 && res.Report.Fence == "fenced" {
		if res.Unfenced, err = s.Unfence(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

func newReconcileResult() *ReconcileResult {
	r := &ReconcileResult{Counts: map[string]int64{}, IDs: map[string][]string{}}
	for _, c := range OrderClasses {
		r.Counts[c] = 0
		if c != "ok" {
			r.IDs[c] = []string{}
		}
	}
	return r
}

// merge adds one call's report.
func (r *ReconcileResult) merge(rep *Report) {
	r.Calls++
	for _, c := range OrderClasses {
		n, _ := rep.Int("orders_" + c)
		r.Counts[c] += n
		if c != "ok" {
			r.IDs[c] = append(r.IDs[c], rep.IDs("orders_"+c+"_ids")...)
		}
	}
	for name := range rep.Extra {
		if strings.HasPrefix(name, "orders_") {
			delete(rep.Extra, name)
		}
	}
	r.Report = rep
}

// Enter is SECKILL.ENTER (a draw sale's registration).
func (s *Sale) Enter(ctx context.Context, user string, o EnterOptions) (Entered, error) {
	args, err := userArgs("SECKILL.ENTER", s.key, user, o.Qty, o.ReqID)
	if err != nil {
		return Entered{}, err
	}
	v, err := s.c.do(ctx, args)
	if err != nil {
		return Entered{}, err
	}
	return ParseEntered(v)
}

// Draw is one SECKILL.DRAW of at most count (1..1000) winners; call it
// until LeftToDraw is 0. A sale that declared a beacon (InitOptions.Beacon)
// needs DrawBeacon for its first DRAW.
func (s *Sale) Draw(ctx context.Context, count int) (Drawn, error) {
	return s.DrawBeacon(ctx, count, "")
}

// DrawBeacon is SECKILL.DRAW key COUNT count BEACON value: the public value
// (1 to MaxBeaconValue bytes) the sale's declared beacon took, given to the
// first DRAW (later calls may repeat it or leave it out, "" sends no
// BEACON). The server refuses it on a sale that declared no beacon
// (docs/draw-sales.md).
func (s *Sale) DrawBeacon(ctx context.Context, count int, value string) (Drawn, error) {
	args, err := drawArgs(s.key, count, value)
	if err != nil {
		return Drawn{}, err
	}
	v, err := s.c.do(ctx, args)
	if err != nil {
		return Drawn{}, err
	}
	return ParseDrawn(v)
}

// Entrants is one SECKILL.ENTRANTS page from cursor ("0" first) of at most
// count (1..1000) entrants; the page's Cursor "0" ends the walk.
func (s *Sale) Entrants(ctx context.Context, cursor string, count int) (EntrantsPage, error) {
	if count < 1 || count > MaxDrawCount {
		return EntrantsPage{}, fmt.Errorf("seckill: ENTRANTS COUNT must be 1..%d, got %d", MaxDrawCount, count)
	}
	v, err := s.c.do(ctx, []interface{}{"SECKILL.ENTRANTS", s.key, cursor, "COUNT", strconv.Itoa(count)})
	if err != nil {
		return EntrantsPage{}, err
	}
	return ParseEntrants(v)
}
