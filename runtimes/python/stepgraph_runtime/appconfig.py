"""The rules of langgraph.json's keys around the graphs, in one place.

Both a local deployment's revision and ``stepgraph dev`` load an app
through here, so they accept and refuse the same files:

- ``env``: a map of names to strings, or the path of a dotenv file inside
  the app. It is set before the graphs are imported; a name the process
  already has (a deployment secret, PATH, HOME) keeps its value. Values are
  never in a message.
- ``store.ttl`` (``default_ttl`` in minutes, ``refresh_on_read``,
  ``sweep_interval_minutes``) and ``store.index`` (``embed``, ``dims``,
  ``fields``) become the graph store's defaults: a put without a ttl gets
  ``default_ttl``, reads refresh TTLs unless ``refresh_on_read`` is false,
  a put without an index embeds ``fields``. The embedding is the server's
  embeddings endpoint's (its model); an index on a server without one is
  refused. The server's sweeper removes expired items on its own schedule.
- ``checkpointer``, ``auth``, ``http`` and ``store.path`` are refused,
  saying what to do instead: stepgraph owns checkpointing, authentication,
  the HTTP server and the store.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

# The platform says so when its store has an embeddings endpoint.
SEMANTIC_ENV = "STEPGRAPH_STORE_SEMANTIC"

OWNED = {
    "checkpointer": "stepgraph stores every checkpoint of the app's graphs itself, in its own store; "
                    "remove /checkpointer (a custom checkpointer or checkpoint TTLs are not used here)",
    "auth": "stepgraph authenticates every request itself (API keys of organizations); "
            "remove /auth (a custom @auth handler is not run here)",
    "http": "stepgraph serves the HTTP API itself; remove /http (custom routes, middleware and its CORS settings "
            "are not served here: the operator sets CORS with stepgraph serve -cors-origins)",
}
STORE_OWNED = ("path", "stepgraph's store API is the graphs' store; remove /store/path (a custom store is not used here)")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_DOTENV_BYTES = 1 << 20


class ConfigError(Exception):
    """A key of langgraph.json breaks a rule; the message names it."""


@dataclass
class StoreSettings:
    """The graph store's defaults (langgraph's TTLConfig and index fields)."""

    ttl: dict | None = None  # {"refresh_on_read": bool, "default_ttl": float | None}
    index_fields: list[str] | None = None
    indexed: bool = False


@dataclass
class Settings:
    env: dict[str, str] = field(default_factory=dict)
    store: StoreSettings = field(default_factory=StoreSettings)


def check(config: dict, config_path: str) -> Settings:
    """Checks the keys around the graphs and returns what they set."""
    for key, why in OWNED.items():
        if key in config:
            raise ConfigError(f"{config_path}: /{key}: {why}")
    root = os.path.dirname(os.path.abspath(config_path))
    return Settings(env=_env(config.get("env"), root, config_path), store=_store(config.get("store"), config_path))


def apply(settings: Settings, environ=os.environ) -> None:
    """Sets the app's environment; names the process has keep their values
    (a deployment's secret of the same name wins)."""
    for name, value in settings.env.items():
        environ.setdefault(name, value)


def require_semantic(settings: Settings, config_path: str, environ=os.environ) -> None:
    """An index needs the server's embeddings endpoint."""
    if settings.store.indexed and environ.get(SEMANTIC_ENV) != "1":
        raise ConfigError(
            f"{config_path}: /store/index: semantic search needs the server's embeddings endpoint and this server has none "
            "(its operator starts it with -store-embeddings-url); remove /store/index to store items without embeddings")


def _env(env, root: str, config_path: str) -> dict[str, str]:
    if env is None:
        return {}
    if isinstance(env, str):
        return _dotenv(env, root, config_path)
    if not isinstance(env, dict):
        raise ConfigError(f"{config_path}: /env: must be an object of names to strings, or the path of a dotenv file")
    for name, value in env.items():
        _check_name(name, f"{config_path}: /env/{name}")
        if not isinstance(value, str):
            raise ConfigError(f"{config_path}: /env/{name}: must be a string")
    return dict(env)


def _check_name(name: str, where: str) -> None:
    if not _NAME.fullmatch(name):
        raise ConfigError(f"{where}: is not an environment variable name (letters, digits and _, not first a digit)")
    if name.upper().startswith("STEPGRAPH_"):
        raise ConfigError(f"{where}: names starting with STEPGRAPH_ are the platform's")


def _dotenv(path: str, root: str, config_path: str) -> dict[str, str]:
    file = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([file, os.path.realpath(root)]) != os.path.realpath(root):
        raise ConfigError(f"{config_path}: /env: {path}: must be a file inside the app's directory")
    if not os.path.isfile(file):
        raise ConfigError(f"{config_path}: /env: {path}: no such file")
    if os.path.getsize(file) > MAX_DOTENV_BYTES:
        raise ConfigError(f"{config_path}: /env: {path}: is larger than 1 MiB")
    with open(file, encoding="utf-8", errors="replace") as f:
        return parse_dotenv(f.read(), f"{config_path}: /env: {path}")


def parse_dotenv(text: str, where: str) -> dict[str, str]:
    """NAME=value lines as dotenv files write them: comments, blank lines,
    ``export``, single quotes (literal) and double quotes (with \\n, \\" and
    \\\\ escapes). A broken line is named by its number, never its text."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, eq, value = line.partition("=")
        name = name.strip()
        if not eq:
            raise ConfigError(f"{where}: line {n}: must be NAME=value")
        _check_name(name, f"{where}: line {n}")
        out[name] = _dotenv_value(value.strip(), f"{where}: line {n}")
    return out


def _dotenv_value(v: str, where: str) -> str:
    if v[:1] not in ("'", '"'):
        return re.split(r"\s+#", v, maxsplit=1)[0].rstrip()  # an unquoted value ends at a comment
    quote, out, i = v[0], [], 1
    while i < len(v):
        c = v[i]
        if c == quote:
            return "".join(out)
        if quote == '"' and c == "\\" and i + 1 < len(v) and v[i + 1] in 'n"\\':
            out.append("\n" if v[i + 1] == "n" else v[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    raise ConfigError(f"{where}: its quote is not closed")


def _store(store, config_path: str) -> StoreSettings:
    if store is None:
        return StoreSettings()
    where = f"{config_path}: /store"
    if not isinstance(store, dict):
        raise ConfigError(f"{where}: must be an object (index, ttl)")
    if STORE_OWNED[0] in store:
        raise ConfigError(f"{where}/{STORE_OWNED[0]}: {STORE_OWNED[1]}")
    out = StoreSettings()
    if store.get("ttl") is not None:
        out.ttl = _ttl(store["ttl"], f"{where}/ttl")
    if store.get("index") is not None:
        out.index_fields = _index(store["index"], f"{where}/index")
        out.indexed = True
    return out


def _ttl(ttl, where: str) -> dict:
    if not isinstance(ttl, dict):
        raise ConfigError(f"{where}: must be an object (default_ttl, refresh_on_read, sweep_interval_minutes)")
    refresh = ttl.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise ConfigError(f"{where}/refresh_on_read: must be true or false")
    default = ttl.get("default_ttl")
    if default is not None and (not _number(default) or default <= 0):
        raise ConfigError(f"{where}/default_ttl: must be a number of minutes above 0, or null for no expiry")
    sweep = ttl.get("sweep_interval_minutes")
    if sweep is not None and (not isinstance(sweep, int) or isinstance(sweep, bool) or sweep <= 0):
        raise ConfigError(f"{where}/sweep_interval_minutes: must be a whole number of minutes above 0")
    return {"refresh_on_read": refresh, "default_ttl": float(default) if default is not None else None}


def _index(index, where: str) -> list[str] | None:
    if not isinstance(index, dict):
        raise ConfigError(f"{where}: must be an object (embed, dims, fields)")
    dims = index.get("dims")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims <= 0):
        raise ConfigError(f"{where}/dims: must be a whole number above 0")
    if index.get("embed") is not None and not isinstance(index["embed"], str):
        raise ConfigError(f"{where}/embed: must be a string (the server's embeddings endpoint embeds, with its model)")
    fields = index.get("fields")
    if fields is None:
        return None
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise ConfigError(f"{where}/fields: must be a non-empty list of field paths (\"$\" is the whole value)")
    return list(fields)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
