"""The v1 contract's conventions that a descriptor can check (STYLE.md lesson 17).

Times are google.protobuf.Duration, never a `double ..._s`; a field that
changed type keeps its old number and name reserved, so an old client's
bytes can never be read as the new field.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor

from leanrpc.v1 import formalizer_pb2, prover_pb2, verifier_pb2

FILES = (verifier_pb2, formalizer_pb2, prover_pb2)


def _messages(container):
    for message in (
        container.message_types_by_name.values()
        if hasattr(container, "message_types_by_name")
        else container.nested_types
    ):
        yield message
        yield from _messages(message)


def _fields():
    for module in FILES:
        for message in _messages(module.DESCRIPTOR):
            yield from message.fields


def test_times_are_durations():
    seconds = sorted(
        f.full_name
        for f in _fields()
        if f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
        and f.name.endswith("_s")
    )
    assert not seconds, f"use google.protobuf.Duration for these: {seconds}"


def test_the_formalizer_reserves_the_numbers_and_names_of_its_old_seconds_fields():
    info = formalizer_pb2.FormalizerInfo.DESCRIPTOR
    request = formalizer_pb2.FormalizeRequest.DESCRIPTOR
    outcome = formalizer_pb2.Outcome.DESCRIPTOR
    for message, numbers, names, new in (
        (info, {7, 8}, {"job_budget_s", "stream_budget_s"}, ("job_budget", "stream_budget")),
        (request, {10}, {"budget_s"}, ("budget",)),
        (outcome, {5}, {"generation_s"}, ("generation", "elapsed", "budget")),
    ):
        assert not numbers & {f.number for f in message.fields}, message.full_name
        assert not names & set(message.fields_by_name), message.full_name
        for name in new:
            assert message.fields_by_name[name].message_type.full_name == "google.protobuf.Duration"
    # The reserved numbers are in the serialized descriptor (a reader can check them).
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto()
    formalizer_pb2.DESCRIPTOR.CopyToProto(proto)
    by_name = {m.name: m for m in proto.message_type}

    def numbers(message):
        return {n for r in message.reserved_range for n in range(r.start, r.end)}

    assert numbers(by_name["FormalizerInfo"]) == {7, 8}
    assert set(by_name["FormalizerInfo"].reserved_name) == {"job_budget_s", "stream_budget_s"}
    assert numbers(by_name["FormalizeRequest"]) == {10}
    assert numbers(by_name["Outcome"]) == {5} and set(by_name["Outcome"].reserved_name) == {
        "generation_s"
    }
    assert set(by_name["FormalizeRequest"].reserved_name) == {"budget_s"}


def test_the_prover_reserves_the_numbers_and_names_of_its_old_seconds_fields():
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto()
    prover_pb2.DESCRIPTOR.CopyToProto(proto)
    by_name = {m.name: m for m in proto.message_type}
    for message, numbers, names, new in (
        ("StartProofRequest", {2, 3}, {"timeout_s", "ttl_s"}, ("timeout", "ttl")),
        ("StartProofResponse", {5}, {"elapsed_s"}, ("elapsed",)),
        ("RunTacticRequest", {3}, {"timeout_s"}, ("timeout",)),
        ("ExpandRequest", {4}, {"timeout_s"}, ("timeout",)),
        ("TacticResult", {10}, {"elapsed_s"}, ("elapsed",)),
    ):
        descriptor = prover_pb2.DESCRIPTOR.message_types_by_name[message]
        assert not numbers & {f.number for f in descriptor.fields}, message
        assert not names & set(descriptor.fields_by_name), message
        for name in new:
            assert (
                descriptor.fields_by_name[name].message_type.full_name == "google.protobuf.Duration"
            )
        reserved = by_name[message]
        assert {n for r in reserved.reserved_range for n in range(r.start, r.end)} == numbers, (
            message
        )
        assert set(reserved.reserved_name) == names, message
