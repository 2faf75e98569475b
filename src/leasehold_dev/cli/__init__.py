"""The `leasehold` command, one module a command group: `local` (the embedded local stack and
`invoke`), `jobs` (submit, show), `ops` (the operator's commands), `schedules`, `login` (a
deployed stack's sign-in), `provider`, `documents` (docs put), `project` (new, template) and
`checks` (smoke, demo). `commands` builds the parser from them; `target` finds the stack a
command talks to, the same way for every command, and holds CliError. Every request to the API
goes through leasehold.Client.

`python -m leasehold_dev.cli` and the `leasehold` script both run `main`."""

from leasehold_dev.cli.commands import build_parser, main
from leasehold_dev.cli.target import CliError

__all__ = ["CliError", "build_parser", "main"]
