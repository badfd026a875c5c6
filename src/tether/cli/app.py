"""The ``tether`` command: a click group, one subcommand per job (``probe`` now; run, chat, config and sessions
join the same group).

``tether --help`` must answer at once, so this module imports only click and ``tether`` itself; each command
imports what it needs (aiohttp, pydantic, providers) when it runs. Exit codes: 0 success, 1 the command's own
failure (for ``probe``: the server is not usable), 2 a usage error (click's).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from tether import __version__
from tether.cli.config_commands import config as config_group

if TYPE_CHECKING:
    from tether.providers.probe import ProbeResult


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="tether", message="%(prog)s %(version)s")
def main() -> None:
    """Run LLM agents from the command line."""


@main.command()
@click.argument("url")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each request.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--api-key",
    metavar="KEY",
    envvar="TETHER_PROBE_API_KEY",
    show_envvar=True,
    help="API key for a server that wants one.",
)
def probe(url: str, timeout: float, as_json: bool, api_key: str | None) -> None:
    """Check that the model server at URL is up and list its models.

    URL is host:port, http://host:port or the server's base URL ending in /v1, for example localhost:11434
    (Ollama), localhost:8000 (vLLM) or localhost:8080 (llama.cpp). Exits with 0 when tether can use the
    server, 1 when it cannot.
    """
    import asyncio

    from tether.errors import ConfigInvalid
    from tether.providers.probe import probe as run_probe

    try:
        result = asyncio.run(run_probe(url, timeout=timeout, api_key=api_key))
    except ConfigInvalid as error:
        raise click.BadParameter(error.message, param_hint="URL") from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(probe_summary(result), err=not result.ok)
    sys.exit(0 if result.ok else 1)


def probe_summary(result: ProbeResult) -> str:
    """A few lines for people: the verdict, what answered, the base URL, the models, the message."""
    lines = [f"{'ok' if result.ok else 'not ok'}: {result.url} ({result.latency_ms:g} ms)"]
    if result.kinds:
        lines.append(f"answered as: {', '.join(result.kinds)}")
    if result.ok:
        lines.append(f"base URL: {result.base_url}")
    if result.kinds:
        lines.append(f"models ({len(result.models)}):")
        lines.extend(f"  {model}" for model in result.models)
    lines.append(result.message)
    return "\n".join(lines)


main.add_command(config_group)  # its module imports only click; each command loads what it needs


if __name__ == "__main__":
    main(prog_name="tether")
