#!/usr/bin/env python3
"""A stdio MCP server whose descendants escape the way daemons do: a double fork, setsid, all
descriptors closed and an EMPTY environment (so no marker of gosling's survives), then
`sleep 600`. Each daemon writes its pid to DIR/<mode>-<n>.pid.

Usage: daemon_mcp_stdio.py MODE DIR
  start   daemonizes once at start
  call    tool `daemonize` daemonizes (mid-session, not at start)
  eof     daemonizes when stdin ends (the stop has begun), then exits
  term    ignores the end of stdin; on SIGTERM daemonizes, then exits
"""
import json
import os
import shutil
import signal
import sys
import time

MODE, DIR = sys.argv[1], sys.argv[2]
SLEEP = shutil.which("sleep") or "/bin/sleep"
COUNT = [0]


def daemonize():
    COUNT[0] += 1
    path = os.path.join(DIR, f"{MODE}-{COUNT[0]}.pid")
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            with open(path + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(path + ".tmp", path)
            os.closerange(0, 1024)
            os.execve(SLEEP, ["sleep", "600"], {})
        os._exit(0)
    os.waitpid(pid, 0)
    # Wait until the daemon has written its pid (it is then past its exec or about to be).
    for _ in range(200):
        if os.path.exists(path):
            break
        time.sleep(0.01)


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def on_term(_sig, _frame):
    # Once: the stop sends SIGTERM to the process group and the reaper forwards one more to
    # its program, and a second run of this handler would exit before the first daemon is
    # up. (Ignored from here, so the daemon runs with SIGTERM ignored too: the reaper's
    # SIGKILL is what must end it.)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    daemonize()
    os._exit(0)


def main():
    if MODE == "term":
        signal.signal(signal.SIGTERM, on_term)
    if MODE == "start":
        daemonize()
    for line in sys.stdin:
        msg = json.loads(line)
        mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if mid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "daemon", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": "daemonize", "description": "start a daemon", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            daemonize()
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "ok"}], "isError": False}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})
    if MODE == "eof":
        daemonize()
    if MODE == "term":
        while True:
            time.sleep(1)


main()
