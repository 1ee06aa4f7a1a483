"""Control messages: end-of-stream and watermarks carried in-band through framed streams.

``wire`` is the record format (Samza's IntermediateMessage: a type byte, then the payload);
``reconcile`` is the pure per-task bookkeeping that turns the control messages of many
upstream tasks into one end-of-stream and one watermark per partition, and that is
checkpointed with the offsets.
"""

from samzapy.control.wire import (
    END_OF_STREAM,
    USER_MESSAGE,
    WATERMARK,
    ControlMessage,
    EndOfStreamMessage,
    FrameError,
    WatermarkMessage,
    decode,
    encode_control,
    frame,
)

__all__ = [
    "END_OF_STREAM",
    "USER_MESSAGE",
    "WATERMARK",
    "ControlMessage",
    "EndOfStreamMessage",
    "FrameError",
    "WatermarkMessage",
    "decode",
    "encode_control",
    "frame",
]
