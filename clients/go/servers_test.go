package seckill

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Real servers for the integration tests, started by the tests on free
// ports (never 6379) and stopped by pid when the run ends. Where a binary
// is missing the tests skip, unless SECKILL_GO_REQUIRE_SERVERS=1 (make
// go-test sets it), which turns a skip into a failure.
//
//	REDIS_SERVER    the redis-server binary (default: redis-server on PATH)
//	SECKILL_MODULE  the module (default: target/release/libredis_seckill.so of this repository)

const repoRoot = "../.."

var (
	serversMu sync.Mutex
	started   []*server
)

type server struct {
	port int
	cmd  *exec.Cmd
	dir  string
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func need(t testing.TB, what string) {
	if os.Getenv("SECKILL_GO_REQUIRE_SERVERS") == "1" {
		t.Fatalf("needed for the integration tests: %s", what)
	}
	t.Skipf("no %s (set SECKILL_GO_REQUIRE_SERVERS=1 to fail instead)", what)
}

func serverBinary(t testing.TB) string {
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		need(t, "redis-server ("+bin+")")
	}
	return path
}

func modulePath(t testing.TB) string {
	p := os.Getenv("SECKILL_MODULE")
	if p == "" {
		p = filepath.Join(repoRoot, "target", "release", "libredis_seckill.so")
	}
	abs, err := filepath.Abs(p)
	if err != nil || !fileExists(abs) {
		need(t, "the module at "+p+" (SECKILL_MODULE)")
	}
	return abs
}

func libraryCode(t testing.TB) string {
	code, err := os.ReadFile(filepath.Join(repoRoot, "functions", "seckill.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(code)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func freePort(t testing.TB) int {
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// below 55535: a cluster node also listens on port + 10000
		if port != 6379 && port < 55535 {
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// startServer starts a redis-server, with the module when module != "".
func startServer(t testing.TB, module string, extra ...string) *server {
	dir, err := os.MkdirTemp("", "seckill-go-")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{port: freePort(t), dir: dir}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--enable-debug-command", "yes", "--logfile", "server.log"}
	if module != "" {
		args = append(args, "--loadmodule", module)
	}
	launch(t, s, append(args, extra...)...)
	rdb := redis.NewClient(&redis.Options{Addr: s.addr()})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("redis-server on %d did not answer within 10 s:\n%s", s.port, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// stop ends the server by its pid: SIGTERM, then SIGKILL after 10 s.
func (s *server) stop() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}

func stopServers() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for _, s := range started {
		s.stop()
	}
	started = nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopServers()
	os.Exit(code)
}

// shared servers, started once for the tests that need them
var (
	onceModule, onceLibrary, onceCluster sync.Once
	moduleSrv, librarySrv                *server
	clusterSrvs                          []*server
)

func moduleServer(t testing.TB) *server {
	mod := modulePath(t)
	onceModule.Do(func() { moduleSrv = startServer(t, mod) })
	if moduleSrv == nil {
		t.Fatal("the module server did not start")
	}
	return moduleSrv
}

// libraryServer: a plain server (no module) with functions/seckill.lua.
func libraryServer(t testing.TB) *server {
	code := libraryCode(t)
	onceLibrary.Do(func() {
		s := startServer(t, "")
		rdb := redis.NewClient(&redis.Options{Addr: s.addr()})
		defer rdb.Close()
		if err := rdb.FunctionLoadReplace(context.Background(), code).Err(); err != nil {
			t.Fatalf("FUNCTION LOAD: %v", err)
		}
		librarySrv = s
	})
	if librarySrv == nil {
		t.Fatal("the library server did not start")
	}
	return librarySrv
}

// cluster: three masters with the module (and the library loaded on each,
// for the Functions backend over a cluster), slots 0-5460, 5461-10922,
// 10923-16383.
func cluster(t testing.TB) []*server {
	mod, code := modulePath(t), libraryCode(t)
	onceCluster.Do(func() { clusterSrvs = startCluster(t, mod, code) })
	if len(clusterSrvs) != 3 {
		t.Fatal("the cluster did not start")
	}
	return clusterSrvs
}

func startCluster(t testing.TB, mod, code string) []*server {
	ctx := context.Background()
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	var nodes []*server
	for i := range ranges {
		s := startServer(t, mod, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		nodes = append(nodes, s)
		rdb := redis.NewClient(&redis.Options{Addr: s.addr()})
		must(t, rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err())
		must(t, rdb.FunctionLoadReplace(ctx, code).Err())
		rdb.Close()
	}
	first := redis.NewClient(&redis.Options{Addr: nodes[0].addr()})
	defer first.Close()
	for _, s := range nodes[1:] {
		must(t, first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port).Err())
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: s.addr()})
		for {
			info, _ := rdb.ClusterInfo(ctx).Result()
			slots, _ := rdb.ClusterSlots(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && len(slots) == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not come up within 30 s: %s", info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		rdb.Close()
	}
	return nodes
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// stat reads one counter of INFO section on a node: field "calls" of
// cmdstat_<cmd> (commandstats), or "count" of errorstat_<code> (errorstats).
// 0 when the line is absent.
func stat(t testing.TB, rdb *redis.Client, section, name, field string) int64 {
	info, err := rdb.Info(context.Background(), section).Result()
	must(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, field+"="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

func nodeClient(s *server) *redis.Client { return redis.NewClient(&redis.Options{Addr: s.addr()}) }

func uniq(prefix string) string { return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()) }

// launch starts redis-server with args for s; stopServers stops it.
func launch(t testing.TB, s *server, args ...string) {
	s.cmd = exec.Command(serverBinary(t), args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serversMu.Lock()
	started = append(started, s)
	serversMu.Unlock()
}
