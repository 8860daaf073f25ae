package main

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, rpcCommand) }

var rpcCommand = &cli.Command{
	Name:      "rpc",
	Usage:     "call any JSON-RPC method and print its result",
	ArgsUsage: "METHOD [PARAMS_JSON | @file | -]",
	Description: "Prints the result as indented JSON, or the error object {code, message, data}\n" +
		"(and exits 1). Example: flowd rpc run.get '{\"id\":\"3f9a1c2b7d4e\"}'",
	Action: rpcAction,
}

func rpcAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 2, "METHOD [PARAMS]"); err != nil {
		return err
	}
	method := cCtx.Args().Get(0)
	var params json.RawMessage
	switch arg := cCtx.Args().Get(1); {
	case arg == "-":
		b, err := readFileArg(cCtx, "-")
		if err != nil {
			return err
		}
		if params = json.RawMessage(strings.TrimSpace(string(b))); !json.Valid(params) {
			return usageErr(cCtx, "params from stdin are not valid JSON")
		}
	case arg != "":
		var err error
		if params, err = jsonArg(cCtx, "PARAMS", arg); err != nil {
			return err
		}
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callCtx(cCtx)
	defer cancel()
	res, err := c.Raw(ctx, method, params)
	if err != nil {
		pe, ok := errors.AsType[*rpc.Error](err)
		if !ok {
			return err
		}
		_ = printJSON(cCtx.App.Writer, pe)
		return exitWith(exitError)
	}
	var v any
	if json.Unmarshal(res, &v) != nil {
		_, err := cCtx.App.Writer.Write(append(res, '\n'))
		return err
	}
	return printJSON(cCtx.App.Writer, json.RawMessage(res))
}
