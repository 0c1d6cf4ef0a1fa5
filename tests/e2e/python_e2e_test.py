"""End to end through the Python module on the tiny demo model (run by python_e2e_test.cc with
PYTHONPATH=<build>/python and DI_TEST_MODEL=<tiny-v4f dir>): LLM.generate with text and id prompts,
seeds, n > 1, logprobs, prompt logprobs and stop strings; LLM.chat in both thinking modes;
streaming; errors."""

import json
import os
import struct
import threading
import unittest
import zlib

import deepinfer
from deepinfer import LLM, SamplingParams

MODEL = os.environ["DI_TEST_MODEL"]


class PythonE2eTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = LLM(model=MODEL, kv_blocks=32, max_num_seqs=8)

    def test_generate_text_prompts(self):
        params = SamplingParams(temperature=0.8, max_tokens=5, seed=3, ignore_eos=True)
        outs = self.llm.generate(["Hello, my name is", "The capital of France is"], params)
        self.assertEqual(len(outs), 2)
        for out, prompt in zip(outs, ["Hello, my name is", "The capital of France is"]):
            self.assertIsInstance(out, deepinfer.RequestOutput)
            self.assertEqual(out.prompt, prompt)
            self.assertEqual(out.prompt_token_ids[0], 0)  # BOS
            c = out.outputs[0]
            self.assertIsInstance(c, deepinfer.CompletionOutput)
            self.assertEqual(len(c.token_ids), 5)
            self.assertEqual(c.finish_reason, "length")
            self.assertEqual(c.text, self.llm.get_tokenizer().decode(c.token_ids, skip_special_tokens=True))
            self.assertIsNone(c.logprobs)
        again = self.llm.generate("The capital of France is", params)
        self.assertEqual(again[0].outputs[0].token_ids, outs[1].outputs[0].token_ids)

    def test_token_id_prompts_n_and_logprobs(self):
        params = SamplingParams(n=2, max_tokens=4, seed=5, logprobs=3, ignore_eos=True)
        outs = self.llm.generate([[0, 100, 200], [0, 300]], params)
        self.assertEqual(outs[1].prompt_token_ids, [0, 300])
        self.assertIsNone(outs[1].prompt)
        self.assertEqual(len(outs[0].outputs), 2)
        c = outs[0].outputs[0]
        self.assertEqual(len(c.logprobs), 4)
        for token, entry in zip(c.token_ids, c.logprobs):
            self.assertIn(token, entry)
            self.assertLessEqual(entry[token].logprob, 0.0)
            # The top 3 (ranks 1..3) and the sampled token with its rank in the whole distribution.
            ranks = sorted(lp.rank for t, lp in entry.items() if t != token or lp.rank <= 3)
            self.assertEqual(ranks, [1, 2, 3])
            self.assertEqual(len(entry), 3 if entry[token].rank <= 3 else 4)
        self.assertAlmostEqual(c.cumulative_logprob, sum(e[t].logprob for t, e in zip(c.token_ids, c.logprobs)), 4)
        single = self.llm.generate([[0, 100, 200]], SamplingParams(max_tokens=4, seed=5, ignore_eos=True))
        self.assertEqual(single[0].outputs[0].token_ids, c.token_ids)  # sample 0 of n == n = 1

    def test_prompt_logprobs(self):
        # Two arbitrary tokens after BOS, then the greedy continuation: tokens of rank > 20 and of rank 1.
        head = [0, 100, 200]
        greedy = self.llm.generate([head], SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True))[0]
        prompt = head + list(greedy.outputs[0].token_ids)
        out = self.llm.generate([prompt], SamplingParams(max_tokens=2, seed=1, prompt_logprobs=2))[0]
        self.assertIsNone(out.outputs[0].logprobs)
        pl = out.prompt_logprobs
        self.assertEqual(len(pl), len(prompt))
        self.assertIsNone(pl[0])  # nothing predicts the first token
        for i in range(1, len(prompt)):
            entry = pl[i]
            lp = entry[prompt[i]]
            self.assertLessEqual(lp.logprob, 0.0)
            self.assertEqual(lp.decoded_token, self.llm.get_tokenizer().decode([prompt[i]]))
            self.assertEqual(sorted(v.rank for t, v in entry.items() if t != prompt[i] or v.rank <= 2), [1, 2])
            self.assertEqual(len(entry), 2 if lp.rank <= 2 else 3)
            if i >= len(head):
                self.assertEqual(lp.rank, 1)  # the greedy token
            # Independently: the raw top-20 of the first token generated after prompt[:i].
            first = self.llm.generate([prompt[:i]], SamplingParams(max_tokens=1, seed=1, logprobs=20))[0]
            want = {t: v for t, v in first.outputs[0].logprobs[0].items() if v.rank <= 20}
            self.assertEqual(len(want), 20)
            for t, v in entry.items():
                if t in want:
                    self.assertEqual(v.rank, want[t].rank)
                    self.assertAlmostEqual(v.logprob, want[t].logprob, places=5)
                else:
                    self.assertGreater(v.rank, 20)
                    self.assertLess(v.logprob, min(w.logprob for w in want.values()))
        # prompt_logprobs=0: the prompt token alone; n = 2: once per prompt, the same values.
        zero = self.llm.generate([prompt], SamplingParams(max_tokens=1, n=2, seed=1, prompt_logprobs=0))[0]
        self.assertEqual(len(zero.outputs), 2)
        for i in range(1, len(prompt)):
            self.assertEqual(list(zero.prompt_logprobs[i]), [prompt[i]])
            self.assertAlmostEqual(zero.prompt_logprobs[i][prompt[i]].logprob, pl[i][prompt[i]].logprob, places=6)
            self.assertEqual(zero.prompt_logprobs[i][prompt[i]].rank, pl[i][prompt[i]].rank)
        self.assertIsNone(self.llm.generate([prompt], SamplingParams(max_tokens=1))[0].prompt_logprobs)

    def test_per_prompt_params_and_stop_strings(self):
        free = self.llm.generate("Once upon a time", SamplingParams(max_tokens=12, seed=9, ignore_eos=True))[0]
        text = free.outputs[0].text
        self.assertGreater(len(text), 2)
        stop = text[len(text) // 2:len(text) // 2 + 2]
        cut = self.llm.generate(["Once upon a time", "x"],
                                [SamplingParams(max_tokens=12, seed=9, ignore_eos=True, stop=stop),
                                 SamplingParams(max_tokens=1)])
        self.assertEqual(cut[0].outputs[0].finish_reason, "stop")
        self.assertEqual(cut[0].outputs[0].stop_reason, stop)  # vLLM's: the stop string that matched
        self.assertIsNone(free.outputs[0].stop_reason)  # a length limit
        self.assertEqual(cut[0].outputs[0].text, text[:text.find(stop)])
        self.assertEqual(len(cut[1].outputs[0].token_ids), 1)
        # bad_words (vLLM's) reach the engine (which bans them token by token: engine_test's
        # BadWordsTest) and are validated here.
        banned = self.llm.generate("Once upon a time",
                                   SamplingParams(max_tokens=12, seed=9, ignore_eos=True, bad_words=[text.split()[0]]))[0]
        self.assertEqual(len(banned.outputs[0].token_ids), 12)
        with self.assertRaisesRegex(ValueError, "bad_words"):
            SamplingParams(bad_words=[" "])

    def test_chat_both_modes(self):
        conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
        for thinking in (False, True):
            out = self.llm.chat(conv, SamplingParams(max_tokens=6, seed=1, ignore_eos=True), thinking=thinking)[0]
            c = out.outputs[0]
            self.assertEqual(len(c.token_ids), 6)
            self.assertIsInstance(c.content, str)
            self.assertIsInstance(c.reasoning_content, str)
            if thinking:  # the reply starts inside <think>: text before any </think> is reasoning
                self.assertEqual(c.content, "")
            else:
                self.assertEqual(c.reasoning_content, "")
        batch = self.llm.chat([conv, conv], SamplingParams(max_tokens=2, seed=4))
        self.assertEqual(len(batch), 2)
        self.assertEqual(batch[0].outputs[0].token_ids, batch[1].outputs[0].token_ids)

    def test_stream_matches_generate(self):
        params = SamplingParams(max_tokens=6, seed=21, ignore_eos=True)
        deltas = list(self.llm.stream("Streaming test", params))
        self.assertEqual(deltas[-1].finish_reason, "length")
        tokens = [t for d in deltas for t in d.token_ids]
        full = self.llm.generate("Streaming test", params)[0].outputs[0]
        self.assertEqual(tokens, full.token_ids)
        self.assertEqual("".join(d.text for d in deltas), full.text)
        self.assertTrue(all(d.logprobs is None and d.prompt_logprobs is None for d in deltas))
        # Logprobs per delta token and the prompt's on the first delta, as generate gives them.
        lp = SamplingParams(max_tokens=6, seed=21, ignore_eos=True, logprobs=2, prompt_logprobs=1)
        deltas = list(self.llm.stream("Streaming test", lp))
        want = self.llm.generate("Streaming test", lp)[0]
        self.assertEqual([e for d in deltas for e in d.logprobs], want.outputs[0].logprobs)
        self.assertEqual(deltas[0].prompt_logprobs, want.prompt_logprobs)
        self.assertTrue(all(d.prompt_logprobs is None for d in deltas[1:]))

    def test_generate_releases_the_gil(self):
        ticks = []
        stop = threading.Event()

        def ticker():
            while not stop.is_set():
                ticks.append(1)
                stop.wait(0.005)

        t = threading.Thread(target=ticker)
        t.start()
        self.llm.generate(["a"] * 4, SamplingParams(max_tokens=8, seed=1, ignore_eos=True))
        stop.set()
        t.join()
        self.assertGreater(len(ticks), 3)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "top_p = 1.5"):
            SamplingParams(top_p=1.5)
        with self.assertRaisesRegex(ValueError, "unknown sampling|unexpected"):
            self.llm._engine.generate([{"prompt": "x", "sampling": {"temprature": 1.0}}])
        with self.assertRaisesRegex(ValueError, "outside the vocabulary"):
            self.llm.generate([[0, 10**6]])
        with self.assertRaisesRegex(ValueError, "prompt"):
            self.llm.generate([""])
        with self.assertRaisesRegex(ValueError, "unknown engine option"):
            LLM(model=MODEL, gpu_memory_utilisation=0.9)
        with self.assertRaisesRegex(RuntimeError, "Looked in"):
            LLM(model="no-such-org/no-such-model")
        with self.assertRaisesRegex(ValueError, "prompt_logprobs = 21"):
            self.llm.generate("x", SamplingParams(prompt_logprobs=21))

    def test_structured_outputs(self):
        so = deepinfer.StructuredOutputsParams(json={"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                     "required": ["ok"], "additionalProperties": False})
        out = self.llm.generate("JSON:", SamplingParams(max_tokens=20, seed=2, structured_outputs=so))[0].outputs[0]
        self.assertIn(out.text, ('{"ok":true}', '{"ok":false}'))
        self.assertEqual(out.finish_reason, "stop")
        with self.assertRaisesRegex(ValueError, "structured_output"):
            self.llm.generate("x", SamplingParams(structured_outputs={"regex": "(unclosed"}))

    def test_vllm_script_idioms(self):
        # SamplingParams lists are lists once constructed; a TokensPrompt may carry its text.
        p = SamplingParams(max_tokens=3, seed=1, ignore_eos=True)
        self.assertEqual((p.stop, p.stop_token_ids), ([], []))
        out = self.llm.generate([{"prompt_token_ids": [0, 100, 200], "prompt": "the text"}], p)[0]
        self.assertEqual(out.prompt, "the text")
        self.assertEqual(out.prompt_token_ids, [0, 100, 200])
        # The tokenizer as HF's is called; apply_chat_template is the chat encoding LLM.chat renders.
        tok = self.llm.get_tokenizer()
        self.assertEqual(tok("Hi")["input_ids"], tok.encode("Hi"))
        self.assertEqual(tok.batch_decode([tok.encode("Hi", add_special_tokens=False)]), ["Hi"])
        conv = [{"role": "user", "content": "Hi"}]
        text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
        self.assertTrue(text.startswith("<｜begin▁of▁sentence｜>") and text.endswith("<｜Assistant｜></think>"), text)
        chat = self.llm.chat(conv, p, chat_template_kwargs={"enable_thinking": True, "some_template_flag": 1})[0]
        self.assertEqual(chat.prompt_token_ids, tok.apply_chat_template(conv, enable_thinking=True))
        self.assertTrue(tok.decode(chat.prompt_token_ids).endswith("<｜Assistant｜><think>"))
        # Continuing the final (assistant) message instead of opening a new turn.
        prefill = conv + [{"role": "assistant", "content": "Sure, here"}]
        cont = self.llm.chat(prefill, p, add_generation_prompt=False, continue_final_message=True)[0]
        self.assertTrue(tok.decode(cont.prompt_token_ids).endswith("Sure, here"), tok.decode(cont.prompt_token_ids))
        with self.assertRaisesRegex(ValueError, "continue_final_message"):
            self.llm.chat(prefill, p, continue_final_message=True)
        # A choice among strings (vLLM's StructuredOutputsParams.choice).
        so = deepinfer.StructuredOutputsParams(choice=["yes", "no, thanks", "a.b*c"])
        picked = self.llm.generate("Answer:", SamplingParams(max_tokens=20, seed=3, structured_outputs=so))[0]
        self.assertIn(picked.outputs[0].text, ("yes", "no, thanks", "a.b*c"))
        with self.assertRaisesRegex(ValueError, "choice"):
            SamplingParams(structured_outputs={"choice": []})._structured_dict()

    def test_chat_structured_output_constrains_only_the_answer_in_thinking_mode(self):
        # The random model rarely closes its reasoning by itself: bias </think> (+10) and EOS.
        tok = self.llm.get_tokenizer()
        think_end = tok.encode("</think>", add_special_tokens=False)
        self.assertEqual(len(think_end), 1)
        schema = {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]}},
                  "required": ["city"], "additionalProperties": False}
        params = SamplingParams(max_tokens=120, seed=1, skip_special_tokens=False,
                                logit_bias={think_end[0]: 10.0, tok.eos_token_id: 100.0},
                                structured_outputs=deepinfer.StructuredOutputsParams(json=schema))
        out = self.llm.chat([{"role": "user", "content": "Pick a city, as JSON."}], params, thinking=True)[0].outputs[0]
        self.assertIn(think_end[0], out.token_ids)
        self.assertEqual(out.finish_reason, "stop")
        self.assertIn(json.loads(out.content)["city"], ("Paris", "Oslo", "Lima"))

    def test_v41_demo_model(self):
        # The embedded tiny V4.1-Flash (512-id vocabulary): token-id prompts, greedy, deterministic.
        v41 = LLM(model="demo-v41", kv_blocks=16, max_num_seqs=4)
        prompt = [0, 5, 9, 17, 33, 64, 100, 200, 300, 400, 401, 402]
        params = SamplingParams(max_tokens=6, temperature=0.0)
        first = v41.generate([prompt], params)[0].outputs[0]
        again = v41.generate([prompt], params)[0].outputs[0]
        self.assertEqual(len(first.token_ids), 6)
        self.assertTrue(all(0 <= t < 512 for t in first.token_ids))
        self.assertEqual(first.token_ids, again.token_ids)
        self.assertEqual(first.finish_reason, "length")
        # An image (vLLM's multi_modal_data) for the placeholder id 510: a 40 x 30 PNG, as bytes.
        def chunk(t, d):
            return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
        raw = b"".join(b"\x00" + bytes((x * 6 + y * 3 + c * 80) % 256 for x in range(40) for c in range(3))
                       for y in range(30))
        png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 40, 30, 8, 2, 0, 0, 0))
               + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
        with_image = {"prompt_token_ids": [0, 5, 510, 9, 17], "multi_modal_data": {"image": png}}
        out = v41.generate([with_image], params)[0]
        self.assertEqual(len(out.outputs[0].token_ids), 6)
        self.assertEqual(out.outputs[0].token_ids, v41.generate([with_image], params)[0].outputs[0].token_ids)
        with self.assertRaisesRegex(Exception, "images\\[0\\]"):
            v41.generate([{"prompt_token_ids": [0, 510, 9], "multi_modal_data": {"image": b"not an image"}}], params)
        with self.assertRaisesRegex(ValueError, "multi_modal_data"):
            v41.generate([{"prompt_token_ids": [0, 510], "multi_modal_data": {"video": png}}], params)

    def test_stats(self):
        s = self.llm.stats()
        self.assertGreater(s["requests_finished"], 0)
        self.assertEqual(s["num_running"], 0)

    def test_async_scheduling_option(self):
        # Steps planned ahead (the default) or each step waiting for the last one's tokens: the
        # same outputs; only the first plans ahead.
        params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=8, seed=21, ignore_eos=True, logprobs=2)
        prompts = ["Hello, my name is", "The capital of France is"]
        sync = LLM(model=MODEL, kv_blocks=32, max_num_seqs=8, async_scheduling=False)
        a = self.llm.generate(prompts, params)
        b = sync.generate(prompts, params)
        for x, y in zip(a, b):
            self.assertEqual(x.outputs[0].token_ids, y.outputs[0].token_ids)
            self.assertEqual(x.outputs[0].text, y.outputs[0].text)
        self.assertGreater(self.llm.stats()["steps_ahead"], 0)
        self.assertEqual(sync.stats()["steps_ahead"], 0)

    def test_speculative_decoding_options(self):
        # MTP drafts verified each step by the coupled rule: the outputs of decoding without them;
        # the counters move. Rejection sampling (the default): seeded, the same twice.
        params = SamplingParams(temperature=0.7, max_tokens=8, seed=22, ignore_eos=True, logprobs=2)
        prompts = ["Hello, my name is", "The capital of France is"]
        b = self.llm.generate(prompts, params)
        rejection = LLM(model=MODEL, kv_blocks=32, max_num_seqs=8, nextn_decode=2)
        r1, r2 = rejection.generate(prompts, params), rejection.generate(prompts, params)
        for x, y in zip(r1, r2):
            self.assertEqual(x.outputs[0].token_ids, y.outputs[0].token_ids)
            self.assertEqual(len(x.outputs[0].token_ids), 8)
        self.assertGreater(rejection.stats()["draft_rows"], 0)
        rejection.shutdown()
        with self.assertRaises(ValueError):
            LLM(model=MODEL, kv_blocks=32, nextn_decode=2, spec_verification="typical")
        for options in ({"nextn_decode": 2}, {"mtp_varlen": True, "draft_min_survival": 0.01}):
            spec = LLM(model=MODEL, kv_blocks=32, max_num_seqs=8, spec_verification="coupled", **options)
            a = spec.generate(prompts, params)
            for x, y in zip(a, b):
                self.assertEqual(x.outputs[0].token_ids, y.outputs[0].token_ids)
                self.assertEqual(x.outputs[0].text, y.outputs[0].text)
            s = spec.stats()
            self.assertGreaterEqual(s["draft_tokens"], s["accepted_draft_tokens"])
            if "nextn_decode" in options:  # fixed length: every decode step verifies drafts
                self.assertGreater(s["draft_rows"], 0)
            spec.shutdown()
        with self.assertRaises(ValueError):
            LLM(model=MODEL, kv_blocks=32, nextn_decode=2, draft_min_survival=1.5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
