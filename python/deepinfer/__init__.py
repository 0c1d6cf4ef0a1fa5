"""DeepInfer: offline inference for DeepSeek-V4-Flash / V4.1-Flash.

The API is shaped like vLLM's offline API::

    from deepinfer import LLM, SamplingParams
    llm = LLM(model="demo")                       # the embedded tiny model
    outputs = llm.generate(["Hello"], SamplingParams(temperature=0.8, max_tokens=32, seed=1))
    print(outputs[0].outputs[0].text)

The compiled engine lives in ``deepinfer._core``; this package adds the vLLM-shaped classes.
"""

from deepinfer._core import DEFAULT_MODEL_ID, DEMO_MODEL, cache_dir, resolve_model_dir
from deepinfer.llm import LLM
from deepinfer.outputs import CompletionOutput, Logprob, RequestOutput, StreamOutput
from deepinfer.sampling_params import SamplingParams, StructuredOutputsParams

__all__ = [
    "LLM",
    "SamplingParams",
    "StructuredOutputsParams",
    "RequestOutput",
    "CompletionOutput",
    "StreamOutput",
    "Logprob",
    "DEFAULT_MODEL_ID",
    "DEMO_MODEL",
    "cache_dir",
    "resolve_model_dir",
]
__version__ = "0.1.0"
