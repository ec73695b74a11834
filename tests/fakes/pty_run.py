#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal and answers its prompts, like a person at a terminal.

Usage: pty_run.py SCRIPT_JSON -- CMD [ARGS...]
SCRIPT_JSON is a list of [expected_text, reply] pairs: when expected_text has appeared in the
output (since the previous match), reply + newline is typed. Prints everything the terminal
showed, then exits with the command's exit code. Gives up after 60 seconds.
"""
import json
import os
import pty
import select
import sys
import time

def main():
    sep = sys.argv.index("--")
    script = json.loads(sys.argv[1])
    argv = sys.argv[sep + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    seen = b""
    pending = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            pending += chunk
        if script and script[0][0].encode() in pending:
            expected, reply = script.pop(0)
            pending = pending[pending.index(expected.encode()) + len(expected):]
            os.write(fd, reply.encode() + b"\n")
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(seen.decode("utf-8", "replace"))
    sys.exit(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8)

main()
