#!/usr/bin/env python3
"""Generate src/emulator/schema.json: the wire schema of container v1 for the GKE emulator.

Two sources, each the authority on what it knows:

- The discovery document (tests/fixtures/gke/container-v1-discovery.json) says what exists:
  every message, field, field type, list/map-ness, enum value name and readOnly flag. The
  emulator must accept exactly what the published API accepts, and the discovery document is
  newer than any published proto.
- The proto descriptors in Google's official Python client google-cloud-container (the version
  the conformance suite pins) give what the discovery document leaves out: enum numbers (clients
  send `$alt=json;enum-encoding=int`), explicit presence (proto3 `optional` and oneofs, printed
  even when zero), wrapper types (a `boolean` that is a google.protobuf.BoolValue), the proto
  names of messages, enums and fields, and field order.

Where the discovery document has something the descriptors lack:

- a message keeps its discovery name (top level, as new GKE messages are declared);
- a field takes its proto name by snake_casing its JSON name, has no explicit presence, and comes
  after the fields the descriptors order;
- an enum field reuses the one descriptor enum that has the same first value and no value the
  field lacks, or else gets an enum named `<Message>.<FieldInPascalCase>`;
- an enum value has no number. Numbers are never made up silently: the generator stops, unless
  the value is listed in UNPUBLISHED_ENUM_VALUES below, in which case its number follows one rule
  and its schema.json entry is marked "derived" (see derive_numbers).

Run:
  ~/.cache/gkq/venv-2.67.0/bin/python scripts/gen-emulator-schema.py \
      tests/fixtures/gke/container-v1-discovery.json > src/emulator/schema.json
"""
import json
import re
import sys
from importlib.metadata import version

from google.cloud.container_v1.types import cluster_service as cs
from google.protobuf import descriptor as d

# Enum values of discovery revision 20261027 that no published proto has: google-cloud-container
# 2.67.0 (the newest release) lacks them, and so does googleapis' cluster_service.proto as of
# August 2026. Each needs a reviewer's eye when a descriptor source that has them appears: drop
# the entry then, and the real number is used. Keyed by schema.json enum name.
UNPUBLISHED_ENUM_VALUES = {
    "DatapathProvider": ["MIGRATE_TO_ADVANCED_DATAPATH", "MIGRATE_TO_LEGACY_DATAPATH"],
    "GPUDriverInstallationConfig.GPUDriverVersion": ["SPECIFIC"],
    "SandboxConfig.Type": ["MICROVM"],
    "AutoprovisioningRestrictionConfig.ServiceAccountPermissionCheck": [
        "PERMISSION_CHECK_MODE_UNSPECIFIED", "DISABLED", "ENABLED"],
    "KernelCommandlineOverrides.InitOnAlloc": ["INIT_ON_ALLOC_UNSPECIFIED", "INIT_ON_ALLOC_OFF"],
    "KernelCommandlineOverrides.SpecRstackOverflow": [
        "SPEC_RSTACK_OVERFLOW_UNSPECIFIED", "SPEC_RSTACK_OVERFLOW_OFF"],
    "UpdateNodePoolRequest.NodeConfigUpdateMode": [
        "NODE_CONFIG_UPDATE_MODE_UNSPECIFIED", "LIVE_UPDATE_WITHOUT_DRAIN"],
}

PROTO_KINDS = {
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
}

# Well-known types whose JSON form is a discovery scalar: (discovery type, format) -> type.
DISCOVERY_WKT = {
    ("string", "google-duration"): "google.protobuf.Duration",
    ("string", "google-datetime"): "google.protobuf.Timestamp",
    ("string", "google-fieldmask"): "google.protobuf.FieldMask",
}
DISCOVERY_SCALARS = {
    ("string", None): "string",
    ("string", "int64"): "int64",
    ("string", "uint64"): "uint64",
    ("string", "byte"): "bytes",
    ("boolean", None): "bool",
    ("integer", "int32"): "int32",
    ("integer", "uint32"): "uint32",
    ("number", "double"): "double",
    ("number", "float"): "float",
}
# Wrapper types print as their scalar: the discovery document cannot tell them apart.
WRAPPERS = {
    "google.protobuf.BoolValue": "bool",
    "google.protobuf.StringValue": "string",
    "google.protobuf.Int32Value": "int32",
    "google.protobuf.UInt32Value": "uint32",
    "google.protobuf.Int64Value": "int64",
    "google.protobuf.UInt64Value": "uint64",
    "google.protobuf.DoubleValue": "double",
    "google.protobuf.FloatValue": "float",
}


def fail(message):
    sys.exit(f"gen-emulator-schema: {message}")


def short(full):
    return full.removeprefix("google.container.v1.")


def pascal(json_name):
    return json_name[:1].upper() + json_name[1:]


def snake(json_name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", json_name).lower()


# --- The proto descriptors: every message reachable from cluster_service.proto, by short name.
proto_messages = {}  # short (last) name -> [descriptor]
proto_enums = {}  # schema.json enum name -> descriptor


def index_message(m):
    if m.GetOptions().map_entry:
        return
    seen = proto_messages.setdefault(m.name, [])
    if any(x.full_name == m.full_name for x in seen):
        return
    seen.append(m)
    for f in m.fields:
        if f.enum_type is not None:
            proto_enums[short(f.enum_type.full_name)] = f.enum_type
        if f.message_type is not None and not f.message_type.full_name.startswith("google.protobuf."):
            index_message(f.message_type)
    for n in m.nested_types:
        index_message(n)


for m in cs.Cluster.pb().DESCRIPTOR.file.message_types_by_name.values():
    index_message(m)
for e in cs.Cluster.pb().DESCRIPTOR.file.enum_types_by_name.values():
    proto_enums[short(e.full_name)] = e

disc = json.load(open(sys.argv[1]))
schemas = disc["schemas"]


def proto_message(schema_name):
    found = proto_messages.get(schema_name, [])
    if len(found) > 1:
        fail(f"discovery schema {schema_name} matches several proto messages: "
             f"{[m.full_name for m in found]}")
    return found[0] if found else None


def message_name(schema_name):
    m = proto_message(schema_name)
    return short(m.full_name) if m else schema_name


# --- Field kinds. The discovery document decides; the descriptor refines (enum and wrapper
# names) and must agree, or the generator stops.
enum_values = {}  # schema.json enum name -> [value names], in discovery order
enum_fields = {}  # schema.json enum name -> first "Message.field" that uses it (for messages)


def discovery_kind(p, where):
    """(kind dict, repeated) from a discovery property, before the descriptor refines it."""
    if p.get("type") == "array":
        kind, repeated = discovery_kind(p["items"], where)
        if repeated:
            fail(f"{where}: a list of lists")
        return kind, True
    if "$ref" in p:
        return {"k": "message", "t": p["$ref"]}, False
    if p.get("type") == "object" and "additionalProperties" in p:
        value = p["additionalProperties"]
        if value.get("type") == "any":
            return {"k": "wkt", "t": "google.protobuf.Any"}, False
        kind, repeated = discovery_kind(value, where)
        if repeated:
            fail(f"{where}: a map of lists")
        return {"k": "map", "v": kind}, False
    key = (p.get("type"), p.get("format"))
    if "enum" in p:
        return {"k": "enum", "values": p["enum"]}, False
    if key in DISCOVERY_WKT:
        return {"k": "wkt", "t": DISCOVERY_WKT[key]}, False
    if key in DISCOVERY_SCALARS:
        return {"k": DISCOVERY_SCALARS[key]}, False
    fail(f"{where}: no wire kind for discovery type {key}")


def proto_kind(f):
    """The descriptor's view of one field's (value) kind, or of a map's value."""
    if f.type == f.TYPE_ENUM:
        return {"k": "enum", "t": short(f.enum_type.full_name)}
    if f.type == f.TYPE_MESSAGE:
        full = f.message_type.full_name
        if full.startswith("google.protobuf."):
            return {"k": "wkt", "t": full}
        return {"k": "message", "t": short(full)}
    return {"k": PROTO_KINDS[f.type]}


def enum_for_new_field(values, message, prop):
    """A new field of an existing enum (NodeNetworkConfig.datapathProvider is a
    DatapathProvider) lists all the descriptor's values, first value first, perhaps with newer
    ones; a field that matches no single enum so has an enum of its own."""
    same = [n for n, e in proto_enums.items()
            if e.values[0].name == values[0] and {v.name for v in e.values} <= set(values)]
    return same[0] if len(same) == 1 else f"{message}.{pascal(prop)}"


def resolve(kind, proto, message, prop, where):
    """The schema.json kind: discovery `kind` refined by the descriptor's `proto` (or None)."""
    if kind["k"] == "map":
        value = None
        if proto is not None:
            if proto["k"] != "map":
                fail(f"{where}: a map in discovery, {proto} in the descriptors")
            value = proto["v"]
        return {"k": "map", "v": resolve(kind["v"], value, message, prop, where)}
    if kind["k"] == "enum":
        if proto is not None and proto["k"] != "enum":
            fail(f"{where}: an enum in discovery, {proto} in the descriptors")
        name = proto["t"] if proto else enum_for_new_field(kind["values"], message, prop)
        known = enum_values.setdefault(name, [])
        known += [v for v in kind["values"] if v not in known]
        enum_fields.setdefault(name, where)
        return {"k": "enum", "t": name}
    if kind["k"] == "message":
        name = message_name(kind["t"])
        if proto is not None and proto != {"k": "message", "t": name}:
            fail(f"{where}: message {name} in discovery, {proto} in the descriptors")
        return {"k": "message", "t": name}
    if proto is not None and proto["k"] == "wkt" and WRAPPERS.get(proto["t"]) == kind["k"]:
        return proto
    if proto is not None and proto != kind:
        fail(f"{where}: {kind} in discovery, {proto} in the descriptors")
    return kind


def descriptor_view(f):
    """(kind, repeated) of a proto field, with maps as {"k": "map", "v": ...}."""
    if f.is_repeated and f.type == f.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
        return {"k": "map", "v": proto_kind(f.message_type.fields_by_name["value"])}, False
    return proto_kind(f), f.is_repeated


messages = {}
for schema_name, schema in schemas.items():
    name = message_name(schema_name)
    pm = proto_message(schema_name)
    by_json = {}
    if pm is not None:
        for f in pm.fields:
            by_json[f.json_name] = f
            by_json[f.name] = f  # a few messages (GetOpenIDConfigResponse) use proto names
    props = schema.get("properties", {})
    # Proto order first (the JSON printer's order), then fields the descriptors lack.
    order = {f.number: i for i, f in enumerate(pm.fields)} if pm else {}
    ranked = sorted(props, key=lambda p: (0, order[by_json[p].number]) if p in by_json
                    else (1, p))
    fields = {}
    for prop in ranked:
        p = props[prop]
        where = f"{schema_name}.{prop}"
        kind, repeated = discovery_kind(p, where)
        f = by_json.get(prop)
        proto, proto_repeated = descriptor_view(f) if f is not None else (None, repeated)
        if proto_repeated != repeated:
            fail(f"{where}: repeated={repeated} in discovery, {proto_repeated} in the descriptors")
        entry = {"n": f.name if f is not None else snake(prop)}
        entry.update(resolve(kind, proto, name, prop, where))
        if repeated:
            entry["r"] = 1
        elif f is not None and f.has_presence and f.type != f.TYPE_MESSAGE:
            entry["p"] = 1
        if p.get("readOnly"):
            entry["ro"] = 1
        fields[prop] = entry
    messages[name] = fields


def derive_numbers(enum, names, numbers):
    """Numbers for `names` the descriptors lack, by one rule, each checked against
    UNPUBLISHED_ENUM_VALUES. A value added to a known enum takes the next number after the
    highest one the enum has, in discovery order (GKE appends values to its enums). A new enum
    numbers its first value (`*_UNSPECIFIED`) 0, as proto3 requires, and the rest 1, 2, ... in
    discovery order."""
    derived = {}
    listed = UNPUBLISHED_ENUM_VALUES.get(enum, [])
    next_number = max(numbers.values()) + 1 if numbers else 0
    for value in names:
        if value in numbers:
            continue
        if value not in listed:
            fail(f"enum {enum} (at {enum_fields[enum]}) has value {value}, which the proto "
                 f"descriptors of google-cloud-container {version('google-cloud-container')} "
                 "lack: no number to give it. Use a client whose descriptors have it, or list "
                 "it in UNPUBLISHED_ENUM_VALUES to derive one.")
        if not numbers and not derived and not value.endswith("_UNSPECIFIED"):
            fail(f"new enum {enum} does not start with an *_UNSPECIFIED value: cannot number it")
        derived[value] = next_number
        next_number += 1
    for value in listed:
        if value not in derived:
            fail(f"UNPUBLISHED_ENUM_VALUES lists {enum}.{value}, which the descriptors now "
                 "number (or discovery no longer has): drop it from the list")
    return derived


enums = {}
derived_count = 0
for enum, names in enum_values.items():
    e = proto_enums.get(enum)
    numbers = {v.name: v.number for v in e.values} if e else {}
    derived = derive_numbers(enum, names, numbers)
    derived_count += len(derived)
    enums[enum] = [[v, numbers[v]] if v in numbers else [v, derived[v], "derived"] for v in names]
for enum in UNPUBLISHED_ENUM_VALUES:
    if enum not in enum_values:
        fail(f"UNPUBLISHED_ENUM_VALUES names enum {enum}, which no field uses")

source = (f"discovery revision {disc.get('revision')}; enum numbers, presence and proto names from "
          f"google-cloud-container {version('google-cloud-container')} proto descriptors; "
          f"{derived_count} enum numbers derived (marked)")
out = {"messages": dict(sorted(messages.items())), "enums": dict(sorted(enums.items()))}
# One message or enum per line keeps the file reviewable in diffs.
print("{")
print(f'"source": {json.dumps(source)},')
for key in ("messages", "enums"):
    print(f'"{key}": {{')
    items = list(out[key].items())
    for i, (k, v) in enumerate(items):
        sep = "," if i + 1 < len(items) else ""
        print(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{sep}")
    print("}," if key == "messages" else "}")
print("}")
