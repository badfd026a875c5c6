"""What the model is shown: the history it receives, its size, its compaction, and the loop's own messages.

* ``history.py``: the transcript a run starts from, history shaping and where history may be cut;
* ``tokens.py``: the size of the next request, from the provider's last report and an estimate;
* ``window.py``: the model's view of the transcript and compaction (the contract is its docstring);
* ``prompts.py``: the messages the loop writes (corrections, the summary requests, the request to go on with an
  answer cut at the output limit) and fallback answers.
"""

from tether.loop.context.history import cut_points, prepare_history, shape_history, unrunnable
from tether.loop.context.prompts import (
    COMPACTION_REQUEST,
    CONTINUATION_REQUEST,
    SUMMARY_REQUEST,
    compaction_request,
    continuation_request,
    correction,
    dropped_summary,
    fallback_text,
    summary_request,
)

__all__ = [
    "COMPACTION_REQUEST",
    "CONTINUATION_REQUEST",
    "SUMMARY_REQUEST",
    "compaction_request",
    "continuation_request",
    "correction",
    "cut_points",
    "dropped_summary",
    "fallback_text",
    "prepare_history",
    "shape_history",
    "summary_request",
    "unrunnable",
]
