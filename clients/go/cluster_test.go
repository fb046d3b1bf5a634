package seckill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A three-master cluster with the module (and the library on every
// master): every call must reach the key's node first time, 0 MOVED.

func clusterClient(nodes []*server) *redis.ClusterClient {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.addr()
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
}

// nodeOf: the index of the master serving key's slot.
func nodeOf(t testing.TB, rdb *redis.Client, key string) int {
	slot, err := rdb.ClusterKeySlot(context.Background(), key).Result()
	must(t, err)
	return int(slot) * 3 / 16384 // the ranges startCluster assigns
}

// spread: n keys per master, named prefix{i}.
func spread(t testing.TB, rdb *redis.Client, prefix string, n int) []string {
	per := map[int]int{}
	var keys []string
	for i := 0; len(keys) < 3*n && i < 1000; i++ {
		k := fmt.Sprintf("sale:{%s%d}", prefix, i)
		if node := nodeOf(t, rdb, k); per[node] < n {
			per[node]++
			keys = append(keys, k)
		}
	}
	return keys
}

func sumStat(t testing.TB, nodes []*server, section, name, field string) (total int64, per []int64) {
	for _, n := range nodes {
		rdb := nodeClient(n)
		v := stat(t, rdb, section, name, field)
		rdb.Close()
		total += v
		per = append(per, v)
	}
	return total, per
}

func TestClusterRoutesByTheSaleKey(t *testing.T) {
	ctx := context.Background()
	nodes := cluster(t)
	admin := nodeClient(nodes[0])
	defer admin.Close()
	rc := clusterClient(nodes)
	defer rc.Close()
	if b, err := New(rc, Options{}).Backend(ctx); err != nil || b != BackendModule {
		t.Fatalf("detected %q on the cluster: %v", b, err)
	}
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			c := New(rc, Options{Backend: bc.backend})
			keys := spread(t, admin, uniq("rt-"+bc.name+"-"), 2)
			for _, k := range keys {
				must(t, errOf(c.Sale(k).Init(ctx, 10, InitOptions{Limit: 2})))
			}
			for _, n := range nodes {
				rdb := nodeClient(n)
				must(t, rdb.ConfigResetStat(ctx).Err())
				rdb.Close()
			}
			got := buyers(t, c, keys, 50)
			for i, k := range keys {
				info, err := c.Sale(k).Info(ctx)
				if err != nil || info.Remaining != 0 || info.Pending != 10 || info.Invariant != "ok" {
					t.Fatalf("%s: %+v %v", k, info, err)
				}
				if got[i] != 10 {
					t.Fatalf("%s: the buyers hold %d units, want 10", k, got[i])
				}
			}
			moved, _ := sumStat(t, nodes, "errorstats", "errorstat_MOVED", "count")
			ask, _ := sumStat(t, nodes, "errorstats", "errorstat_ASK", "count")
			_, per := sumStat(t, nodes, "commandstats", bc.cmdstat("reserve"), "calls")
			if moved != 0 || ask != 0 {
				t.Fatalf("%d MOVED, %d ASK", moved, ask)
			}
			for i, n := range per {
				if n == 0 {
					t.Fatalf("master %d served no RESERVE: %v", i, per)
				}
			}
			t.Logf("0 MOVED, 0 ASK; RESERVE calls per master %v", per)
		})
	}
}

// buyers: n concurrent users, each 3 RESERVEs with REQIDs and one retry of
// the first, on keys[i % len(keys)]; the units each key's buyers hold.
func buyers(t *testing.T, c *Client, keys []string, n int) []int64 {
	ctx := context.Background()
	held := make([]int64, len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for u := 0; u < n; u++ {
		wg.Add(1)
		go func(u int) {
			defer wg.Done()
			k := u % len(keys)
			sale := c.Sale(keys[k])
			user := fmt.Sprintf("user%d", u)
			mine := map[string]bool{}
			var first Reserved
			for j := 0; j < 3; j++ {
				r, err := sale.Reserve(ctx, user, ReserveOptions{ReqID: fmt.Sprintf("q%d-%d", u, j)})
				if err != nil {
					errs <- err
					return
				}
				if j == 0 {
					first = r
				}
				if r.Status == StatusReserved {
					mine[r.ID] = true
				}
				if r.Status == StatusLimit && !mine[r.ID] {
					errs <- fmt.Errorf("%s: LIMIT names %q, not one of its own", user, r.ID)
					return
				}
			}
			if len(mine) > 2 {
				errs <- fmt.Errorf("%s holds %d reservations, LIMIT 2", user, len(mine))
				return
			}
			again, err := sale.Reserve(ctx, user, ReserveOptions{ReqID: fmt.Sprintf("q%d-0", u)})
			if first.Status == StatusReserved && (err != nil || again.Status != StatusDuplicate || again.ID != first.ID) {
				errs <- fmt.Errorf("%s: retry of a REQID answered %+v %v", user, again, err)
				return
			}
			mu.Lock()
			held[k] += int64(len(mine))
			mu.Unlock()
		}(u)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return held
}

// TRYAGAIN for real: the sale's stream is MIGRATEd ahead of the sale, so
// the source node answers TRYAGAIN until the sale follows (300 ms later);
// go-redis retries 3 times by itself (about 0.1 s) and gives up, the
// client's budget carries the call onto the new node.
func TestTryAgainDuringAMigration(t *testing.T) {
	ctx := context.Background()
	nodes := cluster(t)
	admin := nodeClient(nodes[0])
	defer admin.Close()
	key := spread(t, admin, uniq("mig"), 1)[0]
	stream := key + ":events"
	src := nodes[nodeOf(t, admin, key)]
	dst := nodes[(nodeOf(t, admin, key)+1)%3]
	rc := clusterClient(nodes)
	defer rc.Close()
	c := New(rc, Options{Backend: BackendModule})
	sale := c.Sale(key)
	must(t, errOf(sale.Init(ctx, 5, InitOptions{Stream: stream})))

	srcC, dstC := nodeClient(src), nodeClient(dst)
	defer srcC.Close()
	defer dstC.Close()
	slot, _ := admin.ClusterKeySlot(ctx, key).Result()
	srcID, dstID := nodeID(t, srcC), nodeID(t, dstC)
	must(t, dstC.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must(t, srcC.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	must(t, srcC.Do(ctx, "MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", stream).Err())
	must(t, srcC.ConfigResetStat(ctx).Err())

	moved := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		err := srcC.Do(ctx, "MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", key).Err()
		for _, n := range nodes {
			rdb := nodeClient(n)
			if e := rdb.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err == nil {
				err = e
			}
			rdb.Close()
		}
		moved <- err
	}()
	start := time.Now()
	r, err := sale.Reserve(ctx, "u1", ReserveOptions{ReqID: "o1"})
	took := time.Since(start)
	must(t, <-moved)
	tryagains := stat(t, srcC, "errorstats", "errorstat_TRYAGAIN", "count")
	if err != nil || r.Status != StatusReserved || r.ID != "o1" {
		t.Fatalf("RESERVE during the migration: %+v %v", r, err)
	}
	if took < 300*time.Millisecond || tryagains < 4 { // 4: go-redis's own first try and 3 retries
		t.Fatalf("took %v with %d TRYAGAIN: the migration window was not exercised", took, tryagains)
	}
	if info, err := c.Sale(key).Info(ctx); err != nil || info.Pending != 1 || info.Remaining != 4 {
		t.Fatalf("after the move: %+v %v", info, err)
	}
	t.Logf("RESERVE reserved after %v; the source answered TRYAGAIN %d times", took.Round(time.Millisecond), tryagains)
}

func nodeID(t testing.TB, rdb *redis.Client) string {
	id, err := rdb.Do(context.Background(), "CLUSTER", "MYID").Text()
	must(t, err)
	return id
}

// A Sentinel failover client is a redis.UniversalClient like the others.
func TestSentinelFailoverClient(t *testing.T) {
	ctx := context.Background()
	master := moduleServer(t)
	dir, err := os.MkdirTemp("", "seckill-go-sentinel-") // removed when the Sentinel stops
	must(t, err)
	port := freePort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
		"sentinel monitor seckill-go 127.0.0.1 %d 1\n", port, dir, master.port)), 0o644))
	s := &server{port: port, dir: dir}
	launch(t, s, conf, "--sentinel")
	sent := redis.NewSentinelClient(&redis.Options{Addr: s.addr()})
	defer sent.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		addr, err := sent.GetMasterAddrByName(ctx, "seckill-go").Result()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(master.port) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel does not name the master: %v %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "seckill-go", Addrs: []string{s.addr()}})
	defer rdb.Close()
	c := New(rdb, Options{})
	sale := c.Sale(uniq("sale:{sentinel}"))
	must(t, errOf(sale.Init(ctx, 2, InitOptions{})))
	r, err := sale.Reserve(ctx, "u1", ReserveOptions{ReqID: "o1"})
	if b, _ := c.Backend(ctx); err != nil || r != (Reserved{StatusReserved, "o1", 1}) || b != BackendModule {
		t.Fatalf("through the Sentinel: %+v %v (%s)", r, err, b)
	}
}
