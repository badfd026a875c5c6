"""``tether models``: what can be run (known prices, provider prefixes, the GGUF models on disk), and ``tether
models pull``, which fetches a GGUF model from the Hugging Face Hub (``providers/local/hub.py``).

Like every command module, it imports only click at first: the Hub's client is imported when a pull starts.
Exit codes of ``pull``: 0 pulled (or already there), 1 a bad name or a missing extra (``config_invalid``), 4 the
download failed (``download_failed``, ``checksum_mismatch``), 130 interrupted (the part downloaded is kept, and
the next pull resumes it).
"""

from __future__ import annotations

import os
import sys

import click

from tether.cli.config_flag import config_option
from tether.cli.exits import CANCELLED, CONFIG, ERROR
from tether.cli.help import WholeSummaries


@click.group(cls=WholeSummaries, invoke_without_command=True)
@config_option
@click.pass_context
def models(context: click.Context, config_file: str | None) -> None:
    """List the models with known prices, the providers with the variables holding their keys, the providers
    the configuration adds ([providers.NAME]), and the GGUF models pulled to disk (run each as local:NAME)."""
    if context.invoked_subcommand is None:
        from tether.cli.catalog import catalog
        from tether.config import load_config
        from tether.errors import ConfigInvalid

        try:
            configured = load_config(config_file=config_file).providers
        except ConfigInvalid as exc:  # the built-in list is still worth showing; the problem is named
            click.echo(f"configuration not read: {exc}", err=True)
            configured = {}
        click.echo(catalog(os.environ, configured))


@models.command(short_help="Download a GGUF model from the Hugging Face Hub; run it as local:NAME.")
@click.argument("spec", metavar="REPO[/FILE.gguf]")
@click.option("--revision", default="main", show_default=True, help="The branch, tag or commit to pull from.")
def pull(spec: str, revision: str) -> None:
    """Download a GGUF model from the Hugging Face Hub, verified, into its cache; then run it as local:NAME.

    REPO alone (OWNER/NAME) pulls its only GGUF file, else its Q4_K_M one. An interrupted pull resumes
    where it stopped. The cache is the Hub's: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
    """
    from tether.cli.catalog import file_size
    from tether.errors import ConfigInvalid, TetherError
    from tether.providers.local import hub

    try:
        repo, wanted = hub.parse_spec(spec)
        file = hub.describe(repo, wanted, revision)
        click.echo(
            f"tether: pulling {file.repo}/{file.filename} ({file_size(file.size)}, commit {file.commit[:12]})",
            err=True,
        )
        pulled = hub.fetch(file, revision)
    except ConfigInvalid as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(CONFIG)
    except TetherError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(ERROR)
    except KeyboardInterrupt:
        click.echo("\ntether: pull interrupted; what was downloaded is kept, and pulling again resumes it", err=True)
        sys.exit(CANCELLED)
    click.echo(f"tether: SHA-256 verified ({file.sha256}); the file is {pulled.path}", err=True)
    click.echo(f"local:{pulled.name}")
    click.echo(f'Run it: tether run --model local:{pulled.name} "..."', err=True)
