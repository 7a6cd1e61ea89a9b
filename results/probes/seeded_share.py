"""Seeded sampling alone and batched, on one device: the share of tokens that agree.

    PYTHONPATH=<copy> python3 results/probes/seeded_share.py OUT.json

Each of 32 seeded requests (temperature 0.8, top-k 50, prompts of 8-64 ids from Python's
help text, 64 new tokens) is generated alone by generate(), and all of them are served
together by PagedEngine with graphs. The noise is the same (counter-based, keyed by
(seed, position)); only the logits' batch-size rounding differs (bf16 on a GPU). Reports the
share of requests whose tokens are identical and the share of tokens equal before each
request's first difference."""

import json
import pydoc_data.topics
import sys
from datetime import datetime, timezone

import torch

from tinyllm import PagedEngine, Tokenizer, generate, load_pretrained

model = load_pretrained()
device = next(model.parameters()).device
tok = Tokenizer()
topics = pydoc_data.topics.topics
ids = tok.encode("".join(topics[k] for k in sorted(topics)))
g = torch.Generator().manual_seed(0)
lens = torch.randint(8, 65, (32,), generator=g).tolist()
starts = torch.randint(0, len(ids) - 64, (32,), generator=g).tolist()
prompts = [ids[s : s + n] for s, n in zip(starts, lens)]
NEW, T, K = 64, 0.8, 50

alone = [
    generate(model, torch.tensor([p], device=device), NEW, temperature=T, top_k=K, seed=1000 + i)[
        0
    ].tolist()
    for i, p in enumerate(prompts)
]
engine = PagedEngine(model, 32)
rids = [engine.submit(p, NEW, temperature=T, top_k=K, seed=1000 + i) for i, p in enumerate(prompts)]
got = engine.run()
batched = [got[r] for r in rids]


def agree(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


same = [a == b for a, b in zip(alone, batched)]
prefix = [agree(a, b) for a, b in zip(alone, batched)]
out = {
    "provenance": {
        "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python3 results/probes/seeded_share.py OUT.json",
    },
    "requests": len(prompts),
    "new_tokens": NEW,
    "temperature": T,
    "top_k": K,
    "engine": {"name": "PagedEngine", "n_rows": 32, "use_graph": engine.use_graph},
    "identical_requests_share": sum(same) / len(same),
    "tokens_before_first_difference_share": sum(prefix) / sum(len(a) for a in alone),
    "first_difference": [p if not s else None for p, s in zip(prefix, same)],
}
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[1], "w"), indent=1)
