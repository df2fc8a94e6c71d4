"""``introspect init``: a starter inventory and user config, so that a new user's first
``introspect health`` has hosts to check and a remote-code policy they chose.

Nothing is overwritten without ``--force``; both files are checked before either is written
(an existing one stops the run with nothing written), the inventory is parsed by the real
reader first, and each file is written 0600 in directories created 0700: the inventory names
the fleet's hosts, users and key files.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from introspect.cli import help_examples
from introspect.cli.outcome import Finished, Notice
from introspect.errors import UsageError

if TYPE_CHECKING:  # the inventory package and PyYAML load only when init runs
    from introspect.inventory.starter import Starter


@click.command("init", epilog=help_examples.INIT)
@click.option("--ssh-config", "ssh_config", type=click.Path(dir_okay=False),
              help="Read Host entries from this ssh_config file (default ~/.ssh/config).")
@click.option("--from-ansible", "ansible", type=click.Path(dir_okay=False),
              help="Read hosts from this Ansible inventory (INI, YAML, --list JSON) instead.")
@click.option("--inventory", "inventory_out", type=click.Path(dir_okay=False),
              help="Where to write the inventory (default: hosts.yaml beside the user config).")
@click.option("--config", "config_out", type=click.Path(dir_okay=False),
              help="Where to write the user config (default: $INTROSPECT_CONFIG, else "
                   "~/.config/introspect/config.yaml).")
@click.option("--force", is_flag=True, help="Replace files that exist (never done without it).")
@click.option("--print", "--dry-run", "dry_run", is_flag=True, help="Print both files instead of writing them.")
def init(ssh_config: str | None, ansible: str | None, inventory_out: str | None, config_out: str | None,
         force: bool, dry_run: bool) -> Finished:
    """Write a starter inventory (from ~/.ssh/config or an Ansible inventory) and user config."""
    from introspect.inventory.starter import config_text, inventory_text
    from introspect.userconfig import config_path

    if ssh_config and ansible:
        raise UsageError("--ssh-config and --from-ansible both name where the hosts come from",
                         hint="introspect init --from-ansible inventory.ini  # give one of them")
    starter = _starter(ssh_config, ansible)
    config_file = Path(config_out).expanduser() if config_out else config_path()
    inventory_file = Path(inventory_out).expanduser() if inventory_out else config_file.parent / "hosts.yaml"
    files = {config_file.absolute(): config_text(str(inventory_file.absolute()) if starter.hosts else None)}
    if starter.hosts:
        files = {inventory_file.absolute(): inventory_text(starter), **files}
        _check_inventory(files, inventory_file.absolute())
    notices = [Notice(f"skipped host {name!r} from {starter.source}: {why}", level="warning")
               for name, why in starter.skipped]
    if not starter.hosts:
        notices.append(Notice(f"no host names in {starter.source}: no inventory written",
                              "introspect init --from-ansible inventory.ini  # or --ssh-config FILE",
                              level="warning"))
    if dry_run:
        click.echo("\n".join(f"# ==> {path} <==\n{text}" for path, text in files.items()), nl=False)
        return Finished(0, tuple(notices))
    again = _command(ssh_config=ssh_config, from_ansible=ansible, inventory=inventory_out, config=config_out)
    _refuse_existing(files, force, again)
    for path, text in files.items():
        _write_private(path, text)
    _report(files, starter)
    return Finished(0, tuple(notices))


def _command(**options: str | None) -> str:
    """This run's ``introspect init`` line (its file options), for a fix to extend."""
    words = ["introspect", "init"]
    for name, value in options.items():
        if value:
            words += [f"--{name.replace('_', '-')}", shlex.quote(value)]
    return " ".join(words)


def _starter(ssh_config: str | None, ansible: str | None) -> Starter:
    from introspect.inventory import InventoryError, load_inventory_file
    from introspect.inventory.starter import DEFAULT_SSH_CONFIG, Starter, from_inventory, from_ssh_config

    if ansible:
        try:
            return from_inventory(load_inventory_file(ansible))
        except InventoryError as exc:
            raise UsageError(str(exc), hint=f"ansible-inventory -i {shlex.quote(ansible)} --list  "
                                            "# check it reads as Ansible reads it") from None
    if ssh_config is None and not os.path.isfile(os.path.expanduser(DEFAULT_SSH_CONFIG)):
        return Starter(DEFAULT_SSH_CONFIG)  # no ssh_config: the user config alone
    return from_ssh_config(ssh_config)


def _check_inventory(files: dict[Path, str], path: Path) -> None:
    """The inventory through the real parser before anything is written (a host that the
    parser refuses would fail every later command)."""
    from introspect.inventory import InventoryError, parse_inventory

    try:
        parse_inventory(files[path], str(path))
    except InventoryError as exc:  # pragma: no cover - Starter.add checks what the parser checks
        raise UsageError(f"the starter inventory would not load: {exc}",
                         hint="introspect init --print  # see the file, then fix the source entry") from None


def _refuse_existing(files: dict[Path, str], force: bool, again: str) -> None:
    for path in files:
        if path.is_dir():
            raise UsageError(f"{path} is a directory, not a file to write",
                             hint=f"{again} --config ~/x/config.yaml --inventory ~/x/hosts.yaml  # elsewhere")
    existing = [str(path) for path in files if os.path.lexists(path)]
    if existing and not force:
        raise UsageError(f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                         "init never overwrites a file (nothing was written)",
                         hint=f"{again} --force  # replaces them; --print shows what it would write")


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, 0600, through a temporary file renamed over it (a reader never
    sees half a file, and an existing file's looser mode is not kept)."""
    from introspect.userconfig import make_private_dirs

    try:
        make_private_dirs(path.parent)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temp, path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}",
                         hint=f"ls -ld {shlex.quote(str(path.parent))}  # or pass --config/--inventory") from None


def _report(files: dict[Path, str], starter: Starter) -> None:
    from introspect.cli.render_term import fold_lines

    *inventory, config = list(files)  # the inventory first, when there is one
    lines = [f"wrote {path} ({len(starter.hosts)} hosts from {starter.source})" for path in inventory]
    lines.append(f"wrote {config} (the user config)")
    # Commands stay whole on their lines (as `To fix:` lines do): a folded one cannot be pasted.
    commands = ["introspect env      # each setting and where it came from"]
    if starter.hosts:
        commands += ["introspect health   # every host's venvs",
                     f"introspect probe --host {shlex.quote(next(iter(starter.hosts)))} --model /path/to/model"]
    click.echo("\n".join([*(folded for line in lines for folded in fold_lines(line)), "", "Next:",
                          *(f"  {command}" for command in commands)]))
