package seckill

// Reserved is RESERVE's reply: [status, reservation id or nil, remaining].
type Reserved struct {
	Status Status
	// ID: the new reservation (RESERVED), the one this REQID reserved
	// before (DUPLICATE), or the user's latest live one (LIMIT); "" for the
	// refusals, which carry none.
	ID        string
	Remaining int64
}

// OK is true when the caller holds the reservation ID: a new one, or the
// retry of one (DUPLICATE).
func (r Reserved) OK() bool { return r.Status == StatusReserved || r.Status == StatusDuplicate }

// Settled is RELEASE's or CONFIRM's reply: [status, remaining].
type Settled struct {
	Status    Status
	Remaining int64
}

// Report is INFO's and RECONCILE's report. The fields every sale reports
// are typed; every other one (a split sale's round, sent, received and
// peers, a draw sale's fields, RECONCILE's orders_*) is in Extra, with
// integers as int64, strings as string, arrays as []interface{} of those
// and nil for a nil.
type Report struct {
	Total        int64
	Remaining    int64
	Pending      int64
	Confirmed    int64
	Released     int64
	Expired      int64
	Buyers       int64
	Reservations int64
	Shards       []int64
	Invariant    string // "ok" when remaining + pending + confirmed adds up
	// Fence is "clear" or "fenced" for a sale created with FENCE, "" for
	// one without.
	Fence string
	Extra map[string]interface{}
}

// Reservation is GET's reply.
type Reservation struct {
	User       string
	Qty        int64
	State      string // pending, confirmed, released, expired
	CreatedMs  int64
	DeadlineMs int64 // 0: no hold
}

// Order is one row of the order ledger RECONCILE compares with the sale.
type Order struct {
	RID  string
	User string
	Qty  int64
}

// Order classes of RECONCILE ... ORDERS.
var OrderClasses = []string{"ok", "pending", "released", "unknown", "conflict"}

// ReconcileResult is RECONCILE over every chunk of a ledger: class counts
// and ids summed (ids for every class but ok), Report the sale as the last
// call left it (without the orders_* fields).
type ReconcileResult struct {
	Counts map[string]int64
	IDs    map[string][]string
	Report *Report
	Calls  int
	// Unfenced is UNFENCE's status when an APPLY run found the sale fenced
	// and lifted the fence, "" when it did not call UNFENCE.
	Unfenced Status
}

// Clean is true when every order row is ok (confirmed in the sale).
func (r *ReconcileResult) Clean() bool {
	for _, c := range OrderClasses[1:] {
		if r.Counts[c] != 0 {
			return false
		}
	}
	return true
}

// Entered is ENTER's reply: [status, entrants].
type Entered struct {
	Status   Status
	Entrants int64
}

// OK is true when the user is an entrant (new, or the retry of an entry).
func (e Entered) OK() bool { return e.Status == StatusEntered || e.Status == StatusAlreadyEntered }

// Drawn is DRAW's reply: [drawn, remaining, left_to_draw].
type Drawn struct {
	Drawn      int64
	Remaining  int64
	LeftToDraw int64
}

// Entrant is one entrant as ENTRANTS lists it.
type Entrant struct {
	User   string
	Qty    int64
	Result string // ResultEntered, ResultDrawn, ResultPromoted
}

// EntrantsPage is one ENTRANTS reply; Cursor "0" ends the walk.
type EntrantsPage struct {
	Cursor   string
	Entrants []Entrant
}
