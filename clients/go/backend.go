package seckill

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Backend is what serves SECKILL.* on the server.
type Backend string

const (
	// BackendAuto: detect it at the first call (MODULE LIST, then FUNCTION
	// LIST LIBRARYNAME seckill and FCALL_RO seckill_version 0).
	BackendAuto Backend = ""
	// BackendModule: the module's commands, SECKILL.X key ...
	BackendModule Backend = "module"
	// BackendFunctions: the Functions library functions/seckill.lua,
	// FCALL seckill_x 1 key ... (docs/managed-redis.md).
	BackendFunctions Backend = "functions"
)

// LibraryName is the name of the module and of the Functions library.
const LibraryName = "seckill"

// ErrNoBackend: neither the module nor the library is on the server.
var ErrNoBackend = errors.New("seckill: neither the seckill module (MODULE LIST) nor the seckill " +
	"Functions library (FUNCTION LIST) is on this server: load the module, or load " +
	"functions/seckill.lua with FUNCTION LOAD (docs/managed-redis.md)")

// refused: the server answered with an error (unknown command, ACL, a
// managed service refusing MODULE LIST): the answer is "no". A connection
// error is not an answer and goes to the caller.
func refused(err error) bool {
	_, ok := isReply(err)
	return ok
}

// named: whether a MODULE LIST or FUNCTION LIST reply has an entry whose
// field (name, library_name) is seckill.
func named(reply interface{}, field string) bool {
	entries, _ := reply.([]interface{})
	for _, e := range entries {
		ps, err := pairs(e, "LIST")
		if err != nil {
			continue
		}
		for _, p := range ps {
			if s, _ := asString(p.value); p.name == field && s == LibraryName {
				return true
			}
		}
	}
	return false
}

// ask sends a question whose refusal means "no": (reply, answered, error).
func ask(ctx context.Context, rdb redis.UniversalClient, args ...interface{}) (interface{}, bool, error) {
	v, err := rdb.Do(ctx, args...).Result()
	if err != nil && refused(err) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// Detect asks the server which backend serves SECKILL.* (Client does it
// once, at its first call, unless Options.Backend names one).
func Detect(ctx context.Context, rdb redis.UniversalClient) (Backend, error) {
	mods, ok, err := ask(ctx, rdb, "MODULE", "LIST")
	if err != nil {
		return "", err
	}
	if ok && named(mods, "name") {
		return BackendModule, nil
	}
	libs, ok, err := ask(ctx, rdb, "FUNCTION", "LIST", "LIBRARYNAME", LibraryName)
	if err != nil {
		return "", err
	}
	if !ok || !named(libs, "library_name") {
		return "", ErrNoBackend
	}
	if _, ok, err := ask(ctx, rdb, "FCALL_RO", "seckill_version", "0"); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("seckill: the seckill library is loaded but does not answer " +
				"seckill_version: load functions/seckill.lua again")
		}
		return "", err
	}
	return BackendFunctions, nil
}
