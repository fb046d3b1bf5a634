package seckill

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The contract against real servers, on both backends: the module on
// redis-server, and the Functions library on a plain redis-server.

type backendCase struct {
	name    string
	backend Backend
	srv     func(testing.TB) *server
	cmdstat func(command string) string // the commandstats entry a SECKILL.X lands in
}

var backends = []backendCase{
	{"module", BackendModule, moduleServer, func(c string) string { return "cmdstat_seckill." + c }},
	{"functions", BackendFunctions, libraryServer, func(c string) string {
		if c == "info" || c == "get" || c == "entrants" {
			return "cmdstat_fcall_ro"
		}
		return "cmdstat_fcall"
	}},
}

func eachBackend(t *testing.T, f func(t *testing.T, bc backendCase, rdb *redis.Client)) {
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			rdb := nodeClient(bc.srv(t))
			defer rdb.Close()
			f(t, bc, rdb)
		})
	}
}

func TestDetectsTheBackend(t *testing.T) {
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		for _, proto := range []int{2, 3} {
			r := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Protocol: proto})
			got, err := New(r, Options{}).Backend(context.Background())
			r.Close()
			if err != nil || got != bc.backend {
				t.Fatalf("RESP%d: %q, %v", proto, got, err)
			}
		}
	})
	plain := startServer(t, "")
	rdb := nodeClient(plain)
	defer rdb.Close()
	if _, err := New(rdb, Options{}).Sale("k").Info(context.Background()); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("a server with neither: %v", err)
	}
}

func TestReserveStatuses(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		for _, proto := range []int{2, 3} {
			r := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Protocol: proto})
			defer r.Close()
			c := New(r, Options{Backend: bc.backend})
			sale := c.Sale(uniq("sale:{res}"))
			created, err := sale.Init(ctx, 3, InitOptions{Limit: 2, HoldMs: 60000})
			if err != nil || !created {
				t.Fatalf("INIT: %v %v", created, err)
			}
			if again, err := sale.Init(ctx, 3, InitOptions{}); err != nil || again {
				t.Fatalf("INIT again: %v %v", again, err)
			}
			steps := []struct {
				user, reqid string
				want        Reserved
			}{
				{"u1", "o1", Reserved{StatusReserved, "o1", 2}},
				{"u1", "o1", Reserved{StatusDuplicate, "o1", 2}},
				{"u1", "o2", Reserved{StatusReserved, "o2", 1}},
				{"u1", "o3", Reserved{StatusLimit, "o2", 1}},
				{"u2", "o4", Reserved{StatusReserved, "o4", 0}},
				{"u3", "o5", Reserved{StatusSoldOut, "", 0}},
			}
			for _, s := range steps {
				got, err := sale.Reserve(ctx, s.user, ReserveOptions{ReqID: s.reqid})
				if err != nil || got != s.want {
					t.Fatalf("RESP%d RESERVE %s %s: %+v %v, want %+v", proto, s.user, s.reqid, got, err, s.want)
				}
			}
			if got, _ := c.Sale(uniq("sale:{none}")).Reserve(ctx, "u1", ReserveOptions{}); got.Status != StatusNoSale {
				t.Fatalf("missing key: %+v", got)
			}
		}
	})
}

func TestSettleInfoGet(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		c := New(rdb, Options{Backend: bc.backend})
		sale := c.Sale(uniq("sale:{set}"))
		must(t, errOf(sale.Init(ctx, 5, InitOptions{Shards: 2, HoldMs: 60000})))
		for _, u := range []string{"a", "b"} {
			must(t, errOf(sale.Reserve(ctx, u, ReserveOptions{ReqID: "r-" + u})))
		}
		for _, s := range []struct {
			release bool
			rid     string
			want    Settled
		}{
			{true, "r-a", Settled{StatusReleased, 4}}, {true, "r-a", Settled{StatusAlreadyReleased, 4}},
			{false, "r-b", Settled{StatusConfirmed, 4}}, {false, "r-b", Settled{StatusAlreadyConfirmed, 4}},
			{true, "r-b", Settled{StatusConfirmed, 4}}, {false, "r-a", Settled{StatusReleased, 4}},
			{true, "nope", Settled{StatusNotFound, 4}},
		} {
			op := sale.Confirm
			if s.release {
				op = sale.Release
			}
			if got, err := op(ctx, s.rid); err != nil || got != s.want {
				t.Fatalf("%v %s: %+v %v, want %+v", s.release, s.rid, got, err, s.want)
			}
		}
		info, err := sale.Info(ctx)
		if err != nil || info.Total != 5 || info.Remaining != 4 || info.Confirmed != 1 || info.Released != 1 ||
			info.Invariant != "ok" || len(info.Shards) != 2 || info.Shards[0]+info.Shards[1] != 4 {
			t.Fatalf("INFO %+v %v", info, err)
		}
		js, err := sale.InfoJSON(ctx)
		fromJSON, err2 := ParseReport(js)
		if err != nil || err2 != nil || !reflect.DeepEqual(fromJSON, info) {
			t.Fatalf("INFO FORMAT JSON %+v (%v %v) differs from %+v", fromJSON, err, err2, info)
		}
		got, err := sale.Get(ctx, "r-b")
		if err != nil || got.User != "b" || got.Qty != 1 || got.State != "confirmed" || got.CreatedMs == 0 {
			t.Fatalf("GET %+v %v", got, err)
		}
		if got, err := sale.Get(ctx, "nope"); got != nil || err != nil {
			t.Fatalf("GET unknown: %+v %v", got, err)
		}
		if got, err := c.Sale(uniq("sale:{none}")).Info(ctx); got != nil || err != nil {
			t.Fatalf("INFO missing: %+v %v", got, err)
		}
		if js, err := c.Sale(uniq("sale:{none}")).InfoJSON(ctx); js != "" || err != nil {
			t.Fatalf("INFO JSON missing: %q %v", js, err)
		}
	})
}

func errOf[T any](_ T, err error) error { return err }

func TestErrorsAreValuesAndChangeNothing(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		c := New(rdb, Options{Backend: bc.backend})
		sale := c.Sale(uniq("sale:{err}"))
		must(t, errOf(sale.Init(ctx, 5, InitOptions{Limit: 2})))
		before, _ := sale.InfoJSON(ctx)
		_, err := sale.Reserve(ctx, "u1", ReserveOptions{Qty: 3})
		var ce *CommandError
		if !errors.As(err, &ce) || !errors.Is(err, ErrArgument) || ce.Message != "ERR QTY is above the sale's LIMIT" {
			t.Fatalf("QTY above LIMIT: %#v", err)
		}
		_, err = sale.Init(ctx, 5, InitOptions{Shards: 2000, Replace: true})
		if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "SHARDS must be from 1 to 1024") {
			t.Fatalf("SHARDS 2000: %v", err)
		}
		if after, _ := sale.InfoJSON(ctx); after != before {
			t.Fatalf("a refusal changed the sale: %s -> %s", before, after)
		}
		k := uniq("plain")
		must(t, rdb.Set(ctx, k, "x", time.Minute).Err())
		if _, err := c.Sale(k).Reserve(ctx, "u1", ReserveOptions{}); !errors.Is(err, ErrWrongType) {
			t.Fatalf("a string key: %v", err)
		}
		if _, err := c.Sale(k).Reconcile(ctx, nil, ReconcileOptions{}); !errors.Is(err, ErrWrongType) {
			t.Fatalf("RECONCILE of a string key: %v", err)
		}
		if _, err := c.Sale(uniq("sale:{none}")).Reconcile(ctx, nil, ReconcileOptions{}); !errors.Is(err, ErrSaleMissing) {
			t.Fatalf("RECONCILE of a missing key: %v", err)
		}
	})
}

func TestReconcileInChunks(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		c := New(rdb, Options{Backend: bc.backend})
		sale := c.Sale(uniq("sale:{rec}"))
		must(t, errOf(sale.Init(ctx, 3000, InitOptions{Limit: 5})))
		var orders []Order
		for i := 0; i < 2500; i++ {
			o := Order{RID: fmt.Sprintf("o%d", i), User: fmt.Sprintf("u%d", i), Qty: 1}
			if i < 40 { // held by the sale: pending; the rest the sale never saw
				must(t, errOf(sale.Reserve(ctx, o.User, ReserveOptions{ReqID: o.RID})))
			}
			orders = append(orders, o)
		}
		must(t, rdb.ConfigResetStat(ctx).Err())
		res, err := sale.Reconcile(ctx, orders, ReconcileOptions{Expire: true})
		calls := stat(t, rdb, "commandstats", bc.cmdstat("reconcile"), "calls")
		if err != nil || res.Calls != 3 || calls != 3 {
			t.Fatalf("%d calls by the client, %d by the server, %v", res.Calls, calls, err)
		}
		if res.Counts["pending"] != 40 || res.Counts["unknown"] != 2460 || len(res.IDs["unknown"]) != 2460 ||
			res.IDs["pending"][0] != "o0" || res.Clean() {
			t.Fatalf("counts %v", res.Counts)
		}
		if _, ok := res.Report.Int("orders_ok"); ok || res.Report.Pending != 40 {
			t.Fatalf("the report keeps orders_* or is not the sale's: %+v", res.Report)
		}
		res, err = sale.Reconcile(ctx, orders[:40], ReconcileOptions{Apply: true, ChunkSize: 15})
		if err != nil || res.Calls != 3 || res.Counts["pending"] != 40 || res.Report.Confirmed != 40 || res.Report.Pending != 0 {
			t.Fatalf("APPLY: %+v %v", res, err)
		}
		res, err = sale.Reconcile(ctx, orders[:40], ReconcileOptions{})
		if err != nil || !res.Clean() || res.Counts["ok"] != 40 || res.Unfenced != "" {
			t.Fatalf("after APPLY: %+v %v", res.Counts, err)
		}
	})
}

func TestDrawSale(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		c := New(rdb, Options{Backend: bc.backend})
		sale := c.Sale(uniq("sale:{draw}"))
		now, err := rdb.Time(ctx).Result()
		must(t, err)
		end := now.UnixMilli() + 400
		must(t, errOf(sale.Init(ctx, 2, InitOptions{EndMs: end, Draw: true})))
		if r, _ := sale.Reserve(ctx, "u1", ReserveOptions{}); r.Status != StatusDraw {
			t.Fatalf("RESERVE on a draw sale: %+v", r)
		}
		for i, u := range []string{"u1", "u2", "u3"} {
			if e, err := sale.Enter(ctx, u, EnterOptions{ReqID: "e-" + u}); err != nil || e != (Entered{StatusEntered, int64(i + 1)}) {
				t.Fatalf("ENTER %s: %+v %v", u, e, err)
			}
		}
		if e, _ := sale.Enter(ctx, "u1", EnterOptions{}); e.Status != StatusAlreadyEntered {
			t.Fatalf("ENTER again: %+v", e)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if tm, _ := rdb.Time(ctx).Result(); tm.UnixMilli() > end || time.Now().After(deadline) {
				break
			}
		}
		d, err := sale.Draw(ctx, 100)
		if err != nil || d.Drawn != 2 || d.LeftToDraw != 0 {
			t.Fatalf("DRAW %+v %v", d, err)
		}
		var all []Entrant
		cursor := "0"
		for pages := 0; pages < 10; pages++ {
			p, err := sale.Entrants(ctx, cursor, 2)
			must(t, err)
			all = append(all, p.Entrants...)
			if cursor = p.Cursor; cursor == "0" {
				break
			}
		}
		won := 0
		for _, e := range all {
			if e.Result == ResultDrawn {
				won++
			}
		}
		if len(all) != 3 || won != 2 {
			t.Fatalf("entrants %+v", all)
		}
	})
}

// The local sold-out flag: set only by Redis's answer, answers locally
// while held, and lapses so a restock made elsewhere is seen.
func TestLocalSoldOutFlag(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		c := New(rdb, Options{Backend: bc.backend, LocalSoldOut: true})
		other := New(rdb, Options{Backend: bc.backend}) // another process: no flag
		key := uniq("sale:{so}")
		sale := c.Sale(key)
		must(t, errOf(sale.Init(ctx, 1, InitOptions{})))
		reserves := func() int64 { return stat(t, rdb, "commandstats", bc.cmdstat("reserve"), "calls") }

		must(t, rdb.Publish(ctx, "seckill:events:"+key, "seckill.soldout").Err()) // no pub/sub sets it
		must(t, rdb.ConfigResetStat(ctx).Err())
		first, err := sale.Reserve(ctx, "u1", ReserveOptions{ReqID: "o1"})
		if err != nil || first.Status != StatusReserved || reserves() != 1 {
			t.Fatalf("the first RESERVE did not reach Redis: %+v %v", first, err)
		}
		for i := 0; i < 50; i++ {
			if r, err := sale.Reserve(ctx, fmt.Sprintf("v%d", i), ReserveOptions{}); err != nil || r.Status != StatusSoldOut {
				t.Fatalf("held flag: %+v %v", r, err)
			}
		}
		if n := reserves(); n != 1 {
			t.Fatalf("%d RESERVEs reached Redis while the flag held, want 1", n)
		}
		// a restock through another client: seen within the lapse
		if s, err := other.Sale(key).Release(ctx, "o1"); err != nil || s.Remaining != 1 {
			t.Fatalf("RELEASE %+v %v", s, err)
		}
		start := time.Now()
		var r Reserved
		for time.Since(start) < 2*time.Second {
			if r, err = sale.Reserve(ctx, "late", ReserveOptions{}); err != nil || r.Status == StatusReserved {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		waited := time.Since(start) // the lapse's bound itself is checked on a fake clock (soldout_test.go)
		if r.Status != StatusReserved {
			t.Fatalf("the restock was not seen within %v: %+v %v", waited, r, err)
		}
		t.Logf("restock seen %v after the release", waited.Round(time.Millisecond))
		// a reply with units left clears it at once
		must(t, errOf(sale.Release(ctx, r.ID)))
		if r2, _ := sale.Reserve(ctx, "again", ReserveOptions{}); r2.Status != StatusReserved {
			t.Fatalf("not cleared by RELEASE's reply: %+v", r2)
		}
	})
}

// The keys the library's calls declare (docs/managed-redis.md, "Calling
// it"), on both backends alike: a sale with a STREAM, a sale whose stream
// another client changed with INIT REPLACE (this client's list is stale:
// one refusal, seckill_keys again, the retry), and INIT REPLACE of a draw
// sale, whose four keys go.
func TestDeclaredKeys(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, rdb *redis.Client) {
		a := New(rdb, Options{Backend: bc.backend})
		b := New(rdb, Options{Backend: bc.backend})
		key := uniq("sale:{keys}")
		s1, s2 := key+":ev1", key+":ev2"
		must(t, errOf(a.Sale(key).Init(ctx, 10, InitOptions{Stream: s1, HoldMs: 60000})))
		r, err := a.Sale(key).Reserve(ctx, "u1", ReserveOptions{ReqID: "o1"})
		if err != nil || r.Status != StatusReserved {
			t.Fatalf("RESERVE with a stream: %+v %v", r, err)
		}
		// another client replaces the sale with another stream; a's list names s1
		must(t, errOf(b.Sale(key).Init(ctx, 10, InitOptions{Stream: s2, Replace: true})))
		r, err = a.Sale(key).Reserve(ctx, "u2", ReserveOptions{ReqID: "o2"})
		if err != nil || r.Status != StatusReserved || r.Remaining != 9 {
			t.Fatalf("RESERVE after the stream changed: %+v %v", r, err)
		}
		for stream, want := range map[string]int64{s1: 1, s2: 1} {
			if n, err := rdb.XLen(ctx, stream).Result(); err != nil || n != want {
				t.Fatalf("XLEN %s: %d %v", stream, n, err)
			}
		}
		if _, err := a.Sale(key).Confirm(ctx, "o2"); err != nil {
			t.Fatalf("CONFIRM: %v", err)
		}

		// a draw sale, replaced by a plain sale with a stream: its keys go
		draw := uniq("sale:{keys}d")
		now, err := rdb.Time(ctx).Result()
		must(t, err)
		must(t, errOf(a.Sale(draw).Init(ctx, 2, InitOptions{EndMs: now.UnixMilli() + 60000, Draw: true, Stream: draw + ":ev"})))
		if e, err := a.Sale(draw).Enter(ctx, "u1", EnterOptions{}); err != nil || e.Status != StatusEntered {
			t.Fatalf("ENTER: %+v %v", e, err)
		}
		if n, _ := rdb.Exists(ctx, draw+":secret", draw+":entrants").Result(); bc.backend == BackendFunctions && n != 2 {
			t.Fatalf("the draw sale's keys: %d of 2", n)
		}
		must(t, errOf(b.Sale(draw).Init(ctx, 5, InitOptions{Replace: true})))
		if n, _ := rdb.Exists(ctx, draw+":secret", draw+":entrants", draw+":perm", draw+":wait").Result(); n != 0 {
			t.Fatalf("INIT REPLACE left %d of the draw sale's keys", n)
		}
		if r, err := a.Sale(draw).Reserve(ctx, "u1", ReserveOptions{}); err != nil || r.Status != StatusReserved {
			t.Fatalf("RESERVE on the replaced sale: %+v %v", r, err)
		}
	})
}
