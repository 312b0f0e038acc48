"""The message classes and enums of `apache.rocketmq.v2`, built at first import from the vendored .proto
files (proto/README.md): protoc from grpcio-tools compiles them to a descriptor set, cached by content
hash; protobuf's message factory turns the descriptors into classes. Nothing generated is kept in the
repository.

Use: ``from rocketstore.broker.grpc.protos import pb`` then ``pb.SendMessageRequest()``, ``pb.Code.OK``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from rocketstore.errors import RocketStoreError

PROTO_ROOT = Path(__file__).parent / "proto"
PROTO_FILES = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto",
               "apache/rocketmq/v2/admin.proto")
PACKAGE = "apache.rocketmq.v2"
SERVICE = f"{PACKAGE}.MessagingService"


class ProtoBuildError(RocketStoreError):
    """The vendored .proto files could not be compiled (grpcio-tools missing or protoc failed)."""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rocketstore"


def _source_digest() -> str:
    digest = hashlib.sha256()
    for name in PROTO_FILES:
        digest.update(name.encode())
        digest.update((PROTO_ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def _compile(out: Path) -> None:
    """protoc the vendored files (with their imports) into the descriptor set `out`.

    Raises:
        ProtoBuildError: grpcio-tools is not installed or protoc reports an error.
    """
    try:
        from importlib.resources import files

        from grpc_tools import protoc
    except ImportError as exc:
        raise ProtoBuildError("the gRPC endpoint needs grpcio-tools (pip install grpcio-tools)") from exc
    well_known = str(files("grpc_tools") / "_proto")
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", "--include_imports", f"--descriptor_set_out={tmp}",
            *PROTO_FILES]
    if protoc.main(args) != 0:
        raise ProtoBuildError(f"protoc failed on {PROTO_ROOT}")
    os.replace(tmp, out)


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The compiled descriptors of the vendored files, from the cache or compiled now.

    Raises:
        ProtoBuildError: the files cannot be compiled.
    """
    name = f"rocketmq-v2-{_source_digest()}.pb"
    candidates = [_cache_dir(), Path(tempfile.gettempdir()) / f"rocketstore-{os.getuid()}"]
    for folder in candidates:
        path = folder / name
        try:
            if not path.exists():
                folder.mkdir(parents=True, exist_ok=True)
                _compile(path)
            return descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes())
        except OSError:
            continue  # not writable: try the next folder
    raise ProtoBuildError(f"no writable folder to compile the gRPC definitions into (tried {candidates})")


class _Enum(SimpleNamespace):
    """An enum of the API: value names as attributes, `name(number)` for the reverse."""

    def name(self, number: int) -> str:
        for key, value in vars(self).items():
            if value == number:
                return key
        return str(number)


def _load() -> SimpleNamespace:
    pool = descriptor_pool.Default()
    for file_proto in descriptor_set().file:
        try:
            pool.FindFileByName(file_proto.name)
        except KeyError:
            pool.Add(file_proto)
    members: dict[str, Any] = {}
    for file_name in PROTO_FILES:
        file_desc = pool.FindFileByName(file_name)
        for message_name, desc in file_desc.message_types_by_name.items():
            members[message_name] = message_factory.GetMessageClass(desc)
        for enum_name, enum_desc in file_desc.enum_types_by_name.items():
            members[enum_name] = _Enum(**{v.name: v.number for v in enum_desc.values})
    members["service"] = pool.FindServiceByName(SERVICE)
    from google.protobuf import duration_pb2, timestamp_pb2

    members["Duration"] = duration_pb2.Duration
    members["Timestamp"] = timestamp_pb2.Timestamp
    return SimpleNamespace(**members)


pb = _load()
