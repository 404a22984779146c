"""Installing an app's dependencies: ``python -m stepgraph_runtime.env``.

Reads the ``dependencies`` of langgraph.json as the upstream CLI does: a
local path ("." or "./pkg") contributes its own declared dependencies (its
pyproject.toml's ``[project].dependencies``, or its requirements.txt), and
any other entry is a requirement (``"langchain-openai==0.3.0"``). The
requirements the interpreter's environment already satisfies are left
alone; the others are installed with pip into ``--target`` (the revision's
own site directory, put on PYTHONPATH when its runtime starts), so every
revision gets the versions the app pins without changing the base
environment. ``--no-index --find-links DIR`` installs from a wheelhouse only.

For another machine (``stepgraph build``'s Lambda zip): ``--all`` installs
every requirement, the runtime's own (``--requirements FILE``) too, and
``--platform TAG --python-version X.Y`` makes pip choose binary wheels for
that platform only, without compiling them.

It prints one JSON line: ``{"satisfied": [...], "installed": [...]}``, or
``{"error": {"error": ..., "message": ...}}`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement

from .app import AppError, read_config


def requirements(config_path: str) -> list[str]:
    config = read_config(config_path)
    root = os.path.dirname(os.path.abspath(config_path))
    out: list[str] = []
    deps = config.get("dependencies") or []
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise AppError(f"{config_path}: /dependencies: must be a list of strings")
    for dep in deps:
        if dep == "." or dep.startswith(("./", "../")):
            d = os.path.normpath(os.path.join(root, dep))
            if not os.path.isdir(d):
                raise AppError(f"{config_path}: /dependencies: {dep}: no such directory")
            out.extend(_declared(d))
        else:
            out.append(dep)
    return out


def _declared(d: str) -> list[str]:
    pyproject = os.path.join(d, "pyproject.toml")
    if os.path.isfile(pyproject):
        with open(pyproject, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise AppError(f"{pyproject}: is not valid TOML: {e}") from None
        deps = data.get("project", {}).get("dependencies", [])
        if isinstance(deps, list):
            return [x for x in deps if isinstance(x, str)]
    req = os.path.join(d, "requirements.txt")
    if os.path.isfile(req):
        with open(req, encoding="utf-8") as f:
            return [line.split("#", 1)[0].strip() for line in f
                    if line.split("#", 1)[0].strip() and not line.lstrip().startswith("-")]
    return []


def satisfied(req: str) -> bool:
    try:
        r = Requirement(req)
    except InvalidRequirement as e:
        raise AppError(f"dependency {req!r} is not a requirement: {e}") from None
    if r.marker is not None and not r.marker.evaluate():
        return True
    try:
        version = metadata.version(r.name)
    except metadata.PackageNotFoundError:
        return False
    return r.specifier.contains(version, prereleases=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stepgraph_runtime.env")
    p.add_argument("--config", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--find-links")
    p.add_argument("--no-index", action="store_true")
    p.add_argument("--all", action="store_true", help="install every requirement, satisfied here or not")
    p.add_argument("--requirements", action="append", default=[], help="a requirements file to install too")
    p.add_argument("--platform", action="append", default=[], help="a wheel platform tag (binary wheels only)")
    p.add_argument("--python-version", help="the target interpreter's version, with --platform")
    args = p.parse_args(argv)
    try:
        reqs = requirements(args.config)
        missing = list(reqs) if args.all else [r for r in reqs if not satisfied(r)]
    except AppError as e:
        print(json.dumps({"error": {"error": "AppError", "message": str(e)}}), flush=True)
        return 2
    if missing or args.requirements:
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
               "--target", args.target]
        for r in args.requirements:
            cmd += ["-r", r]
        if args.platform:
            cmd += ["--only-binary=:all:", "--implementation", "cp", "--no-compile"]
            cmd += [x for tag in args.platform for x in ("--platform", tag)]
            if args.python_version:
                cmd += ["--python-version", args.python_version]
        if args.no_index:
            cmd.append("--no-index")
        if args.find_links:
            cmd += ["--find-links", args.find_links]
        done = subprocess.run(cmd + missing, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-4000:]
            print(json.dumps({"error": {"error": "DependencyError",
                                        "message": f"pip could not install {', '.join(missing + args.requirements)}: {tail}"}}), flush=True)
            return 2
    print(json.dumps({"satisfied": [r for r in reqs if r not in missing], "installed": missing}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
