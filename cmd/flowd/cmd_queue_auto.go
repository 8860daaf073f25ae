package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/flowd/flowd/rpc"
	"github.com/urfave/cli/v2"
)

// flowd queue set NAME --concurrency auto --min N --max M [--target-latency D]

// concurrencyFlag reads --concurrency: a number, or auto.
func concurrencyFlag(cCtx *cli.Context) (n int, auto bool, err error) {
	v := cCtx.String("concurrency")
	if !cCtx.IsSet("concurrency") {
		if cCtx.IsSet("min") || cCtx.IsSet("max") || cCtx.IsSet("target-latency") {
			return 0, false, usageErr(cCtx, "--min, --max and --target-latency go with --concurrency auto")
		}
		return 0, false, nil
	}
	if v == "auto" {
		return 0, true, nil
	}
	if cCtx.IsSet("min") || cCtx.IsSet("max") || cCtx.IsSet("target-latency") {
		return 0, false, usageErr(cCtx, "--min, --max and --target-latency go with --concurrency auto, not --concurrency %s", v)
	}
	n, err = strconv.Atoi(v)
	if err != nil {
		return 0, false, usageErr(cCtx, "--concurrency %q: want a number (0 = unlimited) or auto", v)
	}
	return n, false, nil
}

func queueSetAutoAction(cCtx *cli.Context) error {
	min, max := cCtx.Int("min"), cCtx.Int("max")
	if !cCtx.IsSet("min") || !cCtx.IsSet("max") {
		return usageErr(cCtx, "--concurrency auto needs --min N (the floor, at least 1) and --max M (the ceiling)")
	}
	if min < 1 || max < min {
		return usageErr(cCtx, "--min %d --max %d: want 1 <= min <= max", min, max)
	}
	target := cCtx.Duration("target-latency")
	if cCtx.IsSet("target-latency") && target < time.Millisecond {
		return usageErr(cCtx, "--target-latency %s: want at least 1ms", target)
	}
	q := cCtx.Args().First()
	var res *rpc.ChangedResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = c.QueueSetAuto(ctx, q, min, max, target.Milliseconds())
		return err
	}); err != nil {
		return err
	}
	if target == 0 {
		target = time.Second
	}
	return printChanged(cCtx, res, fmt.Sprintf("queue %s concurrency set to auto between %d and %d (target latency %s)", q, min, max, target))
}

// concurrencyText is queue list's CONCURRENCY column: the cap, and for an
// auto queue its bounds ("auto 4 (1-8 <250ms)").
func concurrencyText(q rpc.Queue) string {
	if q.Auto != nil {
		return fmt.Sprintf("auto %d (%d-%d <%s)", q.Concurrency, q.Auto.Min, q.Auto.Max,
			time.Duration(q.Auto.TargetLatencyMS)*time.Millisecond)
	}
	if q.Concurrency > 0 {
		return fmt.Sprint(q.Concurrency)
	}
	return "unlimited"
}
