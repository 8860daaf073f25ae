package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/internal/pki"
)

func init() { commands = append(commands, tlsCommand) }

var tlsCommand = &cli.Command{
	Name:  "tls",
	Usage: "make the certificates agents authenticate each other with (mutual TLS)",
	Description: "Raft and forwarding traffic between agents uses mutual TLS when every agent gets\n" +
		"--tls-ca, --tls-cert and --tls-key. Make a CA once, then one certificate per node:\n\n" +
		"   flowd tls ca create --dir /etc/flowd/tls\n" +
		"   flowd tls cert create --ca-dir /etc/flowd/tls --node n1 --dir /etc/flowd/tls --dns n1.example.com --ip 10.0.0.1\n" +
		"   flowd agent --node-id n1 ... --tls-ca /etc/flowd/tls/ca.pem --tls-cert /etc/flowd/tls/n1.pem \\\n" +
		"               --tls-key /etc/flowd/tls/n1-key.pem\n\n" +
		"Keep ca-key.pem off the nodes if you can: a node needs ca.pem and its own pair only.\n" +
		"To rotate, make a new pair, put it in place and send the agent SIGHUP.",
	Subcommands: []*cli.Command{
		{
			Name:  "ca",
			Usage: "the cluster certificate authority",
			Subcommands: []*cli.Command{{
				Name:  "create",
				Usage: "write a new CA: DIR/ca.pem and DIR/ca-key.pem (never overwrites)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Value: ".", EnvVars: []string{"FLOWD_TLS_DIR"}, TakesFile: true, Usage: "where to write the CA"},
					&cli.DurationFlag{Name: "validity", EnvVars: []string{"FLOWD_TLS_CA_VALIDITY"}, Usage: "how long the CA is valid", DefaultText: "87600h (10 years)"},
					&cli.BoolFlag{Name: "if-missing", EnvVars: []string{"FLOWD_TLS_IF_MISSING"}, Usage: "succeed without writing when the files already exist (for scripts and compose)"},
				},
				Action: tlsCACreate,
			}},
		},
		{
			Name:  "cert",
			Usage: "node certificates",
			Subcommands: []*cli.Command{{
				Name:  "create",
				Usage: "sign a node certificate: DIR/ID.pem and DIR/ID-key.pem (SAN = ID, never overwrites)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "ca-dir", Value: ".", EnvVars: []string{"FLOWD_TLS_CA_DIR"}, TakesFile: true, Usage: "directory holding ca.pem and ca-key.pem"},
					&cli.StringSliceFlag{Name: "node", EnvVars: []string{"FLOWD_TLS_NODE"}, Usage: "the node `ID` (its --node-id); repeat or comma-separate for several nodes"},
					&cli.StringFlag{Name: "dir", Value: ".", EnvVars: []string{"FLOWD_TLS_DIR"}, TakesFile: true, Usage: "where to write the certificate and key"},
					&cli.StringSliceFlag{Name: "dns", EnvVars: []string{"FLOWD_TLS_DNS"}, Usage: "extra DNS name for the certificate (repeatable)"},
					&cli.StringSliceFlag{Name: "ip", EnvVars: []string{"FLOWD_TLS_IP"}, Usage: "IP address for the certificate (repeatable)"},
					&cli.DurationFlag{Name: "validity", EnvVars: []string{"FLOWD_TLS_CERT_VALIDITY"}, Usage: "how long the certificate is valid (at most the CA's remaining life)", DefaultText: "26280h (3 years)"},
					&cli.BoolFlag{Name: "if-missing", EnvVars: []string{"FLOWD_TLS_IF_MISSING"}, Usage: "succeed without writing when the files already exist (for scripts and compose)"},
				},
				Action: tlsCertCreate,
			}},
		},
	},
}

func tlsCACreate(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments (use --dir)"); err != nil {
		return err
	}
	dir := cCtx.String("dir")
	cert, key, err := pki.CreateCA(dir, cCtx.Duration("validity"))
	if errors.Is(err, pki.ErrExists) && cCtx.Bool("if-missing") {
		cert, key = pki.CAFiles(dir)
		fmt.Fprintf(cCtx.App.Writer, "kept the existing CA: %s, %s\n", cert, key)
		return nil
	}
	if err != nil {
		return failf("", "create CA: %v", err)
	}
	fmt.Fprintf(cCtx.App.Writer, "wrote %s (give it to every agent as --tls-ca)\nwrote %s (keep it secret; it signs node certificates)\n", cert, key)
	return nil
}

func tlsCertCreate(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments (use --node ID)"); err != nil {
		return err
	}
	nodes := cCtx.StringSlice("node")
	if len(nodes) == 0 {
		return usageErr(cCtx, "--node ID is required (the --node-id of the agent the certificate is for)")
	}
	ips, err := pki.ParseIPs(cCtx.StringSlice("ip"))
	if err != nil {
		return usageErr(cCtx, "%v", err)
	}
	opts := pki.NodeCertOptions{IPs: ips, DNSNames: cCtx.StringSlice("dns"), Validity: cCtx.Duration("validity")}
	dir := cCtx.String("dir")
	for _, id := range nodes {
		if err := pki.ValidNodeID(id); err != nil {
			return usageErr(cCtx, "%v", err)
		}
		cert, key, err := pki.CreateNodeCert(cCtx.String("ca-dir"), id, dir, opts)
		if errors.Is(err, pki.ErrExists) && cCtx.Bool("if-missing") {
			cert, key = pki.NodeFiles(dir, id)
			fmt.Fprintf(cCtx.App.Writer, "kept the existing certificate of %s: %s, %s\n", id, cert, key)
			continue
		}
		if err != nil {
			return failf("", "create the certificate of %s: %v", id, err)
		}
		fmt.Fprintf(cCtx.App.Writer, "wrote %s and %s (agent %s: --tls-cert %s --tls-key %s)\n", cert, key, id, cert, key)
	}
	return nil
}
