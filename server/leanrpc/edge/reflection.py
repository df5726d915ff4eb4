"""Server reflection under both names: grpc.reflection.v1 and v1alpha.

Owns: registering reflection. grpcio-reflection (up to 1.85 at least) ships
only `grpc.reflection.v1alpha`; `enable_server_reflection` registers that
service and nothing else, while current tools (grpcurl >= 1.8.8, Postman,
buf curl) ask for `grpc.reflection.v1` first. The two protos are the same
messages under another package name (grpc/reflection/v1/reflection.proto was
copied from v1alpha when it was stabilised), so one servicer answers both:
the v1 service is registered with the v1alpha codecs, and a v1 descriptor
(the v1alpha file renamed) is added to the descriptor pool so that the v1
service can itself be described. May import: grpc, grpc_reflection, protobuf.
"""

from __future__ import annotations

from typing import Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha_pb2

V1ALPHA_SERVICE_NAME = reflection.SERVICE_NAME  # grpc.reflection.v1alpha.ServerReflection
V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _add_v1_descriptor(descriptors: descriptor_pool.DescriptorPool) -> None:
    """Adds grpc/reflection/v1/reflection.proto to `descriptors` (once), built from v1alpha's."""
    try:
        descriptors.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    v1alpha_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = _V1_FILE
    proto.package = "grpc.reflection.v1"
    for message in proto.message_type:
        for field in message.field:
            if field.type_name.startswith(".grpc.reflection.v1alpha."):
                field.type_name = (
                    ".grpc.reflection.v1." + field.type_name[len(".grpc.reflection.v1alpha.") :]
                )
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(".v1alpha.", ".v1.")
            method.output_type = method.output_type.replace(".v1alpha.", ".v1.")
    descriptors.Add(proto)


def enable_reflection(service_names: Iterable[str], server: grpc.aio.Server) -> None:
    """Serves reflection for `service_names` (plus both reflection services) as v1 and v1alpha."""
    _add_v1_descriptor(descriptor_pool.Default())
    names = (*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME)
    reflection.enable_server_reflection(names, server)  # registers v1alpha
    servicer = reflection.aio.ReflectionServicer(names)
    handlers = {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=v1alpha_pb2.ServerReflectionRequest.FromString,
            response_serializer=v1alpha_pb2.ServerReflectionResponse.SerializeToString,
        )
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(V1_SERVICE_NAME, handlers),)
    )
    server.add_registered_method_handlers(V1_SERVICE_NAME, handlers)
