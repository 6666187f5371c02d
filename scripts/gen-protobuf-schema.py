#!/usr/bin/env python3
"""Generates apiserver/src/http/protobuf/schema.txt, the table the protobuf codec runs on.

Two upstream sources, both read, neither copied:
  * the k8s-pb crate (prost structs generated from upstream's generated.proto files): the
    messages, their field numbers, wire kinds, message references, repeated/map;
  * the Go types of k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver and
    k8s.io/kube-aggregator at the same release: each field's JSON name (matched by its
    `protobuf:"...,<tag>,..."` struct tag), `omitempty`, whether it is a pointer, slice, map
    or an inline (embedded) struct, named `[]string` types and each package's group name.

Usage (k8s-pb 0.9.0 is Kubernetes 1.35):
  for r in api apimachinery apiextensions-apiserver kube-aggregator; do
    git clone -q --depth 1 --branch v0.35.6 https://github.com/kubernetes/$r GO_SRC/$r
  done
  scripts/gen-protobuf-schema.py ~/.cargo/registry/src/*/k8s-pb-0.9.0 GO_SRC \
    > apiserver/src/http/protobuf/schema.txt

Output, one item a line:
  group <apiVersion> <module>          an API group version and the k8s-pb module of its kinds
  special <message> <how>              a message with its own JSON form (time, quantity, ...)
  message <message>                    followed by its fields:
  field <tag> <json|-> <card> <type> <flags>
      card: one | rep | map (string keys); type: a scalar (string bool int32 int64 double
      bytes) or a message; flags: ptr (Go pointer), omit (omitempty), inline (embedded: its
      fields are the parent's in JSON), or "-".
"""

import os
import re
import sys
from collections import OrderedDict

SCALARS = {"string", "bool", "int32", "int64", "double", "bytes"}

# Go packages (relative to GO_SRC) for each k8s-pb module prefix.
GO_ROOTS = [
    ("api.", "api/", ""),
    ("apimachinery.", "apimachinery/", ""),
    ("apiextensions_apiserver.", "apiextensions-apiserver/", ""),
    ("kube_aggregator.", "kube-aggregator/", ""),
]

META = "apimachinery.pkg.apis.meta.v1."
EXT = "apiextensions_apiserver.pkg.apis.apiextensions."
SPECIAL = {
    META + "Time": "time",
    META + "MicroTime": "microtime",
    META + "Duration": "duration",
    META + "FieldsV1": "rawjson",
    "apimachinery.pkg.api.resource.Quantity": "quantity",
    "apimachinery.pkg.api.resource.QuantityValue": "quantity",
    "apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "apimachinery.pkg.runtime.RawExtension": "rawjson",
}
for v in ("v1", "v1beta1"):
    SPECIAL[EXT + v + ".JSON"] = "rawjson"
    SPECIAL[EXT + v + ".JSONSchemaPropsOrArray"] = "orarray"
    SPECIAL[EXT + v + ".JSONSchemaPropsOrBool"] = "orbool"
    SPECIAL[EXT + v + ".JSONSchemaPropsOrStringArray"] = "orstringarray"

PROST = re.compile(r"#\[prost\((.*)\)\]")
STRUCT = re.compile(r"^pub struct (\w+) \{")
FIELD = re.compile(r"^\s*pub (?:r#)?(\w+):\s*(.*)$")


def pb_messages(root):
    """{module.Message: [(tag, card, type, rust_name)]} from k8s-pb's sources."""
    out = OrderedDict()
    src = os.path.join(root, "src")
    for dirpath, _, files in sorted(os.walk(src)):
        if "mod.rs" not in files:
            continue
        module = os.path.relpath(dirpath, src).split(os.sep)
        if module == ["."]:
            continue
        lines = open(os.path.join(dirpath, "mod.rs")).read().split("\n")
        i, current, attr = 0, None, None
        while i < len(lines):
            line = lines[i]
            m = STRUCT.match(line)
            if m:
                current = ".".join(module + [m.group(1)])
                out[current] = []
            elif line == "}":
                current = None
            elif current and PROST.search(line):
                attr = PROST.search(line).group(1)
            elif current and attr and FIELD.match(line):
                name, ty = FIELD.match(line).groups()
                while not ty.rstrip().endswith(",") or ty.count("<") != ty.count(">"):
                    i += 1
                    ty += lines[i].strip()
                ty = re.sub(r",>", ">", ty.strip().rstrip(","))
                out[current].append(field(module, attr, name, ty))
                attr = None
            i += 1
    return out


def field(module, attr, name, ty):
    tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
    kind = attr.split(",")[0].strip()
    if kind.startswith("btree_map"):
        key, val = re.search(r'btree_map = "(\w+), (\w+)"', attr).groups()
        assert key == "string", attr
        if val == "message":
            inner = re.search(r"BTreeMap<[^,]+,\s*(.*)>$", ty).group(1)
            return (tag, "map", resolve(module, inner), name)
        return (tag, "map", val, name)
    card = "rep" if "repeated" in attr else "one"
    if kind == "message":
        m = re.search(r"(?:Option|Vec)<(.*)>$", ty)
        assert m, (attr, name, ty)
        inner = m.group(1)
        inner = re.sub(r"^::prost::alloc::boxed::Box<(.*)>$", r"\1", inner)
        return (tag, card, resolve(module, inner), name)
    kind = {"bytes = \"vec\"": "bytes"}.get(kind, kind)
    assert kind in SCALARS, attr
    return (tag, card, kind, name)


def resolve(module, path):
    path = path.replace(" ", "")
    parts = path.split("::")
    base = list(module)
    while parts and parts[0] == "super":
        base.pop()
        parts.pop(0)
    return ".".join(base + parts)


GO_TYPE = re.compile(r"^type (\w+) struct \{")
GO_FIELD = re.compile(r"^\t(?:(\w+)\s+)?(\S+)\s+`(.*)`")
GO_STRING_LIST = re.compile(r"^type (\w+) \[\]string\s*$")
GROUP = re.compile(r'^const GroupName = "([^"]*)"', re.M)


def go_package(go_src, module):
    """The Go package directory of a k8s-pb module, e.g. api.apps.v1 -> api/apps/v1."""
    parts = module.split(".")
    if parts[0] == "api":
        return os.path.join(go_src, "api", *parts[1:])
    repo = {"apimachinery": "apimachinery", "apiextensions_apiserver":
            "apiextensions-apiserver", "kube_aggregator": "kube-aggregator"}.get(parts[0])
    if repo is None:  # metrics: served by metrics-server, not here
        return ""
    return os.path.join(go_src, repo, *parts[1:])


def go_fields(directory):
    """({Struct: {tag: (json, flags)}}, {named []string types}, group name)."""
    structs, lists, group = {}, set(), None
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_"):
            continue
        text = open(os.path.join(directory, name)).read()
        g = GROUP.search(text)
        if g:
            group = g.group(1)
        current = None
        for line in text.split("\n"):
            m = GO_TYPE.match(line)
            if m:
                current = structs.setdefault(m.group(1), {})
                continue
            m = GO_STRING_LIST.match(line)
            if m:
                lists.add(m.group(1))
            if line.startswith("}"):
                current = None
            if current is None:
                continue
            m = GO_FIELD.match(line)
            if not m or "protobuf:" not in m.group(3):
                continue
            _, ty, tags = m.groups()
            pb = re.search(r'protobuf:"\w+,(\d+),', tags)
            js = re.search(r'json:"([^"]*)"', tags)
            if not pb or not js:
                continue
            jname, *opts = js.group(1).split(",")
            flags = []
            if ty.startswith("*"):
                flags.append("ptr")
            if "omitempty" in opts:
                flags.append("omit")
            if "inline" in opts:
                flags.append("inline")
                jname = "-"
            if jname == "":
                jname = "-"
            current[int(pb.group(1))] = (jname, flags)
    return structs, lists, group


def main():
    pb_root, go_src = sys.argv[1], sys.argv[2]
    messages = pb_messages(pb_root)
    messages = OrderedDict((k, v) for k, v in messages.items() if not k.startswith("metrics."))
    modules = sorted({m.rsplit(".", 1)[0] for m in messages})
    go, lists, groups = {}, {}, []
    for module in modules:
        directory = go_package(go_src, module)
        if not os.path.isdir(directory):
            continue
        go[module], lists[module], group = go_fields(directory)
        version = module.rsplit(".", 1)[1]
        if group is not None and not module.startswith("apimachinery."):
            groups.append((f"{group}/{version}" if group else version, module))
    # k8s-pb re-cases names (JsonSchemaProps, ApiService): use the Go spelling, which is the
    # kind's.
    rename = {}
    for name in messages:
        module, short = name.rsplit(".", 1)
        spelled = {g.lower(): g for g in list(go.get(module, {})) + list(lists.get(module, ()))}
        rename[name] = f"{module}.{spelled.get(short.lower(), short)}"
    print("# Generated by scripts/gen-protobuf-schema.py from k8s-pb 0.9.0 and the Go types of")
    print("# Kubernetes 1.35; do not edit.")
    for api_version, module in sorted(groups):
        print(f"group {api_version} {module}")
    for name in sorted(messages, key=lambda n: rename[n]):
        how = SPECIAL.get(rename[name])
        module, short = rename[name].rsplit(".", 1)
        if short in lists.get(module, ()):
            how = "stringlist"
        if how:
            print(f"special {rename[name]} {how}")
    missing = []
    for name, fields in sorted(messages.items(), key=lambda kv: rename[kv[0]]):
        module, short = rename[name].rsplit(".", 1)
        print(f"message {rename[name]}")
        known = go.get(module, {}).get(short)
        for tag, card, ty, rust in sorted(fields):
            if known is not None and tag in known:
                jname, flags = known[tag]
            else:
                # Special messages have their own JSON form; their field names do not matter.
                if rename[name] not in SPECIAL and short not in lists.get(module, ()):
                    missing.append(f"{rename[name]}.{rust}")
                jname, flags = camel(rust), ["omit"]
            ty = rename.get(ty, ty)
            print(f"field {tag} {jname} {card} {ty} {','.join(flags) or '-'}")
    for m in missing:
        print(f"warning: no Go field for {m}", file=sys.stderr)


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


if __name__ == "__main__":
    main()
