package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

func init() { commands = append(commands, readyCommand) }

// readyCommand is a container healthcheck and readiness probe that needs no
// curl: the image is FROM scratch.
var readyCommand = &cli.Command{
	Name:  "ready",
	Usage: "exit 0 if the agent's HTTP /readyz answers 200, else print why and exit 1 (a healthcheck for containers)",
	Description: "Asks the agent listening on --http-addr (FLOWD_HTTP_ADDR, the same variable the agent reads,\n" +
		"so inside an agent's container no flag is needed). An unspecified host (0.0.0.0, [::] or none)\n" +
		"means this machine. The default is where `flowd dev`'s first agent serves (its --http-base-port).",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "http-addr", Usage: "the agent's HTTP listener `HOST:PORT` (default: the first agent of flowd dev)", Value: "127.0.0.1:9001", EnvVars: []string{"FLOWD_HTTP_ADDR"}},
		&cli.StringFlag{Name: "path", Usage: "the endpoint to ask (/readyz, or /healthz for liveness)", Value: "/readyz"},
	},
	Action: readyAction,
}

func readyAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments (the address is --http-addr)"); err != nil {
		return err
	}
	url, err := readyURL(cCtx.String("http-addr"), cCtx.String("path"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cCtx.Context, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cli.Exit(fmt.Sprintf("not ready: %v (is the agent running with --http-addr %s?)", err, cCtx.String("http-addr")), 1)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return cli.Exit(fmt.Sprintf("%s: %d %s", url, resp.StatusCode, msg), 1)
	}
	_, err = fmt.Fprintln(cCtx.App.Writer, msg)
	return err
}

// readyURL makes the URL of path on the listener addr, dialling this
// machine for an unspecified host.
func readyURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http-addr %q: want HOST:PORT, such as 127.0.0.1:9000", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
