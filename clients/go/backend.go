package seckill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Backend is what serves SECKILL.* on the server.
type Backend string

const (
	// BackendAuto: detect it at the first call (Detect: SECKILL.INFO
	// without a key, then FCALL_RO seckill_version 1 key).
	BackendAuto Backend = ""
	// BackendModule: the module's commands, SECKILL.X key ...
	BackendModule Backend = "module"
	// BackendFunctions: the Functions library functions/seckill.lua,
	// FCALL seckill_x n key [keys...] ... (docs/managed-redis.md).
	BackendFunctions Backend = "functions"
)

// LibraryName is the name of the module and of the Functions library.
const LibraryName = "seckill"

// ErrNoBackend: neither the module nor the library is on the server.
var ErrNoBackend = errors.New("seckill: neither the seckill module (SECKILL.INFO is an unknown command) " +
	"nor the seckill Functions library (FCALL_RO seckill_version 1 key) is on this server: load the module, " +
	"or load functions/seckill.lua with FUNCTION LOAD (docs/managed-redis.md)")

// The questions Detect asks. Neither needs MODULE LIST or FUNCTION LIST,
// which managed services and least-privilege ACL users (the
// roles of docs/operations.md) may not run.
var (
	// moduleProbe: a server with the module answers its arity error
	// (Redis checks the arity before the ACL, so any user gets it and
	// nothing runs; a server that checks the ACL first answers NOPERM,
	// which also means the command exists); a server without it answers
	// "unknown command".
	moduleProbe = []interface{}{"SECKILL.INFO"}
	// then versionArgs(key): the library's version, or "Function not
	// found"; with the sale key at hand, else ProbeKey (the key only
	// routes the call).
)

// Detect asks the server which backend serves SECKILL.* (Client does it
// once, at its first call, unless Options.Backend names one): the module
// when SECKILL.INFO without a key is a known command (its arity error, a
// value, or NOPERM: Redis looks the command up before it checks the ACL,
// so a refusal means the command exists, and the user may still be
// allowed RESERVE and the rest), else the library when FCALL_RO
// seckill_version 1 seckill:probe answers a version, else ErrNoBackend. NOPERM for
// FCALL_RO (where the library's presence cannot be told) is an error that
// names the right to add (errors.Is(err, ErrNoPerm)); a connection error
// is returned as it is, and nothing is remembered.
func Detect(ctx context.Context, rdb redis.UniversalClient) (Backend, error) {
	return detect(ctx, rdb, "")
}

// detect is Detect, the version asked with key ("" for ProbeKey).
func detect(ctx context.Context, rdb redis.UniversalClient, key string) (Backend, error) {
	_, err := rdb.Do(ctx, moduleProbe...).Result()
	if err != nil && !isReplyErr(err) {
		return "", err
	}
	if moduleAnswered(err) {
		return BackendModule, nil
	}
	v, err := rdb.Do(ctx, versionArgs(key)...).Result()
	if err != nil && !isReplyErr(err) {
		return "", err
	}
	if err := libraryAnswered(v, err); err != nil {
		return "", err
	}
	return BackendFunctions, nil
}

// isReplyErr: an error reply of the server (an answer), not a connection
// error or a timeout.
func isReplyErr(err error) bool {
	_, ok := isReply(err)
	return ok
}

// moduleAnswered reads the reply to moduleProbe (err: its error reply, or
// nil for a value): true when it comes from the module: any value, its
// arity error, or NOPERM (only a known command gets it; a server that
// checks the ACL before the arity gives it to a user without
// +seckill.info); false for "unknown command" and any other refusal (a
// proxy's).
func moduleAnswered(err error) bool {
	if err == nil {
		return true
	}
	ce, ok := wrapError(err).(*CommandError)
	if !ok {
		return false
	}
	return ce.Code == "NOPERM" || strings.Contains(strings.ToLower(ce.Message), "wrong number of arguments")
}

// libraryAnswered reads the reply to versionArgs (v, or err its error
// reply): nil when the library answered a version; an error naming
// +fcall_ro for NOPERM; ErrNoBackend for any other error reply ("Function
// not found", "unknown command" on a server older than Functions).
func libraryAnswered(v interface{}, err error) error {
	if err != nil {
		ce, ok := wrapError(err).(*CommandError)
		if !ok {
			return err
		}
		if ce.Code == "NOPERM" {
			return fmt.Errorf("seckill: the seckill module is not on this server, and this ACL user may "+
				"not run FCALL_RO (%w): give it +fcall +fcall_ro, as the library's role lines of "+
				"docs/operations.md do, and key patterns that match the key the version is asked with "+
				"(the sale key of the first call; ProbeKey for Client.Backend)", ce)
		}
		return ErrNoBackend
	}
	s, ok := asString(v)
	if !ok || !isVersion(s) {
		return fmt.Errorf("seckill: FCALL_RO seckill_version answered %s, not a version: load "+
			"functions/seckill.lua again (FUNCTION LOAD REPLACE)", describe(v))
	}
	return nil
}

// isVersion: dotted numbers, "1.2.0".
func isVersion(s string) bool {
	parts := strings.Split(strings.TrimSpace(s), ".")
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return true
}
