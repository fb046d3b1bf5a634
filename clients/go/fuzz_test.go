package seckill

import (
	"errors"
	"testing"
)

// The fuzz targets: a reply of any shape, decoded from RESP bytes, goes
// through every parser; they must not panic, and a parser that accepts it
// must give a value consistent with the reply. The corpus starts from the
// shared vectors' real replies. `make go-fuzz` runs each for a bounded time.

func seedRaw(f *testing.F) {
	for _, cases := range loadVectors(f) {
		for _, c := range cases {
			f.Add([]byte(c.Raw))
		}
	}
}

func FuzzParseReplies(f *testing.F) {
	seedRaw(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decodeRESP(raw)
		if err != nil {
			return
		}
		if r, err := ParseReserved(v); err == nil && !reserveStatuses[r.Status] {
			t.Fatalf("accepted status %q", r.Status)
		}
		if r, err := ParseReleased(v); err == nil && !releaseStatuses[r.Status] {
			t.Fatalf("accepted status %q", r.Status)
		}
		_, _ = ParseConfirmed(v)
		_, _ = ParseEntered(v)
		_, _ = ParseDrawn(v)
		_, _ = ParseInit(v)
		_, _ = ParseUnfence(v)
		if p, err := ParseEntrants(v); err == nil {
			for _, e := range p.Entrants {
				if e.Result != ResultEntered && e.Result != ResultDrawn && e.Result != ResultPromoted {
					t.Fatalf("accepted result %q", e.Result)
				}
			}
		}
		checkReport(t, v)
		if g, err := ParseGet(v); err == nil && g == nil && v != nil {
			t.Fatalf("a non-nil reply %#v gave no reservation and no error", v)
		}
		_ = wrapError(errorOf(v))
	})
}

// FuzzParseReportJSON: FORMAT JSON strings.
func FuzzParseReportJSON(f *testing.F) {
	for _, cases := range loadVectors(f) {
		for _, c := range cases {
			if v, err := decodeRESP([]byte(c.Raw)); err == nil {
				if s, ok := v.(string); ok && len(s) > 0 && s[0] == '{' {
					f.Add(s)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkReport(t, s)
		_, _ = ParseGet(s)
	})
}

func checkReport(t *testing.T, v interface{}) {
	r, err := ParseReport(v)
	var pe *ProtocolError
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("not a ProtocolError: %v", err)
	}
	if err == nil && v != nil && r == nil {
		t.Fatalf("a non-nil reply %#v gave no report and no error", v)
	}
	if r != nil && (r.Extra == nil || r.Extra["total"] != nil || r.Extra["invariant"] != nil) {
		t.Fatalf("a fixed field in Extra, or no Extra: %#v", r)
	}
}

func errorOf(v interface{}) error {
	if e, ok := v.(replyError); ok {
		return e
	}
	return nil
}
