package seckill

import (
	"sync"
	"time"
)

// MaxSoldOutLapse bounds how long a local sold-out flag holds without
// Redis being asked again, so a restock (a release, an expired hold, a
// REPLACE) is seen within it.
const MaxSoldOutLapse = 500 * time.Millisecond

// maxRetrying bounds the REQIDs remembered as "sent, no reply".
const maxRetrying = 10_000

// soldOut is the local sold-out flag of a Client's sales. Only Redis sets
// it: a RESERVE answered SOLD_OUT with nothing left, or a reply (a
// RESERVE, RELEASE, CONFIRM, INFO) showing remaining 0. Any reply showing
// units left clears it, so do NO_SALE, NOT_STARTED, ENDED, FENCED and DRAW
// (the local answer would hide them) and a call that failed without a
// reply. It lapses after lapse (at most MaxSoldOutLapse). No pub/sub
// message is read at all.
//
// A reply can be older than another: each call takes a ticket before it is
// sent, and a reply changes a flag only when no later-sent call's reply has
// changed it since.
type soldOut struct {
	mu       sync.Mutex
	lapse    time.Duration
	now      func() time.Time
	next     uint64
	flags    map[string]flag
	retrying map[string]uint64 // REQID -> the ticket of its failed call
	order    []remembered      // retrying's entries, oldest first
}

type remembered struct {
	reqID  string
	ticket uint64
}

type flag struct {
	until  time.Time // held while now < until
	ticket uint64    // the call whose reply last changed it
}

func newSoldOut(lapse time.Duration, now func() time.Time) *soldOut {
	if lapse <= 0 || lapse > MaxSoldOutLapse {
		lapse = MaxSoldOutLapse
	}
	return &soldOut{lapse: lapse, now: now, flags: map[string]flag{}, retrying: map[string]uint64{}}
}

// ticket is taken before a call is sent.
func (s *soldOut) ticket() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return s.next
}

// answers: whether a RESERVE of key (with reqID, maybe "") is answered
// locally. The retry of a REQID whose call got no reply goes to Redis: its
// answer may be DUPLICATE, with the reservation the lost reply held.
func (s *soldOut) answers(key, reqID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.flags[key]
	if !ok || !s.now().Before(f.until) {
		return false
	}
	_, retry := s.retrying[reqID]
	return reqID == "" || !retry
}

// observe applies a reply of the call that took ticket t.
func (s *soldOut) observe(key string, t uint64, remaining int64, soldOut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.flags[key]
	if ok && f.ticket > t {
		return // a later-sent call's reply already spoke
	}
	if soldOut {
		s.flags[key] = flag{until: s.now().Add(s.lapse), ticket: t}
	} else if remaining > 0 || ok {
		s.flags[key] = flag{ticket: t} // cleared; the ticket stays to order later replies
	}
}

// failed: the call of ticket t got no reply. Its flag clears, and a REQID
// is remembered so its retry reaches Redis.
func (s *soldOut) failed(key string, t uint64, reqID string) {
	s.observe(key, t, 0, false)
	if reqID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retrying[reqID] = t
	s.order = append(s.order, remembered{reqID, t})
	if len(s.order) > maxRetrying {
		old := s.order[0]
		if s.retrying[old.reqID] == old.ticket { // not remembered again since
			delete(s.retrying, old.reqID)
		}
		s.order = s.order[1:]
	}
}

// answered: a REQID's call got a reply; its later calls may be local again.
func (s *soldOut) answered(reqID string) {
	if reqID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.retrying, reqID) // its entry in order is dropped when it comes up
}

// reserveSetsFlag: whether a RESERVE reply shows the sale sold out (0
// left); every other reply clears the flag, NO_SALE, NOT_STARTED, ENDED,
// FENCED and DRAW included.
func reserveSetsFlag(r Reserved) bool {
	switch r.Status {
	case StatusSoldOut, StatusReserved, StatusDuplicate, StatusLimit:
		return r.Remaining == 0
	}
	return false
}
