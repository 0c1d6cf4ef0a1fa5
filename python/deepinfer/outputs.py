"""vLLM-shaped output classes: RequestOutput holds one prompt and its CompletionOutputs."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class Logprob:
    """A token's log-probability, its rank in the distribution (1 = most likely) and its decoded
    text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str] = None  # "stop" | "length" | "abort" | "error"
    stop_reason: Optional[Union[str, int]] = None  # the stop string or stop token id that ended it (vLLM's)
    error: Optional[str] = None
    # LLM.chat only: the parsed turn (reasoning apart from the answer, tool calls).
    reasoning_content: Optional[str] = None
    content: Optional[str] = None
    tool_calls: Optional[List[dict]] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool = True
    num_cached_tokens: int = 0
    prompt_logprobs: Optional[list] = None
    metrics: Optional[dict] = field(default=None, repr=False)


@dataclass
class StreamOutput:
    """One streamed delta of LLM.stream: new token ids and text of sequence `index`."""

    index: int
    text: str
    token_ids: List[int]
    finish_reason: Optional[str] = None
    error: Optional[str] = None
    # With SamplingParams(logprobs=N): one dict per token of this delta, as CompletionOutput's.
    logprobs: Optional[List[Dict[int, Logprob]]] = None
    # With SamplingParams(prompt_logprobs=N): vLLM's list (None first), on sample 0's first delta
    # only; None on every other delta.
    prompt_logprobs: Optional[list] = None
