"""Offline inference with DeepInfer, the vLLM way.

Runs on the embedded demo model (a tiny DeepSeek-V4-Flash with random weights, generated on
first use), so its text is random; pass a checkpoint to see real output:

    PYTHONPATH=build/python python3 examples/offline_inference.py [--model /path/to/checkpoint]
"""

import argparse

from deepinfer import LLM, SamplingParams


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="demo", help="checkpoint dir, repo id, or 'demo'")
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()

    prompts = [
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    ]
    sampling_params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=args.max_tokens, seed=0)

    llm = LLM(model=args.model)
    outputs = llm.generate(prompts, sampling_params)
    print("\nGenerated Outputs:\n" + "-" * 60)
    for output in outputs:
        print(f"Prompt:    {output.prompt!r}")
        print(f"Output:    {output.outputs[0].text!r}")
        print(f"Tokens:    {len(output.outputs[0].token_ids)} ({output.outputs[0].finish_reason})")
        print("-" * 60)

    # Chat through the DeepSeek encoding, with the thinking switch.
    conversation = [{"role": "user", "content": "Write one sentence about the sea."}]
    reply = llm.chat(conversation, SamplingParams(temperature=0.7, max_tokens=args.max_tokens, seed=1),
                     thinking=True)[0].outputs[0]
    print(f"Chat reasoning: {reply.reasoning_content!r}")
    print(f"Chat answer:    {reply.content!r}")
    llm.shutdown()


if __name__ == "__main__":
    main()
