// Package seckill is a client of the SECKILL contract (docs/commands.md)
// on go-redis v9: one sale key, typed replies, errors as values.
//
// It works on any redis.UniversalClient (a single node, a Cluster, a
// Sentinel failover client) and on either backend: the module's commands
// (SECKILL.RESERVE key ...) or the Redis Functions library
// functions/seckill.lua (FCALL seckill_reserve 1 key ...), chosen once per
// Client, detected or configured. Every call names the sale key as the
// command's key, so a cluster client sends it to the node serving the
// key's slot.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:7379"})
//	c := seckill.New(rdb, seckill.Options{})
//	sale := c.Sale("sale:{1001}")
//	r, err := sale.Reserve(ctx, "user:42", seckill.ReserveOptions{ReqID: "order-7f3a"})
//	if err == nil && r.OK() { /* r.ID holds the reservation */ }
//
// The parsers (ParseReserved, ParseReport, ...) take the values go-redis
// returns from Do under RESP2 or RESP3 and are tested against the shared
// vectors in tests/vectors.
package seckill
