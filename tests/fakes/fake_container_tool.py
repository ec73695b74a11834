#!/usr/bin/env python3
"""Stands in for `docker`/`podman` in container mode: `exec -i [-e NAME]... CONTAINER CMD ARGS...`.

Appends its argv (JSON, one line) to $FAKE_CONTAINER_LOG, then runs CMD ARGS with only the
variables named by `-e NAME` (values taken from its own environment, as `docker exec -e NAME`
does) plus PATH, as a container would see them. A `-e NAME=value` is applied as given.
"""
import json
import os
import sys

argv = sys.argv[1:]
with open(os.environ["FAKE_CONTAINER_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\n")
assert argv[:2] == ["exec", "-i"], argv
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
i = 2
while argv[i] == "-e":
    name = argv[i + 1]
    if "=" in name:
        k, v = name.split("=", 1)
        env[k] = v
    elif name in os.environ:
        env[name] = os.environ[name]
    i += 2
container, cmd = argv[i], argv[i + 1:]
os.execvpe(cmd[0], cmd, env)
