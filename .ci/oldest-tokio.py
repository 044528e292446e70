#!/usr/bin/env python3
"""Build Volt against the oldest Tokio, tokio-util and tokio-stream its manifests accept.

A Tokio application that names Volt as `tokio` keeps its Cargo.lock, and cargo keeps a
locked Tokio that meets Volt's requirement: so every Tokio item Volt uses must exist in
the oldest version it declares. This makes a scratch crate that depends on volt,
volt-util and volt-stream, locks the three crates to the lowest versions the manifests
allow, and checks it. The target directory is the caller's, so only those three and
what depends on them are built again.

Usage: oldest-tokio.py REPO TARGET_DIR
"""
import os
import subprocess
import sys
import tempfile
import tomllib

repo, target = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def manifest(path):
    with open(os.path.join(repo, path), "rb") as f:
        return tomllib.load(f)


def version(dep):
    return dep if isinstance(dep, str) else dep["version"]


def lowest(req):
    """The lowest version a caret requirement such as "1.48" or "0.7.19" allows."""
    parts = req.lstrip("^").split(".")
    return ".".join(parts + ["0"] * (3 - len(parts)))


workspace = manifest("Cargo.toml")["workspace"]["dependencies"]


def key(v):
    return [int(x) for x in lowest(v).split(".")]


# The lowest each crate's requirement allows, the highest of them where two crates ask
# (a `workspace = true` requirement is the workspace's).
wanted = {}
for crate in ("runtime", "util", "stream"):
    deps = manifest(f"{crate}/Cargo.toml")["dependencies"]
    for name in ("tokio", "tokio-util", "tokio-stream"):
        if name in deps:
            dep = deps[name]
            req = version(workspace[name]) if isinstance(dep, dict) and dep.get("workspace") else version(dep)
            wanted[name] = max(wanted.get(name, req), req, key=key)

with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "src"))
    with open(os.path.join(d, "src", "lib.rs"), "w") as f:
        f.write("")
    with open(os.path.join(d, "Cargo.toml"), "w") as f:
        f.write(f"""[package]
name = "volt-oldest-tokio"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
volt = {{ path = "{repo}/runtime", features = ["full", "test-util", "tokio-bridge", "console"] }}
volt-util = {{ path = "{repo}/util", features = ["full"] }}
volt-stream = {{ path = "{repo}/stream" }}
""")
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    run = lambda *args: subprocess.run(["cargo", *args], cwd=d, env=env, check=True)
    run("generate-lockfile", "-q")
    # tokio-util and tokio-stream first: their newest versions ask for a newer Tokio.
    for name in ("tokio-util", "tokio-stream", "tokio"):
        run("update", "-q", "-p", name, "--precise", lowest(wanted[name]))
    run("check", "-q")
    print("volt, volt-util and volt-stream build against " +
          ", ".join(f"{n} {lowest(v)}" for n, v in wanted.items()))
