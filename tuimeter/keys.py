"""How a setting is declared: one :class:`Key` per setting (its config.toml key, its
environment variable, its command-line option, its check and its line in the docs), and
:class:`ConfigError` for a bad value. A leaf: it imports nothing of tuimeter, so an
exporter declaring its keys loads neither the config reader (platformdirs, tomllib) nor
anything else (every ``--help`` builds the exporters' options from their keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping


class ConfigError(ValueError):
    """A bad value in config.toml or an environment variable (one line naming where)."""


@dataclass(frozen=True)
class Key:
    """One setting: its config.toml key, the check of a value from the file or the
    environment (:mod:`tuimeter.checks`), its environment variable, the parsed option
    (``dest``) it fills and the value meaning "not given" there (``negated``: the option
    says the opposite, ``--no-gpu`` for ``gpu``), and what the docs' table says of it
    (``type``, ``default``, ``what``, ``env_note``, ``option``; ``secret``: a file
    holding it should be private).

    ``cli``: the option's argparse flags and keywords, where its declaration also adds
    it to the command line (an exporter's options); ``check_env``: False for a value the
    owner checks itself with its own message (the InfluxDB settings). Declared by their
    owner: the measurement and carbon keys in :mod:`tuimeter.settings`, each exporter's
    in its registry entry (``ExporterEntry.keys``)."""

    name: str
    check: Callable[[object], Any]
    env: str | None
    dest: str | None
    unset: Any = None
    #: the option says the opposite of the key (``--no-gpu`` for ``gpu``)
    negated: bool = False
    type: str = "string"
    default: str = "none"
    what: str = ""
    env_note: str = ""
    option: str = "none"
    cli: tuple[tuple[str, ...], Mapping[str, Any]] | None = None
    check_env: bool = True
    secret: bool = False

    def add_option(self, group: Any) -> None:
        """Add its option to an argparse parser or group (only a key declared with ``cli``)."""
        if self.cli is not None:
            flags, kwargs = self.cli
            group.add_argument(*flags, **kwargs)


def check_value(key: Key, value: object, where: str) -> Any:
    """``value`` of ``key`` checked; ConfigError naming ``where`` (the file and key, or
    the environment variable) when it is bad."""
    try:
        return key.check(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
