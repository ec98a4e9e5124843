"""A stand-in `kubectl` for the plugin's tests (tests/test_kubectl_plugin.py): copied to a tmp dir as `kubectl`
with this interpreter in its #! line. It records each call's arguments (one JSON list a line in $STANDIN_CALLS)
and serves a recorded dump ($STANDIN_DUMP: YAML, documents or Lists) the way a server would:

  kubectl api-resources -o name   the served names ($STANDIN_SERVED, comma-separated; default: every kind of
                                  the dump and the plugin's, core kinds bare, others `plural.group`)
  kubectl get A,B,... -A -o yaml  one `kind: List` of the dump's objects of those kinds; a name not served is
                                  kubectl's `error: the server doesn't have a resource type "x"`, exit 1

$STANDIN_FAIL=`COMMAND:STATUS:MESSAGE` makes COMMAND (`api-resources` or `get`) print MESSAGE on stderr and exit
STATUS (`api-resources` still prints the served names: discovery half failed); $STANDIN_STDOUT replaces get's
output; $STANDIN_SLEEP sleeps that many seconds first; $STANDIN_GONE lists names api-resources says are served
but get says are not (a CRD deleted in between).
"""

import json
import os
import sys
import time

import yaml

PLUGIN_KINDS = ["nodes", "pods", "resourceslices.resource.k8s.io", "resourceclaims.resource.k8s.io",
                "deviceclasses.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io",
                "devicetaintrules.resource.k8s.io", "workloads.scheduling.k8s.io", "podgroups.scheduling.k8s.io",
                "compositepodgroups.scheduling.k8s.io", "podgroups.scheduling.x-k8s.io",
                "priorityclasses.scheduling.k8s.io", "poddisruptionbudgets.policy"]


def resource(obj):
    kind = obj["kind"].lower()
    plural = kind + ("es" if kind.endswith("s") else "s")
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{plural}.{group}" if group else plural


def objects(path):
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if isinstance(doc, dict) and doc.get("kind") == "List":
                yield from doc.get("items") or []
            elif doc is not None:
                yield doc


def main(argv):
    with open(os.environ["STANDIN_CALLS"], "a", encoding="utf-8") as f:
        f.write(json.dumps(argv) + "\n")
    if os.environ.get("STANDIN_SLEEP"):
        time.sleep(float(os.environ["STANDIN_SLEEP"]))
    dump = list(objects(os.environ["STANDIN_DUMP"]))
    served = os.environ.get("STANDIN_SERVED")
    names = served.split(",") if served else sorted(set(PLUGIN_KINDS) | {resource(o) for o in dump})
    command = argv[0] if argv else ""
    fail = os.environ.get("STANDIN_FAIL", "")
    if fail.startswith(command + ":"):
        _, status, message = fail.split(":", 2)
        if command == "api-resources":
            sys.stdout.write("\n".join(names) + "\n")
        sys.stderr.write(message + "\n")
        return int(status)
    if command == "api-resources":
        sys.stdout.write("\n".join(names) + "\n")
        return 0
    if command == "get":
        wanted = argv[1].split(",")
        gone = set(filter(None, os.environ.get("STANDIN_GONE", "").split(",")))
        for name in wanted:
            if name not in names or name in gone:
                sys.stderr.write(f'error: the server doesn\'t have a resource type "{name}"\n')
                return 1
        if "STANDIN_STDOUT" in os.environ:
            sys.stdout.write(os.environ["STANDIN_STDOUT"])
            return 0
        items = [o for o in dump if resource(o) in wanted]
        sys.stdout.write(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items,
                                         "metadata": {"resourceVersion": ""}}, sort_keys=False))
        return 0
    sys.stderr.write(f"error: unknown command {command!r}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
