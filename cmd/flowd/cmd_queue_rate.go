package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/flowd/flowd/rpc"
	"github.com/urfave/cli/v2"
)

// flowd queue set NAME --rate R [--burst B] [--type T] [--concurrency N]
func queueSetRateAction(cCtx *cli.Context) error {
	if !cCtx.IsSet("rate") {
		return usageErr(cCtx, "--burst and --type shape a rate limit: give --rate R too (tasks per second, 0 removes the limit)")
	}
	rate, burst, typ := cCtx.Float64("rate"), cCtx.Int("burst"), cCtx.String("type")
	if rate < 0 || burst < 0 {
		return usageErr(cCtx, "--rate and --burst must be 0 or more (--rate 0 removes the limit)")
	}
	n, auto, err := concurrencyFlag(cCtx)
	if err != nil {
		return err
	}
	if cCtx.IsSet("concurrency") && !auto && n <= 0 {
		return usageErr(cCtx, "with --rate, --concurrency must be above 0 (set unlimited concurrency in its own call: flowd queue set %s --concurrency 0)", cCtx.Args().First())
	}
	q := cCtx.Args().First()
	p := rpc.QueueSetParams{Name: q, Concurrency: n, Rate: &rate, Burst: burst, Type: typ}
	if auto {
		p.Auto, p.Min, p.Max, p.TargetLatencyMS = true, cCtx.Int("min"), cCtx.Int("max"), cCtx.Duration("target-latency").Milliseconds()
	}
	var res rpc.ChangedResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.CallIdempotent(ctx, rpc.MethodQueueSet, p, &res)
	}); err != nil {
		return err
	}
	what := "queue " + q
	if typ != "" {
		what = "type " + typ + " in queue " + q
	}
	msg := fmt.Sprintf("%s rate limit removed", what)
	if rate > 0 {
		msg = fmt.Sprintf("%s limited to %s/s (burst %d)", what, strconv.FormatFloat(rate, 'f', -1, 64), max(burst, 1))
	}
	return printChanged(cCtx, &res, msg)
}

// rateLimitText renders a queue's limits for queue list: "20/s", with the
// burst when above 1, then per type.
func rateLimitText(q rpc.Queue) string {
	one := func(l rpc.RateLimit) string {
		s := strconv.FormatFloat(l.Rate, 'f', -1, 64) + "/s"
		if l.Burst > 1 {
			s += fmt.Sprintf(" burst %d", l.Burst)
		}
		return s
	}
	var parts []string
	if q.RateLimit != nil {
		parts = append(parts, one(*q.RateLimit))
	}
	types := make([]string, 0, len(q.TypeLimits))
	for t := range q.TypeLimits {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		parts = append(parts, t+":"+one(q.TypeLimits[t]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
