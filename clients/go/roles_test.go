package seckill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The documented roles (docs/operations.md, "Who may do what") run the
// client's detection and a RESERVE with nothing more, on the module and on
// the library: the lines are read from the page, as the Python client's
// clients/python/tests/test_roles.py reads them, so the page and the test
// cannot disagree.

// roleLine is the page's ACL SETUSER line of role for the backend (the
// library's lines are the ones with +fcall), split into words as a shell
// does with double quotes (the selector "(... +set)" is one word).
func roleLine(t *testing.T, role string, b Backend) []string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	must(t, err)
	var found []string
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, "ACL SETUSER ") {
			continue
		}
		words := shellWords(t, line)
		lib := false
		for _, w := range words {
			lib = lib || w == "+fcall"
		}
		if len(words) > 2 && words[2] == role && lib == (b == BackendFunctions) {
			if found != nil {
				t.Fatalf("docs/operations.md has two %s lines for %s", role, b)
			}
			found = words
		}
	}
	if found == nil {
		t.Fatalf("docs/operations.md has no %s line for %s", role, b)
	}
	return found
}

// shellWords splits on spaces, keeping a double-quoted run as one word.
func shellWords(t *testing.T, line string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("an unclosed quote in %q", line)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// asUser creates the user of words on the server (as the admin) and
// connects as it with protocol proto.
func asUser(t *testing.T, admin *redis.Client, words []string, proto int) *redis.Client {
	t.Helper()
	args := make([]interface{}, len(words))
	password := ""
	for i, w := range words {
		args[i] = w
		if strings.HasPrefix(w, ">") && password == "" {
			password = w[1:]
		}
	}
	must(t, admin.Do(context.Background(), args...).Err())
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: words[2], Password: password,
		Protocol: proto})
	must(t, c.Ping(context.Background()).Err())
	return c
}

func TestShopRoleDetectsAndReserves(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, admin *redis.Client) {
		for _, proto := range []int{2, 3} {
			shop := asUser(t, admin, roleLine(t, "shop", bc.backend), proto)
			defer shop.Close()
			if err := shop.Do(ctx, "MODULE", "LIST").Err(); !errors.Is(wrapError(err), ErrNoPerm) {
				t.Fatalf("the shop may run MODULE LIST (%v): the test would prove nothing", err)
			}
			key := uniq("sale:{roles}")
			must(t, errOf(New(admin, Options{Backend: bc.backend}).Sale(key).Init(ctx, 2, InitOptions{Limit: 1})))

			// detected as the shop at its first call, the version asked with
			// the sale key (the shop's patterns do not match ProbeKey)
			c := New(shop, Options{})
			sale := c.Sale(key)
			r, err := sale.Reserve(ctx, "u1", ReserveOptions{ReqID: "o1"})
			if err != nil || r != (Reserved{StatusReserved, "o1", 1}) {
				t.Fatalf("RESP%d: RESERVE as the shop: %+v %v", proto, r, err)
			}
			if got, err := c.Backend(ctx); err != nil || got != bc.backend {
				t.Fatalf("RESP%d: detected %q, %v", proto, got, err)
			}
			if r, err := sale.Reserve(ctx, "u1", ReserveOptions{ReqID: "o1"}); err != nil || r.Status != StatusDuplicate {
				t.Fatalf("RESP%d: the retry: %+v %v", proto, r, err)
			}
			if info, err := sale.Info(ctx); err != nil || info.Pending != 1 {
				t.Fatalf("RESP%d: INFO as the shop: %+v %v", proto, info, err)
			}
		}
	})
}

// A user with no SECKILL right at all still finds the module (the arity
// error comes before the ACL); a user without FCALL_RO on a server with the
// library only is told which right to add.
func TestDetectionUnderUsersWithoutTheRights(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, bc backendCase, admin *redis.Client) {
		bare := asUser(t, admin, []string{"ACL", "SETUSER", "bare", "reset", "on", ">bare-password", "~sale:*", "+ping"}, 2)
		defer bare.Close()
		got, err := Detect(ctx, bare)
		if bc.backend == BackendModule {
			if err != nil || got != BackendModule {
				t.Fatalf("a user without +seckill.info: %q, %v", got, err)
			}
			return
		}
		if !errors.Is(err, ErrNoPerm) || !strings.Contains(err.Error(), "+fcall +fcall_ro") {
			t.Fatalf("a user without +fcall_ro on the library: %q, %v", got, err)
		}
	})
}
