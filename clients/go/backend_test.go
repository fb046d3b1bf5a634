package seckill

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scripted answers every command from a table, without a server: a go-redis
// hook that never calls the next one (no connection is made). The key is
// the command's first word; a missing one answers "unknown command".
type scripted struct {
	replies map[string]interface{} // a value, or an error (replyError: an error reply)
	asked   []string
}

func (s *scripted) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scripted) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *scripted) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name, _ := cmd.Args()[0].(string)
		s.asked = append(s.asked, name)
		r, ok := s.replies[name]
		if !ok {
			r = replyError("ERR unknown command '" + name + "', with args beginning with: ")
		}
		if err, isErr := r.(error); isErr {
			cmd.SetErr(err)
			return err
		}
		cmd.(*redis.Cmd).SetVal(r)
		return nil
	}
}

func detectWith(t *testing.T, replies map[string]interface{}) (Backend, error, []string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DisableIdentity: true})
	defer rdb.Close()
	s := &scripted{replies: replies}
	rdb.AddHook(s)
	b, err := Detect(context.Background(), rdb)
	return b, err, s.asked
}

const (
	arity       = replyError("ERR wrong number of arguments for 'seckill.info' command")
	infoNoPerm  = replyError("NOPERM this user has no permissions to run the 'seckill.info' command")
	fcallNoPerm = replyError("NOPERM this user has no permissions to run the 'fcall_ro' command")
	noFunction  = replyError("ERR Function not found")
)

func TestDetectWithoutModuleList(t *testing.T) {
	for _, c := range []struct {
		name    string
		replies map[string]interface{}
		want    Backend
		asked   string
	}{
		{"the module's arity error", map[string]interface{}{"SECKILL.INFO": arity}, BackendModule, "SECKILL.INFO"},
		{"a value from SECKILL.INFO", map[string]interface{}{"SECKILL.INFO": "x"}, BackendModule, "SECKILL.INFO"},
		// NOPERM comes after the command lookup: the command exists, so the
		// module is there (the user may still be allowed RESERVE and the rest)
		{"NOPERM for SECKILL.INFO", map[string]interface{}{"SECKILL.INFO": infoNoPerm}, BackendModule, "SECKILL.INFO"},
		{"NOPERM for SECKILL.INFO, even where FCALL_RO is refused too",
			map[string]interface{}{"SECKILL.INFO": infoNoPerm, "FCALL_RO": fcallNoPerm}, BackendModule, "SECKILL.INFO"},
		{"the library's version", map[string]interface{}{"FCALL_RO": "1.2.0"}, BackendFunctions, "SECKILL.INFO FCALL_RO"},
		{"a proxy refusing SECKILL.INFO, then the library",
			map[string]interface{}{"SECKILL.INFO": replyError("ERR command not allowed"), "FCALL_RO": "1.2.0"},
			BackendFunctions, "SECKILL.INFO FCALL_RO"},
	} {
		b, err, asked := detectWith(t, c.replies)
		if err != nil || b != c.want || strings.Join(asked, " ") != c.asked {
			t.Fatalf("%s: %q %v, asked %v", c.name, b, err, asked)
		}
	}
}

// On a server without the module, NOPERM for FCALL_RO cannot tell whether
// the library is loaded: an error naming the right to add.
func TestDetectNamesTheMissingRight(t *testing.T) {
	b, err, asked := detectWith(t, map[string]interface{}{"FCALL_RO": fcallNoPerm})
	if err == nil || !errors.Is(err, ErrNoPerm) || !strings.Contains(err.Error(), "+fcall +fcall_ro") ||
		!strings.Contains(err.Error(), "NOPERM this user has no permissions") || b != "" ||
		strings.Join(asked, " ") != "SECKILL.INFO FCALL_RO" {
		t.Fatalf("NOPERM for FCALL_RO: %q %v (asked %v)", b, err, asked)
	}
}

func TestDetectNeitherBackend(t *testing.T) {
	for _, replies := range []map[string]interface{}{
		{}, {"FCALL_RO": noFunction},
	} {
		if _, err, _ := detectWith(t, replies); !errors.Is(err, ErrNoBackend) {
			t.Fatalf("%v: %v", replies, err)
		}
	}
	_, err, _ := detectWith(t, map[string]interface{}{"FCALL_RO": "not a version"})
	if err == nil || errors.Is(err, ErrNoBackend) || !strings.Contains(err.Error(), "load functions/seckill.lua again") {
		t.Fatalf("a library that answers no version: %v", err)
	}
	// a connection error is no answer: returned as it is, nothing decided
	cut := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	_, err, _ = detectWith(t, map[string]interface{}{"SECKILL.INFO": cut})
	if err != cut {
		t.Fatalf("a connection error: %v", err)
	}
}
