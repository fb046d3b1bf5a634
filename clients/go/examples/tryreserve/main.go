// The seeds' TryReserve (a Lua script over three hash-tagged keys, sent
// with rdb.Eval) rewritten on the seckill client: one RESERVE on one sale
// key, idempotent by the reservation id, routed by the key in a cluster,
// on the module or the Functions library.
//
//	go run ./examples/tryreserve -addr 127.0.0.1:7379 -sku 1001 -user 42 -reqid order-7f3a
//	go run ./examples/tryreserve -cluster 127.0.0.1:7000,127.0.0.1:7001 -sku 1001 -user 42 -reqid order-7f3a -init 100
//
// The server also comes from $SECKILL_ADDR (one address, or several
// separated by commas for a cluster). It prints the outcome and exits 0
// when the user holds the reservation, 1 when refused, 2 on an error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	seckill "redis-seckill/clients/go"
)

// TryReserve reserves one unit of skuID for userID under reservationID.
// Where the seed answered (bool, error) from the script's 0/1/2, the
// outcome is the typed reply: r.OK() is the seed's "1 or 2" (RESERVED, or
// DUPLICATE for a retry of the same reservation id), r.ID the reservation
// to build the order on, r.Status why not otherwise (SOLD_OUT, LIMIT,
// ENDED, ...). The sale key sale:{skuID} carries the hash tag the seed put
// on its three keys.
func TryReserve(ctx context.Context, c *seckill.Client, skuID string, userID int64,
	reservationID string) (seckill.Reserved, error) {
	sale := c.Sale("sale:{" + skuID + "}")
	return sale.Reserve(ctx, strconv.FormatInt(userID, 10), seckill.ReserveOptions{ReqID: reservationID})
}

func main() {
	addr := flag.String("addr", env("SECKILL_ADDR", "127.0.0.1:7379"), "a server (host:port)")
	nodes := flag.String("cluster", "", "cluster nodes, host:port,host:port (instead of -addr)")
	backend := flag.String("backend", "", "module or functions (default: detected)")
	sku := flag.String("sku", "1001", "the SKU: the sale key is sale:{SKU}")
	user := flag.Int64("user", 42, "the user id")
	reqid := flag.String("reqid", "", "the reservation id (default: one made from the time)")
	initTotal := flag.Int64("init", 0, "create the sale with this many units first if it does not exist")
	flag.Parse()

	var rdb redis.UniversalClient
	if *nodes != "" || strings.Contains(*addr, ",") {
		list := *nodes
		if list == "" {
			list = *addr
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(list, ",")})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: *addr})
	}
	defer rdb.Close()
	os.Exit(run(rdb, seckill.Backend(*backend), *sku, *user, *reqid, *initTotal))
}

func run(rdb redis.UniversalClient, backend seckill.Backend, sku string, user int64, reqid string, initTotal int64) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := seckill.New(rdb, seckill.Options{Backend: backend})
	if reqid == "" {
		reqid = "order-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if initTotal > 0 {
		created, err := c.Sale("sale:{"+sku+"}").Init(ctx, initTotal, seckill.InitOptions{HoldMs: 900_000})
		if err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			return 2
		}
		fmt.Printf("sale:{%s} created: %v\n", sku, created)
	}
	r, err := TryReserve(ctx, c, sku, user, reqid)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reserve:", err)
		return 2
	}
	fmt.Printf("%s id=%s remaining=%d ok=%v\n", r.Status, r.ID, r.Remaining, r.OK())
	if !r.OK() {
		return 1
	}
	return 0
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
