"""The Python package against the command line: prepare writes the files `nobubble prepare` writes, the same run through nobubble.train and `nobubble train`
gives the same weights (summary.json), evaluate and sample give eval's loss and sample's text, train_iter yields the run's metrics as they are written, tokenize
and decode give `nobubble tokenize`'s ids and the text back, verify reports what `nobubble verify` prints (a damaged
file too), and bad input raises naming it.
Run by ctest (python_package) with NOBUBBLE_LIB (the built libnobubble.so) and NB_BIN (the binary)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nobubble  # noqa: E402

BIN = os.environ.get("NB_BIN", "")
TEXT = "".join("In the beginning God created the heaven and the earth. Paragraph %d.\n\nAnd the earth was "
               "without form, and void; and darkness was upon the face of the deep. %d\n\n" % (i, 7 * i)
               for i in range(1, 41))
SMALL = dict(steps=3, batch=2, seq=32, eval_batches=1, quiet=True, set={"n_layers": 2}, no_memory_check=True)


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="nb_python_")
        with open(os.path.join(cls.work, "text.txt"), "w") as f:
            f.write(TEXT)
        cls.data = os.path.join(cls.work, "data")
        subprocess.run([BIN, "prepare", "--quiet", "--input", os.path.join(cls.work, "text.txt"), "--vocab", "300",
                        "--val-fraction", "0.1", "--out", cls.data], check=True, stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def summary(self, run):
        with open(os.path.join(self.work, run, "summary.json")) as f:
            return json.load(f)

    def test_train_equals_the_command_line(self):
        settings = dict(SMALL)
        settings.pop("no_memory_check")
        result = nobubble.train(data=self.data, out=os.path.join(self.work, "py"), no_memory_check=True, **settings)
        self.assertEqual(result["steps"], 3)
        subprocess.run([BIN, "train", "--data", self.data, "--steps", "3", "--batch", "2", "--seq", "32",
                        "--eval-batches", "1", "--quiet", "--set", "n_layers=2", "--no-memory-check",
                        "--out", os.path.join(self.work, "cli")], check=True, stdout=subprocess.DEVNULL)
        py, cli = self.summary("py"), self.summary("cli")
        self.assertEqual(py["weights_hash"], cli["weights_hash"])
        self.assertEqual("%016x" % result["weights_hash"], py["weights_hash"])
        self.assertEqual(py["model"]["vocab_size"], 300)

    def test_evaluate_and_sample_equal_the_command_line(self):
        hf = os.path.join(self.work, "hf")
        nobubble.train(data=self.data, export=hf, **SMALL)
        mine = nobubble.evaluate(hf, data=self.data, batch=2, seq=32, batches=1)
        cli = json.loads(subprocess.run([BIN, "eval", "--checkpoint", hf, "--data", self.data, "--batch", "2", "--seq",
                                         "32", "--batches", "1", "--json"], check=True, capture_output=True,
                                        text=True).stdout)
        self.assertEqual("%.9g" % mine["val_loss"], "%.9g" % cli["val_loss"])   # eval prints 9 digits
        self.assertEqual(mine["tokens"], 64)
        text = nobubble.sample(hf, "In the beginning", tokens=12, temperature=0)
        out = subprocess.run([BIN, "sample", "--checkpoint", hf, "--prompt", "In the beginning", "--tokens", "12",
                              "--temperature", "0"], check=True, capture_output=True, text=True).stdout
        self.assertEqual("In the beginning" + text + "\n", out)
        pieces = []
        self.assertEqual(nobubble.sample(hf, "In the beginning", tokens=12, temperature=0, on_text=pieces.append),
                         "".join(pieces))
        with self.assertRaises(nobubble.Error) as e:
            nobubble.sample(hf, "x", tokens=100000)
        self.assertIn("context", str(e.exception))
        with self.assertRaises(TypeError):
            nobubble.evaluate(hf, batch="2")

    def test_train_iter_yields_metrics(self):
        out = os.path.join(self.work, "iter")
        it = nobubble.train_iter(data=self.data, out=out, **SMALL)
        steps = [m["step"] for m in it]
        self.assertEqual(steps, [1, 2, 3])

    def test_refusals(self):
        with self.assertRaises(nobubble.Error) as e:
            nobubble.train(data=self.data, batch=0, **{k: v for k, v in SMALL.items() if k != "batch"})
        self.assertIn("--batch 0", str(e.exception))
        with self.assertRaises(TypeError) as e:
            nobubble.train(data=self.data, steps=[3])
        self.assertIn("steps", str(e.exception))
        with self.assertRaises(nobubble.Error) as e:
            nobubble.train(data=self.data, optimizer="adamx", **SMALL)
        self.assertIn("adamx", str(e.exception))
        with self.assertRaises(nobubble.Error):
            nobubble.tokenize("x", data=os.path.join(self.work, "nowhere"))
        with self.assertRaises(TypeError):
            nobubble.tokenize(42, data=self.data)
        with self.assertRaises(ValueError):
            nobubble.decode([1, 300], data=self.data)

    def test_values_the_library_cannot_take(self):
        # a flag alone where it takes a value: the library's error (it segfaulted)
        with self.assertRaises(nobubble.Error) as e:
            nobubble.train(data=self.data, batch=True, **{k: v for k, v in SMALL.items() if k != "batch"})
        self.assertIn("--batch: expected a value", str(e.exception))
        # a NUL would end the C string: data=DIR\0junk trained on DIR
        with self.assertRaises(ValueError) as e:
            nobubble.train(data=self.data + "\0junk", **SMALL)
        self.assertIn("data", str(e.exception))
        with self.assertRaises(ValueError):
            nobubble.tokenize("x", data=self.data + "\0junk")
        # a C int keeps 32 bits: batch=2**32 + 1 ran with batch 1
        with self.assertRaises(ValueError) as e:
            nobubble.evaluate(os.path.join(self.work, "nowhere"), data=self.data, batch=2**32 + 1)
        self.assertIn("batch", str(e.exception))
        with self.assertRaises(ValueError):
            nobubble.sample(os.path.join(self.work, "nowhere"), "In the\0 beginning")

    def test_prepare_equals_the_command_line(self):
        mine, text = os.path.join(self.work, "pyprep"), os.path.join(self.work, "text.txt")
        r = nobubble.prepare(out=mine, inputs=text, vocab=300, val_fraction=0.1, quiet=True)
        self.assertEqual(sorted(os.listdir(mine)), sorted(os.listdir(self.data)))
        for name in os.listdir(self.data):   # shards, tokenizer.json, manifest.json: the same bytes
            with open(os.path.join(mine, name), "rb") as a, open(os.path.join(self.data, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        with open(os.path.join(mine, "manifest.json")) as f:
            split = json.load(f)["split"]
        self.assertEqual((r["train_docs"], r["val_docs"]), (split["train_documents"], split["val_documents"]))
        self.assertEqual(r["input_bytes"], len(TEXT.encode()))
        self.assertGreater(r["train_tokens"], r["val_tokens"])
        with self.assertRaises(nobubble.Error) as e:     # the folder exists: force replaces it
            nobubble.prepare(out=mine, inputs=[text], vocab=300, quiet=True)
        self.assertIn(mine, str(e.exception))
        self.assertEqual(nobubble.prepare(out=mine, inputs=[text], vocab=300, val_fraction=0.1, quiet=True,
                                          force=True)["train_docs"], r["train_docs"])
        with self.assertRaises(nobubble.Error) as e:
            nobubble.prepare(out=os.path.join(self.work, "p2"), inputs=[text], vocab=100, quiet=True)
        self.assertIn("--vocab 100", str(e.exception))
        with self.assertRaises(ValueError):
            nobubble.prepare(out=os.path.join(self.work, "p3"), inputs=[text], special_tokens="both")
        with self.assertRaises(TypeError):
            nobubble.prepare(inputs=[text])
        with self.assertRaises(ValueError):
            nobubble.prepare(out=os.path.join(self.work, "p4"), inputs=[text], corpus="bible")
        self.assertFalse(any(os.path.exists(os.path.join(self.work, p)) for p in ("p2", "p3", "p4")))

    def test_verify_equals_the_command_line(self):
        save, hf = os.path.join(self.work, "vsave"), os.path.join(self.work, "vhf")
        nobubble.train(data=self.data, save_dir=save, save_every=2, export=hf, **SMALL)

        def cli(*paths):
            out = subprocess.run([BIN, "verify", *paths], capture_output=True, text=True).stdout
            lines = [line for line in out.splitlines() if not line.startswith("verify: ")]
            return [dict(zip(("path", "ok", "message"), (p, s == "ok", m)))
                    for p, s, m in (line.split(": ", 2) for line in lines)]

        good = nobubble.verify(save) + nobubble.verify(hf)
        self.assertEqual(good, cli(save, hf))
        self.assertTrue(all(r["ok"] for r in good))
        self.assertIn({"path": save + "/step_000002", "ok": True,
                       "message": "the model loads (%d parameters, every tensor's name and shape as config.json "
                                  "says)" % self.summary_params(hf)}, good)
        self.assertEqual(sum(r["path"].endswith(".safetensors") for r in good), 5)   # 2 x (model, state), export
        damaged = os.path.join(self.work, "vbad")
        shutil.copytree(os.path.join(save, "step_000002"), damaged)
        state = os.path.join(damaged, "state.safetensors")
        with open(state, "r+b") as f:
            f.seek(-3, os.SEEK_END)
            byte = f.read(1)
            f.seek(-3, os.SEEK_END)
            f.write(bytes([byte[0] ^ 16]))
        bad = nobubble.verify(damaged)
        self.assertEqual(bad, cli(damaged))
        self.assertEqual([(r["path"], r["ok"]) for r in bad if not r["ok"]], [(state, False)])
        self.assertIn("checksum mismatch", [r for r in bad if not r["ok"]][0]["message"])
        gone = os.path.join(self.work, "nowhere")
        self.assertEqual(nobubble.verify(gone), [{"path": gone, "ok": False, "message": "no such file or folder"}])
        with self.assertRaises(TypeError):
            nobubble.verify(None)

    def summary_params(self, hf):
        with open(os.path.join(hf, "config.json")) as f:
            c = json.load(f)
        d, f_, v, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
        kv = c["num_key_value_heads"] * (d // c["num_attention_heads"])
        tied = c.get("tie_word_embeddings", False)
        return v * d * (1 if tied else 2) + L * (2 * d * d + 2 * d * kv + 3 * d * f_ + 2 * d) + d

    def test_tokenize_equals_the_command_line(self):
        text = "In the beginning <|endoftext|> Café"
        ids = nobubble.tokenize(text, data=self.data)
        cli = subprocess.run([BIN, "tokenize", "--data", self.data, "--text", text], check=True,
                             capture_output=True, text=True).stdout.split()
        self.assertEqual(ids, [int(i) for i in cli])
        self.assertEqual(nobubble.decode(ids, data=self.data), text)
        plain = nobubble.tokenize(text, data=self.data, special_as_text=True)
        self.assertGreater(len(plain), len(ids))


if __name__ == "__main__":
    unittest.main()
