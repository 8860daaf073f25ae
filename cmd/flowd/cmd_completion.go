package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

func init() { commands = append(commands, completionCommand) }

var completionCommand = &cli.Command{
	Name:      "completion",
	Usage:     "print a shell completion script",
	ArgsUsage: "bash|zsh|fish",
	Description: "   bash: source <(flowd completion bash)\n" +
		"   zsh:  source <(flowd completion zsh)\n" +
		"   fish: flowd completion fish | source\n\n" +
		"The bash and zsh scripts complete flowd, bin/flowd and ./bin/flowd (a checkout's\n" +
		"make build); fish matches a command by its base name already.",
	Action: completionAction,
}

// The bash and zsh scripts ask the binary itself for candidates
// (--generate-bash-completion, urfave/cli's protocol).
const bashCompletion = `# flowd bash completion: source <(flowd completion bash)
_flowd_complete() {
  local cur words
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[0]}" "${words[@]:1}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[0]}" "${words[@]:1}" --generate-bash-completion 2>/dev/null)
  fi
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
# Registered for the names it is run by from a checkout too (make run builds
# bin/flowd), not only for flowd on the PATH.
complete -o bashdefault -o default -F _flowd_complete flowd bin/flowd ./bin/flowd
`

const zshCompletion = `#compdef flowd
# flowd zsh completion: source <(flowd completion zsh)
_flowd() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _flowd flowd bin/flowd ./bin/flowd
`

func completionAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "bash|zsh|fish"); err != nil {
		return err
	}
	w := cCtx.App.Writer
	switch sh := strings.ToLower(cCtx.Args().First()); sh {
	case "bash":
		_, err := fmt.Fprint(w, bashCompletion)
		return err
	case "zsh":
		_, err := fmt.Fprint(w, zshCompletion)
		return err
	case "fish":
		s, err := cCtx.App.ToFishCompletion()
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(w, s)
		return err
	default:
		return usageErr(cCtx, "unknown shell %q: want bash, zsh or fish", sh)
	}
}
