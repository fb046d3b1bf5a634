package seckill

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The example runs as its doc comment says: go run ./examples/tryreserve,
// on a single server and on the cluster, and a retry of its reservation id
// answers DUPLICATE.
func TestExampleTryReserveRuns(t *testing.T) {
	sku := uniq("ex")
	single := moduleServer(t).addr()
	nodes := cluster(t)
	for _, target := range [][]string{{"-addr", single}, {"-cluster", nodes[0].addr() + "," + nodes[1].addr()}} {
		for i, want := range []string{"RESERVED id=order-1 remaining=1 ok=true", "DUPLICATE id=order-1 remaining=1 ok=true"} {
			args := append([]string{"run", "./examples/tryreserve"}, target...)
			args = append(args, "-sku", sku, "-user", "7", "-reqid", "order-1", "-init", "2")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), want) {
				t.Fatalf("run %d of go %v: %v\n%s", i, args, err, out)
			}
		}
		sku += "b"
	}
}
