"""LLM: offline generation and chat over the DeepInfer engine, shaped like vLLM's ``LLM``.

Prompts may be a string, a list of strings, a list of token ids, a list of token-id lists, or
vLLM prompt dicts ({"prompt": ...} / {"prompt_token_ids": [...]}). ``generate`` returns one
RequestOutput per prompt, in order. The engine runs on a background thread; the GIL is released
while it works, so other Python threads keep running.
"""

import json
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from deepinfer import _core
from deepinfer.outputs import CompletionOutput, Logprob, RequestOutput, StreamOutput
from deepinfer.sampling_params import SamplingParams

PromptType = Union[str, List[int], Dict[str, Any]]


def _is_token_list(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(t, int) for t in x)


def _with_images(item: Dict[str, Any], p: Dict[str, Any], i: int) -> Dict[str, Any]:
    """vLLM's multi_modal_data={"image": ...}: image files (bytes of a PNG or JPEG, or a path), one
    per <｜deepseek_image｜> placeholder of the prompt, in order (a single image or a list)."""
    mm = p.get("multi_modal_data")
    if mm is None:
        return item
    if not isinstance(mm, dict) or set(mm) - {"image"}:
        raise ValueError(f"prompts[{i}].multi_modal_data: only {{'image': ...}} is supported")
    images = mm.get("image")
    images = images if isinstance(images, (list, tuple)) else [images]
    data = []
    for k, img in enumerate(images):
        if isinstance(img, (bytes, bytearray, memoryview)):
            data.append(bytes(img))
        elif isinstance(img, str):
            with open(img, "rb") as f:
                data.append(f.read())
        else:
            raise ValueError(f"prompts[{i}].multi_modal_data.image[{k}]: expected the bytes of a PNG or JPEG "
                             f"file or a file path, got {type(img).__name__}")
    return dict(item, images=data)


def _normalize_prompts(prompts: Any) -> List[Dict[str, Any]]:
    if isinstance(prompts, (str, dict)) or _is_token_list(prompts):
        prompts = [prompts]
    if not isinstance(prompts, (list, tuple)) or len(prompts) == 0:
        raise ValueError("prompts must be a string, token ids, a prompt dict, or a non-empty list of them")
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            out.append({"prompt": p})
        elif _is_token_list(p):
            out.append({"prompt_token_ids": list(p)})
        elif isinstance(p, dict) and "prompt_token_ids" in p:
            # vLLM's TokensPrompt may carry the text too: the ids are the prompt, the text is reported.
            item = {"prompt_token_ids": p["prompt_token_ids"]}
            if isinstance(p.get("prompt"), str):
                item["_text"] = p["prompt"]
            out.append(_with_images(item, p, i))
        elif isinstance(p, dict) and "prompt" in p:
            out.append(_with_images({"prompt": p["prompt"]}, p, i))
        else:
            raise ValueError(f"prompts[{i}]: expected a string, a list of token ids or a prompt dict")
    return out


# chat_template_kwargs the DeepSeek encoding reads (the rest are ignored, as a template ignores them).
_RENDER_KEYS = ("thinking_mode", "reasoning_effort", "drop_thinking", "add_bos", "add_default_bos_token")


def _thinking_switch(chat_template_kwargs: Optional[Dict[str, Any]], thinking: bool) -> bool:
    kwargs = chat_template_kwargs or {}
    for key in ("thinking", "enable_thinking"):  # DeepSeek's name, and the one Qwen-style clients send
        if key in kwargs:
            return bool(kwargs[key])
    return thinking


def _chat_document(conv: List[Dict[str, Any]], thinking: bool, reasoning_effort: Any, tools: Any,
                   chat_template_kwargs: Optional[Dict[str, Any]], add_generation_prompt: bool,
                   continue_final_message: bool) -> str:
    """The conversation document the engine renders (conversation JSON, docs/chat-encoding.md)."""
    if continue_final_message and add_generation_prompt:
        raise ValueError("continue_final_message and add_generation_prompt cannot both be True "
                         "(pass add_generation_prompt=False to continue the last message)")
    if not continue_final_message and not add_generation_prompt:
        raise ValueError("add_generation_prompt=False needs continue_final_message=True: the DeepSeek encoding "
                         "opens the assistant turn after the last user or tool message")
    conv = [dict(m) for m in conv]
    if continue_final_message:
        if not conv or conv[-1].get("role") != "assistant":
            raise ValueError("continue_final_message: the last message must be an assistant message")
        conv[-1]["wo_eos"] = True  # rendered open: the reply continues its content
    doc: Dict[str, Any] = {"messages": conv, "thinking_mode": "thinking" if thinking else "chat"}
    if reasoning_effort is not None:
        doc["reasoning_effort"] = reasoning_effort
    if tools:
        doc["tools"] = tools  # OpenAI style: {"type": "function", "function": {...}}
    for key, value in (chat_template_kwargs or {}).items():
        if key in _RENDER_KEYS:
            doc[key] = value
    return json.dumps(doc, ensure_ascii=False)


def _params_list(sampling_params: Any, n: int) -> List[SamplingParams]:
    if sampling_params is None:
        return [SamplingParams()] * n
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * n
    params = list(sampling_params)
    if len(params) != n:
        raise ValueError(f"got {len(params)} sampling_params for {n} prompts")
    return params


class LLM:
    """An engine with one model loaded.

    ``model`` is a checkpoint directory, a repo id found locally (DEEPINFER_HF_MODEL_DIR or the
    Hugging Face cache), or "demo" (the embedded tiny model, generated on first use). Other
    keyword arguments are EngineOptions fields (max_num_seqs, max_num_batched_tokens,
    max_model_len, block_tokens, kv_blocks, kv_cache_bytes, enable_prefix_caching, replay_mode,
    seed, numerics, device, tokenizer, ...); unknown ones raise ValueError. DeepInfer's
    environment variables are applied first, explicit arguments win.
    """

    def __init__(self, model: str = "demo", **engine_options: Any) -> None:
        self._engine = _core.Engine(model=model, **engine_options)
        self.model = model

    # -- generation ---------------------------------------------------------------------------

    def generate(self, prompts: Any, sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None,
                 *, use_tqdm: bool = False, cache_salt: Optional[str] = None) -> List[RequestOutput]:
        return self._generate(prompts, sampling_params, use_tqdm=use_tqdm, cache_salt=cache_salt)

    def _generate(self, prompts: Any, sampling_params: Any, *, use_tqdm: bool = False,
                  cache_salt: Optional[str] = None, after_reasoning: bool = False) -> List[RequestOutput]:
        items = _normalize_prompts(prompts)
        params = _params_list(sampling_params, len(items))
        requests = [self._request(item, p, cache_salt, after_reasoning) for item, p in zip(items, params)]
        raw = self._engine.generate(requests, progress=use_tqdm and len(requests) > 1)
        return [self._request_output(item, r, p) for item, r, p in zip(items, raw, params)]

    def stream(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None) -> Iterator[StreamOutput]:
        """Yields StreamOutput deltas as tokens are generated (closing the iterator aborts)."""
        item = _normalize_prompts(prompt)[0]
        p = sampling_params or SamplingParams()
        s = self._engine.stream(self._request(item, p, None))
        finished = False
        try:
            while True:
                e = s.next()
                if e is None:
                    finished = True
                    return
                prompt_lps = None
                if p.prompt_logprobs is not None and e["prompt_logprobs"]:
                    prompt_lps = self._prompt_logprobs(e["prompt_logprobs"])
                yield StreamOutput(index=e["index"], text=e["text"], token_ids=list(e["token_ids"]),
                                   finish_reason=e["finish_reason"], error=e["error"] or None,
                                   logprobs=self._logprobs(e["logprobs"]) if p.logprobs is not None else None,
                                   prompt_logprobs=prompt_lps)
        finally:
            if not finished:
                s.abort()

    def chat(self, messages: Union[List[Dict[str, Any]], List[List[Dict[str, Any]]]],
             sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None, *,
             use_tqdm: bool = False, thinking: bool = False, reasoning_effort: Optional[Union[str, int]] = None,
             tools: Optional[List[Dict[str, Any]]] = None, chat_template_kwargs: Optional[Dict[str, Any]] = None,
             add_generation_prompt: bool = True, continue_final_message: bool = False
             ) -> List[RequestOutput]:
        """One conversation (a list of OpenAI-style message dicts) or a list of conversations.

        Renders with the DeepSeek chat encoding (thinking mode switch, reasoning effort, tools),
        generates, and parses each reply: CompletionOutput.text is the raw decoded text, and
        .reasoning_content / .content / .tool_calls hold the parsed turn. As in vLLM,
        ``continue_final_message=True`` (with ``add_generation_prompt=False``) continues the last
        message, an assistant turn, instead of opening a new one; ``chat_template_kwargs`` keys the
        encoding does not use are ignored (``thinking`` / ``enable_thinking`` switch thinking mode).
        """
        conversations = messages if messages and isinstance(messages[0], list) else [messages]
        thinking = _thinking_switch(chat_template_kwargs, thinking)
        prompt_ids = [self._engine.render_chat(_chat_document(
            conv, thinking, reasoning_effort, tools, chat_template_kwargs, add_generation_prompt, continue_final_message))
            for conv in conversations]
        # In thinking mode a structured output constrains the answer after </think>, not the reasoning.
        outputs = self._generate(prompt_ids, sampling_params, use_tqdm=use_tqdm, after_reasoning=thinking)
        for out in outputs:
            for c in out.outputs:
                parsed = self._engine.parse_chat_output(c.token_ids, thinking, c.finish_reason or "stop")
                c.reasoning_content = parsed["reasoning_content"]
                c.content = parsed["content"]
                c.tool_calls = parsed["tool_calls"]
        return outputs

    # -- helpers ------------------------------------------------------------------------------

    def get_tokenizer(self) -> "Tokenizer":
        return Tokenizer(self._engine)

    def stats(self) -> Dict[str, Any]:
        return self._engine.stats()

    @property
    def model_dir(self) -> str:
        return self._engine.model_dir

    @property
    def max_model_len(self) -> int:
        return self._engine.max_model_len

    def shutdown(self) -> None:
        self._engine.shutdown(True)

    def _request(self, item: Dict[str, Any], p: SamplingParams, cache_salt: Optional[str],
                 after_reasoning: bool = False) -> Dict[str, Any]:
        r = {k: v for k, v in item.items() if k in ("prompt", "prompt_token_ids", "images")}
        r["sampling"] = p._sampling_dict()
        so = p._structured_dict()
        if so is not None:
            if after_reasoning and so.get("after_reasoning") is None:
                so = dict(so, after_reasoning=True)
            r["structured_outputs"] = so
        if cache_salt:
            r["cache_salt"] = cache_salt
        return r

    def _logprobs(self, raw: list) -> List[Dict[int, Logprob]]:
        out = []
        for token, logprob, token_rank, top in raw:
            entry: Dict[int, Logprob] = {}
            for rank, (t, lp) in enumerate(top, start=1):
                entry[t] = Logprob(lp, rank, self._engine.decode([t], False))
            if token not in entry:
                entry[token] = Logprob(logprob, token_rank or None, self._engine.decode([token], False))
            out.append(entry)
        return out

    def _prompt_logprobs(self, raw: list) -> List[Optional[Dict[int, Logprob]]]:
        """vLLM's RequestOutput.prompt_logprobs: None for the first prompt token (nothing predicts
        it), then per token a dict of its Logprob (with its rank in the whole distribution) and the
        top-N's (ranks 1..N)."""
        out: List[Optional[Dict[int, Logprob]]] = [None]
        for token, logprob, rank, top in raw:
            entry: Dict[int, Logprob] = {}
            for r, (t, lp) in enumerate(top, start=1):
                entry[t] = Logprob(lp, r, self._engine.decode([t], False))
            entry[token] = Logprob(logprob, rank, self._engine.decode([token], False))
            out.append(entry)
        return out

    def _request_output(self, item: Dict[str, Any], raw: Dict[str, Any], p: SamplingParams) -> RequestOutput:
        completions = []
        for i, s in enumerate(raw["outputs"]):
            want = p.logprobs is not None
            completions.append(CompletionOutput(
                index=i, text=s["text"], token_ids=list(s["token_ids"]),
                cumulative_logprob=sum(e[1] for e in s["logprobs"]) if want else None,
                logprobs=self._logprobs(s["logprobs"]) if want else None,
                finish_reason=s["finish_reason"], stop_reason=s.get("stop_reason"), error=s["error"] or None))
        return RequestOutput(request_id=str(raw["request_id"]), prompt=item.get("prompt", item.get("_text")),
                             prompt_token_ids=list(raw["prompt_token_ids"]), outputs=completions,
                             num_cached_tokens=raw["num_cached_tokens"],
                             prompt_logprobs=(self._prompt_logprobs(raw["prompt_logprobs"])
                                              if p.prompt_logprobs is not None else None))


class Tokenizer:
    """The engine's tokenizer: encode (special tokens matched), decode, and the pieces of the HF
    tokenizer interface vLLM scripts use (calling it, batch_decode, apply_chat_template with the
    DeepSeek encoding)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def __call__(self, text: Union[str, List[str]], add_special_tokens: bool = True) -> Dict[str, Any]:
        """{"input_ids": ids} for a text, or a list of them for a list of texts (HF's BatchEncoding keys)."""
        if isinstance(text, str):
            return {"input_ids": self.encode(text, add_special_tokens)}
        return {"input_ids": [self.encode(t, add_special_tokens) for t in text]}

    def batch_decode(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> List[str]:
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    def apply_chat_template(self, conversation: List[Dict[str, Any]], tokenize: bool = True,
                            add_generation_prompt: bool = True, tools: Optional[List[Dict[str, Any]]] = None,
                            continue_final_message: bool = False, **kwargs: Any) -> Union[List[int], str]:
        """The DeepSeek chat encoding of one conversation: token ids, or their text (tokenize=False).
        Keyword arguments are chat_template_kwargs (``thinking`` / ``enable_thinking``,
        ``reasoning_effort``, ...); as LLM.chat, the prompt ends with the assistant turn opened."""
        for unused in ("chat_template", "return_tensors", "return_dict", "padding", "truncation", "max_length"):
            kwargs.pop(unused, None)
        thinking = _thinking_switch(kwargs, False)
        doc = _chat_document(conversation, thinking, None, tools, kwargs,  # (reasoning_effort rides in kwargs)
                             add_generation_prompt, continue_final_message)
        ids = self._engine.render_chat(doc)
        return ids if tokenize else self.decode(ids, False)

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of `text` (special-token text matched); BOS first if add_special_tokens."""
        ids = self._engine.encode(text, True)
        if add_special_tokens and (not ids or ids[0] != self._engine.bos_token_id):
            ids.insert(0, self._engine.bos_token_id)
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._engine.decode(list(ids), skip_special_tokens)

    @property
    def eos_token_id(self) -> int:
        return self._engine.eos_token_id

    @property
    def bos_token_id(self) -> int:
        return self._engine.bos_token_id
