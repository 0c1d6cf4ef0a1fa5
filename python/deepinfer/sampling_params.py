"""SamplingParams with vLLM's field names, validated by the engine's own rules at construction.

Invalid values raise ValueError naming the field (e.g. ``top_p = 1.5 is outside (0, 1]``). The
order in which the fields apply and the determinism guarantees are in docs/sampling.md.
"""

from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional, Union

from deepinfer import _core


@dataclass
class StructuredOutputsParams:
    """Constrain the output: exactly one of a JSON schema, a regex, an EBNF grammar or any JSON object."""

    json: Optional[Union[str, Dict[str, Any]]] = None
    regex: Optional[str] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    # One of these strings exactly (vLLM's `choice`: a regex of the escaped alternatives).
    choice: Optional[List[str]] = None
    # Constrain only what follows the model's </think> (reasoning stays free). LLM.chat sets it in
    # thinking mode; set it yourself for raw thinking-mode prompts passed to generate().
    after_reasoning: Optional[bool] = None

    def to_dict(self) -> Dict[str, Any]:
        return _with_choice({"json": self.json, "regex": self.regex, "grammar": self.grammar,
                             "json_object": self.json_object, "choice": self.choice,
                             "after_reasoning": self.after_reasoning})


def _regex_escape(text: str) -> str:
    # Every ASCII character but letters and digits escaped (an identity escape in the engine's
    # regex dialect); other characters stand for themselves.
    return "".join("\\" + c if ord(c) < 128 and not c.isalnum() else c for c in text)


def _with_choice(d: Dict[str, Any]) -> Dict[str, Any]:
    """A `choice` list becomes the regex of its alternatives (the engine has no choice kind)."""
    d = dict(d)
    choice = d.pop("choice", None)
    if choice is not None:
        if d.get("regex") is not None:
            raise ValueError("structured_outputs: give exactly one of json, regex, grammar, json_object, choice")
        if isinstance(choice, str) or not choice or not all(isinstance(c, str) for c in choice):
            raise ValueError("structured_outputs.choice: expected a non-empty list of strings")
        d["regex"] = "(" + "|".join(_regex_escape(c) for c in choice) + ")"
    return d


@dataclass
class SamplingParams:
    """Per-request sampling parameters (vLLM names and defaults; ``max_tokens`` defaults to 16)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    logprobs_mode: str = "raw_logprobs"
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Optional[Dict[int, float]] = None
    allowed_token_ids: Optional[List[int]] = None
    bad_words: Optional[List[str]] = None
    structured_outputs: Optional[StructuredOutputsParams] = None

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        # vLLM's: lists, never None, once constructed.
        if self.stop is None:
            self.stop = []
        if self.stop_token_ids is None:
            self.stop_token_ids = []
        if self.top_k == 0:
            self.top_k = -1  # vLLM: 0 and -1 both disable top-k
        _core.validate_sampling(self._sampling_dict())

    def _sampling_dict(self) -> Dict[str, Any]:
        d = {}
        for f in fields(self):
            if f.name == "structured_outputs":
                continue
            value = getattr(self, f.name)
            if value is None and f.name in ("stop", "stop_token_ids", "logit_bias", "allowed_token_ids", "bad_words"):
                continue
            d[f.name] = value
        if self.logit_bias is not None:
            d["logit_bias"] = {int(k): float(v) for k, v in self.logit_bias.items()}
        return d

    def _structured_dict(self) -> Optional[Dict[str, Any]]:
        so = self.structured_outputs
        if so is None:
            return None
        return so.to_dict() if isinstance(so, StructuredOutputsParams) else _with_choice(so)

    def clone(self) -> "SamplingParams":
        import copy

        return copy.deepcopy(self)
