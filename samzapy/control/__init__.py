"""Control messages: end-of-stream and watermarks carried in-band through framed streams.

``wire`` is the record format (Samza's IntermediateMessage: a type byte, then the payload);
``reconcile`` is the pure per-task bookkeeping that turns the control messages of many
upstream tasks into one end-of-stream and one watermark per partition, and that is
checkpointed with the offsets; ``origins`` lets a reader drop the records a restarted
writer sends again.
"""

from samzapy.control.wire import (
    END_OF_STREAM,
    USER_MESSAGE,
    USER_MESSAGE_WITH_COMPACT_ORIGIN,
    USER_MESSAGE_WITH_FLOOR,
    USER_MESSAGE_WITH_ORIGIN,
    WATERMARK,
    ControlMessage,
    EndOfStreamMessage,
    FrameError,
    Origin,
    WatermarkMessage,
    decode,
    encode_control,
    frame,
)

__all__ = [
    "END_OF_STREAM",
    "USER_MESSAGE",
    "USER_MESSAGE_WITH_FLOOR",
    "USER_MESSAGE_WITH_COMPACT_ORIGIN",
    "USER_MESSAGE_WITH_ORIGIN",
    "WATERMARK",
    "ControlMessage",
    "EndOfStreamMessage",
    "FrameError",
    "Origin",
    "WatermarkMessage",
    "decode",
    "encode_control",
    "frame",
]
