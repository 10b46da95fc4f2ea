#!/usr/bin/env python3
"""Generate src/emulator/schema.json: the wire schema of container v1 for the GKE emulator.

The emulator must read and write JSON exactly as the real API does: enum names and their proto
numbers (clients send `$alt=json;enum-encoding=int`), which integers are int64 (JSON strings),
which fields have explicit presence (proto3 `optional`, oneofs: emitted even when zero). The
discovery document (shared/fixtures/gke/) has names and readOnly flags but no enum numbers or
presence, so this reads the proto descriptors shipped in Google's official Python client
google-cloud-container (the same one the conformance suite uses), and takes `readOnly` from the
discovery document.

Run: ~/.cache/gkq/venv-2.67.0/bin/python scripts/gen-emulator-schema.py \
        /work/shared/fixtures/gke/container-v1-discovery.json > src/emulator/schema.json
"""
import json
import sys

from google.cloud.container_v1.types import cluster_service as cs
from google.protobuf import descriptor as d

import google.cloud.container_v1 as pkg
from importlib.metadata import version

KINDS = {
    d.FieldDescriptor.TYPE_STRING: "string",
    d.FieldDescriptor.TYPE_BOOL: "bool",
    d.FieldDescriptor.TYPE_INT32: "int32",
    d.FieldDescriptor.TYPE_SINT32: "int32",
    d.FieldDescriptor.TYPE_SFIXED32: "int32",
    d.FieldDescriptor.TYPE_UINT32: "uint32",
    d.FieldDescriptor.TYPE_FIXED32: "uint32",
    d.FieldDescriptor.TYPE_INT64: "int64",
    d.FieldDescriptor.TYPE_SINT64: "int64",
    d.FieldDescriptor.TYPE_SFIXED64: "int64",
    d.FieldDescriptor.TYPE_UINT64: "uint64",
    d.FieldDescriptor.TYPE_FIXED64: "uint64",
    d.FieldDescriptor.TYPE_DOUBLE: "double",
    d.FieldDescriptor.TYPE_FLOAT: "float",
    d.FieldDescriptor.TYPE_BYTES: "bytes",
    d.FieldDescriptor.TYPE_ENUM: "enum",
    d.FieldDescriptor.TYPE_MESSAGE: "message",
}

messages, enums = {}, {}


def short(full):
    return full.removeprefix("google.container.v1.")


def kind_of(f):
    k = KINDS[f.type]
    if k == "enum":
        add_enum(f.enum_type)
        return {"k": "enum", "t": short(f.enum_type.full_name)}
    if k == "message":
        full = f.message_type.full_name
        if full.startswith("google.protobuf."):
            return {"k": "wkt", "t": full}
        add_message(f.message_type)
        return {"k": "message", "t": short(full)}
    return {"k": k}


def add_enum(e):
    name = short(e.full_name)
    if name not in enums:
        enums[name] = [[v.name, v.number] for v in e.values]


def add_message(m):
    name = short(m.full_name)
    if name in messages:
        return
    messages[name] = None  # recursion guard
    fields = {}
    for f in m.fields:
        repeated = f.is_repeated
        entry = {"n": f.name}
        if repeated and f.type == f.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            value = f.message_type.fields_by_name["value"]
            entry.update({"k": "map", "v": kind_of(value)})
        else:
            entry.update(kind_of(f))
            if repeated:
                entry["r"] = 1
            elif f.has_presence and f.type != f.TYPE_MESSAGE:
                entry["p"] = 1
        fields[f.json_name] = entry
    messages[name] = fields


for m in cs.Cluster.pb().DESCRIPTOR.file.message_types_by_name.values():
    add_message(m)

# readOnly from the discovery document (schema names there are the short proto names).
disc = json.load(open(sys.argv[1]))
for sname, schema in disc["schemas"].items():
    for cand in [n for n in messages if n.split(".")[-1] == sname]:
        for prop, p in schema.get("properties", {}).items():
            if p.get("readOnly") and prop in (messages[cand] or {}):
                messages[cand][prop]["ro"] = 1

out = {
    "source": f"google-cloud-container {version('google-cloud-container')} proto descriptors; "
    f"readOnly from discovery revision {disc.get('revision')}",
    "messages": dict(sorted(messages.items())),
    "enums": dict(sorted(enums.items())),
}
# One message or enum per line keeps the file reviewable in diffs.
print("{")
print(f'"source": {json.dumps(out["source"])},')
for key in ("messages", "enums"):
    print(f'"{key}": {{')
    items = list(out[key].items())
    for i, (k, v) in enumerate(items):
        sep = "," if i + 1 < len(items) else ""
        print(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{sep}")
    print("}," if key == "messages" else "}")
print("}")
