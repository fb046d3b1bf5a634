package seckill

// Status is a status word of a reply: RESERVE's, RELEASE's, CONFIRM's,
// ENTER's or UNFENCE's.
type Status string

// RESERVE statuses, in the order the server checks them.
const (
	StatusNoSale     Status = "NO_SALE"
	StatusDraw       Status = "DRAW" // a draw sale refuses RESERVE
	StatusFenced     Status = "FENCED"
	StatusDuplicate  Status = "DUPLICATE"
	StatusNotStarted Status = "NOT_STARTED"
	StatusEnded      Status = "ENDED"
	StatusLimit      Status = "LIMIT"
	StatusSoldOut    Status = "SOLD_OUT"
	StatusReserved   Status = "RESERVED"
)

// RELEASE and CONFIRM statuses.
const (
	StatusReleased         Status = "RELEASED"
	StatusAlreadyReleased  Status = "ALREADY_RELEASED"
	StatusConfirmed        Status = "CONFIRMED"
	StatusAlreadyConfirmed Status = "ALREADY_CONFIRMED"
	StatusNotFound         Status = "NOT_FOUND"
)

// ENTER statuses (draw sales; NO_SALE, FENCED, NOT_STARTED and ENDED as above).
const (
	StatusAlreadyEntered Status = "ALREADY_ENTERED"
	StatusDrawn          Status = "DRAWN"
	StatusEntered        Status = "ENTERED"
)

// UNFENCE statuses (NO_SALE as above).
const (
	StatusUnfenced  Status = "UNFENCED"
	StatusNotFenced Status = "NOT_FENCED"
)

var (
	reserveStatuses = statusSet(StatusNoSale, StatusDraw, StatusFenced, StatusDuplicate,
		StatusNotStarted, StatusEnded, StatusLimit, StatusSoldOut, StatusReserved)
	releaseStatuses = statusSet(StatusReleased, StatusAlreadyReleased, StatusConfirmed, StatusNotFound)
	confirmStatuses = statusSet(StatusConfirmed, StatusAlreadyConfirmed, StatusReleased, StatusNotFound)
	enterStatuses   = statusSet(StatusNoSale, StatusFenced, StatusAlreadyEntered, StatusDrawn,
		StatusNotStarted, StatusEnded, StatusEntered)
	unfenceStatuses = statusSet(StatusUnfenced, StatusNotFenced, StatusNoSale)
)

func statusSet(s ...Status) map[Status]bool {
	m := make(map[Status]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

// Entrant results in ENTRANTS.
const (
	ResultEntered  = "entered"  // not drawn yet, or on the waitlist
	ResultDrawn    = "drawn"    // won in the draw
	ResultPromoted = "promoted" // won from the waitlist
)
