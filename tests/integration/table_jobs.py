"""An application with a table and joins that the table tests run through `samzapy run`.

``PaidOrders`` keeps each member's latest profile in a changelogged RocksDB table, joins each
order with its payment (a stream-stream join in processing time) and enriches the pair with
the member's profile (a stream-table join). Every input is keyed by member id and partitioned
alike, so a member's profile, orders and payments reach one task. Topics come from the job
file's own keys (``app.profiles``, ``app.orders``, ``app.payments``, ``app.paid``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from samzapy import (
    KV,
    KafkaSystemDescriptor,
    KVSerde,
    RocksDbTableDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
)

#: The table's id: its store, and its changelog ``<job.name>-<job.id>-table-profiles``.
PROFILES = "profiles"
#: The stream-stream join's op_id: its stores ``orders-payments-L`` and ``-R``.
ORDERS_PAYMENTS = "orders-payments"
#: Processing time between an order and its payment within which they join: far longer than
#: the test, so that only a lost store entry can keep a pair from joining.
JOIN_TTL = timedelta(hours=1)


class OrderPayment:
    """Samza's JoinFunction: an order and its payment, joined by order id (not by the member
    id they are keyed by: a member has many orders, and a side keeps one message per key)."""

    def get_first_key(self, order: KV) -> Any:
        return order.value["order"]

    def get_second_key(self, payment: KV) -> Any:
        return payment.value["order"]

    def apply(self, order: KV, payment: KV) -> KV:
        return KV(
            order.key,
            {
                "order": order.value["order"],
                "member": order.key,
                "amount": order.value["amount"],
                "method": payment.value["method"],
            },
        )


class WithProfile:
    """Samza's StreamTableJoinFunction: a paid order and its member's profile; ``name`` is
    None when the table has no profile for the member (what a lost table would show)."""

    def get_message_key(self, message: KV) -> Any:
        return message.key

    def get_record_key(self, record: KV) -> Any:
        return record.key

    def apply(self, message: KV, record: KV | None) -> KV:
        name = None if record is None else record.value["name"]
        return KV(message.key, {**message.value, "name": name})


class PaidOrders(StreamApplication):
    """Profiles (``member -> {"name"}``) into the table ``profiles``; orders (``member ->
    {"order", "amount"}``) joined with payments (``member -> {"order", "method"}``) by order
    id, enriched with the member's name and sent, keyed by member, to ``app.paid``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        json_kv = KVSerde("string", "json")

        def stream(stream_id: str) -> Any:
            descriptor = kafka.get_input_descriptor(stream_id, json_kv)
            descriptor.with_physical_name(str(app_desc.config[f"app.{stream_id}"]))
            return app_desc.get_input_stream(descriptor)

        paid = kafka.get_output_descriptor("paid", json_kv)
        paid.with_physical_name(str(app_desc.config["app.paid"]))
        profiles = app_desc.get_table(
            RocksDbTableDescriptor(PROFILES, json_kv).with_changelog_enabled()
        )
        stream("profiles").send_to(profiles)
        (
            stream("orders")
            .join(
                stream("payments"),
                OrderPayment(),
                "string",
                json_kv,
                json_kv,
                JOIN_TTL,
                ORDERS_PAYMENTS,
            )
            .join(profiles, WithProfile())
            .send_to(app_desc.get_output_stream(paid))
        )
