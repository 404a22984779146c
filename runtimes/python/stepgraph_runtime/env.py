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

Without ``--target`` it installs into the interpreter's own environment
(the virtual environment ``stepgraph dev`` makes), everything at once with
the files of ``--requirement`` (the runtime's pins), so pip resolves the
app's pins and the runtime's together. ``--list`` only prints the app's
requirements (``{"requirements": [...]}``) and needs nothing but the
standard library, so any Python 3.11 can answer it.

For another machine (``stepgraph build``'s Lambda zip): ``--all`` installs
every requirement, the runtime's own (``--requirements FILE``) too, and
``--platform TAG --python-version X.Y`` makes pip choose binary wheels for
that platform only, without compiling them.

It prints one JSON line: ``{"satisfied": [...], "installed": [...]}``, or
``{"error": {"error": ..., "message": ...}}`` and exits with status 2; a
requirement pip cannot find is named in the message.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata

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
    from packaging.requirements import InvalidRequirement, Requirement  # the runtime's pin, not the standard library's

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
    p.add_argument("--target", help="install here (a revision's site directory); absent: into this environment")
    p.add_argument("--requirement", "--requirements", dest="requirement", action="append", default=[],
                   help="a requirements file installed too")
    p.add_argument("--list", action="store_true", help="only print the app's requirements")
    p.add_argument("--find-links")
    p.add_argument("--no-index", action="store_true")
    p.add_argument("--all", action="store_true", help="install every requirement, satisfied here or not")
    p.add_argument("--platform", action="append", default=[], help="a wheel platform tag (binary wheels only)")
    p.add_argument("--python-version", help="the target interpreter's version, with --platform")
    args = p.parse_args(argv)
    try:
        reqs = requirements(args.config)
        if args.list:
            print(json.dumps({"requirements": reqs}), flush=True)
            return 0
        # A new environment, or another machine's (--all), installs
        # everything: pip itself skips what it holds.
        missing = [r for r in reqs if not satisfied(r)] if args.target and not args.all else reqs
    except AppError as e:
        return _fail("AppError", str(e))
    if missing or args.requirement:
        where = ["--target", args.target] if args.target else []
        where += [x for f in args.requirement for x in ("-r", f)]
        if args.platform:
            where += ["--only-binary=:all:", "--implementation", "cp", "--no-compile"]
            where += [x for tag in args.platform for x in ("--platform", tag)]
            if args.python_version:
                where += ["--python-version", args.python_version]
        failure = pip_install(missing, where, args.find_links, args.no_index)
        if failure:
            return _fail("DependencyError", failure)
    print(json.dumps({"satisfied": [r for r in reqs if r not in missing], "installed": missing}), flush=True)
    return 0


def _fail(kind: str, message: str) -> int:
    print(json.dumps({"error": {"error": kind, "message": message}}), flush=True)
    return 2


def pip_install(reqs: list[str], where: list[str], find_links: str | None, no_index: bool) -> str | None:
    """Runs pip; None when it installed everything, else what went wrong."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", *where]
    if no_index:
        cmd.append("--no-index")
    if find_links:
        cmd += ["--find-links", find_links]
    done = subprocess.run(cmd + reqs, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    output = (done.stderr or done.stdout).strip()
    return f"{pip_failure(output, reqs)}: {output[-4000:]}"


# pip's words for a requirement it could not get ("No matching distribution
# found for foo==1.0"; "Could not find a version that satisfies the
# requirement foo==1.0").
_NOT_FOUND = re.compile(r"(?:No matching distribution found for|satisfies the requirement) (\S+)")


def pip_failure(output: str, reqs: list[str]) -> str:
    """Names the dependency pip could not install, when its output says."""
    names = list(dict.fromkeys(m.group(1) for m in _NOT_FOUND.finditer(output)))
    if names:
        return f"pip could not install {', '.join(names)} (no matching version in the package index or the wheelhouse)"
    return f"pip could not install {', '.join(reqs) or 'the requirements'}"


if __name__ == "__main__":
    sys.exit(main())
