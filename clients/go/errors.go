package seckill

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CommandError is an error reply of the server. Code is its first word
// (ERR, WRONGTYPE, NOPERM, OOM, TRYAGAIN, STALEROUND, FENCED, ...),
// Message the whole text as the server sent it. It unwraps to go-redis's
// error, and matches the family values below with errors.Is:
//
//	if errors.Is(err, seckill.ErrWrongType) { ... }
type CommandError struct {
	Code    string
	Message string
	err     error
}

func (e *CommandError) Error() string { return e.Message }

func (e *CommandError) Unwrap() error { return e.err }

// Is matches a family value (a CommandError with no Message) by its code.
func (e *CommandError) Is(target error) bool {
	t, ok := target.(*CommandError)
	return ok && t.Message == "" && t.Code == e.Code
}

// The families of error replies docs/commands.md lists. Every refusal
// changes nothing on the server.
var (
	// ErrArgument: ERR, a bad argument or arity ("ERR QTY is above the
	// sale's LIMIT"), or a split-sale refusal.
	ErrArgument = &CommandError{Code: "ERR"}
	// ErrWrongType: the key holds another type.
	ErrWrongType = &CommandError{Code: "WRONGTYPE"}
	// ErrNoPerm: the ACL user may not run the command or write a key of it
	// (the sale's STREAM key).
	ErrNoPerm = &CommandError{Code: "NOPERM"}
	// ErrOOM: INIT, RESERVE, RECONCILE APPLY (and SEND) over maxmemory.
	ErrOOM = &CommandError{Code: "OOM"}
	// ErrTryAgain: a key of the command is mid-migration; safe to repeat.
	ErrTryAgain = &CommandError{Code: "TRYAGAIN"}
	// ErrStaleRound: a split sale's key is in another round.
	ErrStaleRound = &CommandError{Code: "STALEROUND"}
	// ErrFenced: DRAW or SEND on a fenced sale (RESERVE and ENTER answer
	// the status FENCED instead).
	ErrFenced = &CommandError{Code: "FENCED"}
)

// ErrSaleMissing: RECONCILE of a key that does not exist (never created,
// expired, or lost).
var ErrSaleMissing = errors.New("seckill: the sale does not exist")

// ProtocolError: a reply that does not have the shape the contract gives it.
type ProtocolError struct {
	Command string
	Detail  string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("seckill: %s answered %s", e.Command, e.Detail)
}

func protoErr(command, format string, a ...interface{}) error {
	return &ProtocolError{Command: command, Detail: fmt.Sprintf(format, a...)}
}

// redisError is what go-redis's error replies implement (proto.RedisError).
type redisError interface {
	error
	RedisError()
}

// isReply: an error reply of the server (go-redis's redis.Nil carries
// the same marker but is a nil reply, not an error one).
func isReply(err error) (redisError, bool) {
	var re redisError
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &re) {
		return nil, false
	}
	return re, true
}

// wrapError turns an error reply into a *CommandError; any other error
// (a connection error, a timeout, redis.Nil) is returned as it is.
func wrapError(err error) error {
	re, ok := isReply(err)
	if !ok {
		return err
	}
	msg := re.Error()
	code, _, _ := strings.Cut(msg, " ")
	return &CommandError{Code: code, Message: msg, err: err}
}
