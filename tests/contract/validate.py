"""Checks JSON values against named definitions of JSON Schemas (Draft 2020-12), for
tests/it/desktop_acp.rs. Reads {"schemas": {tag: path}, "items": [[tag, def, value], ...]} on
stdin and prints a JSON list of problems, one string each ("" list: all valid). Uses the
jsonschema package of the peers venv (pinned in scripts/peers/requirements.lock.txt)."""
import json
import sys

from jsonschema import Draft202012Validator

req = json.load(sys.stdin)
schemas = {tag: json.load(open(path)) for tag, path in req["schemas"].items()}
problems = []
for tag, name, value in req["items"]:
    defs = schemas[tag]["$defs"]
    if name not in defs:
        problems.append("%s: no definition %s" % (tag, name))
        continue
    validator = Draft202012Validator({"$ref": "#/$defs/" + name, "$defs": defs})
    for e in validator.iter_errors(value):
        path = "/".join(str(p) for p in e.absolute_path)
        problems.append("%s %s at /%s: %s (value: %s)" % (tag, name, path, e.message[:300], json.dumps(value)[:300]))
print(json.dumps(problems))
