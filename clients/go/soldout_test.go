package seckill

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFlag() (*soldOut, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	return newSoldOut(0, c.now), c
}
func reply(s *soldOut, key string, rem int64, sold bool) { s.observe(key, s.ticket(), rem, sold) }

func TestSoldOutSetOnlyByRedisAndLapses(t *testing.T) {
	s, clock := newFlag()
	if s.answers("k", "") {
		t.Fatal("held before any reply")
	}
	reply(s, "k", 0, true) // Redis answered SOLD_OUT
	if !s.answers("k", "") || !s.answers("k", "o1") || s.answers("other", "") {
		t.Fatal("not held for k alone after SOLD_OUT")
	}
	clock.add(MaxSoldOutLapse - time.Millisecond)
	if !s.answers("k", "") {
		t.Fatal("lapsed early")
	}
	clock.add(time.Millisecond)
	if s.answers("k", "") {
		t.Fatal("held past the lapse: a restock would not be seen")
	}
}

func TestSoldOutClearedByUnits(t *testing.T) {
	s, _ := newFlag()
	reply(s, "k", 0, true)
	reply(s, "k", 3, false) // a RELEASE gave units back
	if s.answers("k", "") {
		t.Fatal("held after a reply with units left")
	}
	reply(s, "k", 0, true)
	reply(s, "k", 0, false) // NO_SALE, ENDED, FENCED, ...: the local answer would hide them
	if s.answers("k", "") {
		t.Fatal("held after a refusal that is not SOLD_OUT")
	}
}

func TestSoldOutLaterSentReplyWins(t *testing.T) {
	s, _ := newFlag()
	early, late := s.ticket(), s.ticket()
	s.observe("k", late, 5, false) // sent last, answered first: units left
	s.observe("k", early, 0, true) // an older SOLD_OUT arriving late
	if s.answers("k", "") {
		t.Fatal("an older reply overrode a newer one")
	}
	s.observe("k", s.ticket(), 0, true)
	if !s.answers("k", "") {
		t.Fatal("a newer SOLD_OUT did not set it")
	}
}

func TestSoldOutRetryOfLostReplyReachesRedis(t *testing.T) {
	s, _ := newFlag()
	reply(s, "k", 0, true)
	s.failed("k", s.ticket(), "o1") // no reply: the unit may be taken
	if s.answers("k", "") {
		t.Fatal("a call without a reply left the flag held")
	}
	reply(s, "k", 0, true)
	if s.answers("k", "o1") {
		t.Fatal("the retry of o1 was answered locally: it would miss its DUPLICATE")
	}
	if !s.answers("k", "o2") {
		t.Fatal("another REQID bypassed the flag")
	}
	s.answered("o1")
	if !s.answers("k", "o1") {
		t.Fatal("o1 still bypasses after its reply came")
	}
}

func TestSoldOutRetryMemoryBounded(t *testing.T) {
	s, _ := newFlag()
	s.failed("k", s.ticket(), "first")
	for i := 0; i < maxRetrying; i++ {
		s.failed("k", s.ticket(), "o"+i64(int64(i)))
	}
	if len(s.retrying) != maxRetrying || len(s.order) != maxRetrying {
		t.Fatalf("%d remembered, %d in order", len(s.retrying), len(s.order))
	}
	if _, ok := s.retrying["first"]; ok {
		t.Fatal("the oldest REQID was not forgotten")
	}
}

func TestSoldOutLapseCapped(t *testing.T) {
	for _, in := range []time.Duration{0, -1, time.Hour} {
		if s := newSoldOut(in, time.Now); s.lapse != MaxSoldOutLapse {
			t.Fatalf("lapse %v -> %v", in, s.lapse)
		}
	}
	if s := newSoldOut(100*time.Millisecond, time.Now); s.lapse != 100*time.Millisecond {
		t.Fatal("a shorter lapse was not kept")
	}
}

func TestReserveSetsFlag(t *testing.T) {
	for _, c := range []struct {
		r    Reserved
		sets bool
	}{
		{Reserved{Status: StatusSoldOut}, true},
		{Reserved{Status: StatusSoldOut, Remaining: 1}, false}, // QTY 2 with 1 left: a QTY 1 may pass
		{Reserved{Status: StatusReserved, ID: "x"}, true},      // took the last unit
		{Reserved{Status: StatusReserved, ID: "x", Remaining: 4}, false},
		{Reserved{Status: StatusNoSale}, false},
		{Reserved{Status: StatusEnded}, false},
		{Reserved{Status: StatusFenced}, false},
		{Reserved{Status: StatusDraw}, false},
	} {
		if got := reserveSetsFlag(c.r); got != c.sets {
			t.Fatalf("%+v: %v", c.r, got)
		}
	}
}
