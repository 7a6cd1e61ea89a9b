"""Train the course's model on Python's own documentation.

    python -m tinyllm.train                       # "tiny" (use a GPU): ./tiny-trained.safetensors
    python -m tinyllm.train --preset toy --steps 30 --device cpu --out /tmp/toy.safetensors

A run never overwrites the shipped weights or model card (tinyllm/weights/) unless told to
with --replace-shipped, through any path to them (a symlink, a hard link); it never overwrites
an existing file unless told to with --force; every output is checked before training starts,
and each is written whole or not at all (a temporary file beside it, then renamed).

The text is pydoc_data.topics, the help() pages inside every CPython: nothing is
downloaded. Topics are split by sorted name (every tenth to validation), each topic ends
with an EOS token. The checkpoint with the best validation loss is kept: a model this size
starts to memorise the ~460 kB of training text soon after it reaches its best.
"""

import argparse
import copy
import hashlib
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

from tinyllm.checkpoint import (
    MODEL_CARD,
    PRETRAINED,
    same_file,
    save,
    validate_outputs,
    write_whole,
)
from tinyllm.config import PRESETS, get_config
from tinyllm.generation import complete
from tinyllm.model import Transformer
from tinyllm.precision import autocast, default_device
from tinyllm.tokenizer import Tokenizer


def topics_text() -> dict[str, str]:
    import pydoc_data.topics

    return dict(sorted(pydoc_data.topics.topics.items()))


def split_topics(topics: dict[str, str], every: int = 10) -> tuple[list[str], list[str]]:
    """Sorted topic names → (train names, validation names): every `every`-th to validation."""
    names = sorted(topics)
    return (
        [n for i, n in enumerate(names) if i % every != every - 1],
        [n for i, n in enumerate(names) if i % every == every - 1],
    )


def encode_topics(topics: dict[str, str], names: list[str]) -> torch.Tensor:
    tokenizer = Tokenizer()
    ids: list[int] = []
    for name in names:
        ids += tokenizer.encode(topics[name]) + [tokenizer.eos_id]
    return torch.tensor(ids, dtype=torch.long)


def random_batch(data: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator):
    starts = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=gen)
    x = torch.stack([data[s : s + seq_len] for s in starts])
    y = torch.stack([data[s + 1 : s + seq_len + 1] for s in starts])
    return x, y


@torch.no_grad()
def evaluate(
    model: Transformer, data: torch.Tensor, seq_len: int, device, batch: int = 16
) -> float:
    """Mean cross-entropy (nats per token; a token is a byte or a topic's EOS) over
    consecutive windows of the whole validation text."""
    model.eval()
    n = (len(data) - 1) // seq_len
    x = data[: n * seq_len].view(n, seq_len)
    y = data[1 : n * seq_len + 1].view(n, seq_len)
    total = 0.0
    for i in range(0, n, batch):
        with autocast(device):
            _, loss = model(x[i : i + batch].to(device), y[i : i + batch].to(device))
        total += loss.item() * len(x[i : i + batch])
    model.train()
    return total / n


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(
    preset: str,
    steps: int,
    batch: int,
    seq_len: int,
    lr: float,
    eval_every: int,
    device,
    seed: int = 0,
    max_minutes: float | None = None,
    log=print,
) -> tuple[Transformer, dict]:
    cfg = get_config(preset)
    seq_len = min(seq_len, cfg.max_seq_len)
    topics = topics_text()
    train_names, val_names = split_topics(topics)
    train_ids, val_ids = encode_topics(topics, train_names), encode_topics(topics, val_names)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Transformer(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    history = {"step": [], "train_loss": [], "val_loss": []}
    best = (float("inf"), 0, None)
    t0 = time.perf_counter()
    model.train()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=min(100, steps // 10 + 1))
        x, y = random_batch(train_ids, batch, seq_len, gen)
        with autocast(device):
            _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % eval_every == 0 or step == steps - 1:
            val = evaluate(model, val_ids, seq_len, device)
            history["step"].append(step)
            history["train_loss"].append(loss.item())
            history["val_loss"].append(val)
            log(
                f"step {step:5d}  train {loss.item():.3f}  val {val:.3f} nats/byte  "
                f"{time.perf_counter() - t0:.0f} s"
            )
            if val < best[0]:
                best = (val, step, copy.deepcopy(model.state_dict()))
            if max_minutes and time.perf_counter() - t0 > 60 * max_minutes:
                log(f"stopping at step {step}: --max-minutes {max_minutes} reached")
                steps = step + 1
                break
    model.load_state_dict(best[2])
    model.eval()
    info = {
        "preset": preset,
        "config": cfg.to_dict(),
        "n_params": model.n_params(),
        "steps": steps,
        "best_step": best[1],
        "batch": batch,
        "seq_len": seq_len,
        "lr": lr,
        "seed": seed,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "val_loss": round(best[0], 4),
        "train_loss": round(evaluate(model, train_ids, seq_len, device), 4),
        "train_bytes": len(train_ids),
        "val_bytes": len(val_ids),
        "n_train_topics": len(train_names),
        "n_val_topics": len(val_names),
        "python": platform.python_version(),
        "topics_sha256": hashlib.sha256(json.dumps(topics, sort_keys=True).encode()).hexdigest(),
        "torch": torch.__version__,
        "hardware": torch.cuda.get_device_name()
        if torch.device(device).type == "cuda"
        else platform.processor() or platform.machine(),
        "history": history,
    }
    return model, info


CARD = """# Model card: tinyllm "{preset}"

The model every notebook of the course loads with `tinyllm.load_pretrained()`.

| field | value |
| --- | --- |
| architecture | Llama-style decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU |
| parameters | {n_params:,} |
| config | `{config}` |
| tokenizer | bytes (ids 0-255), then eos 256 and pad 257 |
| data | `pydoc_data.topics` of CPython {python} (Python's help() pages), {n_train_topics} topics \
({train_bytes:,} tokens) for training, {n_val_topics} held out ({val_bytes:,} tokens): every tenth \
topic by sorted name |
| data sha256 | `{topics_sha256}` (JSON of the topics dict, sorted keys) |
| data licence | Python Software Foundation License (the CPython documentation) |
| training | AdamW, peak lr {lr}, batch {batch} × {seq_len} tokens, {steps} steps, seed {seed} |
| kept checkpoint | step {best_step}, the best validation loss |
| validation loss | {val_loss} nats per byte |
| training loss | {train_loss} nats per byte (the kept checkpoint, whole training text) |
| wall time | {wall_time_s} s |
| hardware | {hardware}, torch {torch} |
| date | {date} |
| command | `{command}` |
| weights | `tiny.safetensors`, bf16, {size:,} bytes |
| sha256 | `{sha256}` |

Greedy continuation of `"The for statement"`:

```
{sample}
```

Limits: a 3 M-parameter byte-level model of one small text. It writes text that looks
like Python's documentation; it does not know Python. It exists to be fast to decode.
"""


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-minutes", type=float, default=None, help="stop after this long")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument(
        "--out", default=None, help="weights to write (default: PRESET-trained.safetensors, here)"
    )
    p.add_argument(
        "--card", default=None, help=f"model card to write (the shipped model: {MODEL_CARD})"
    )
    p.add_argument("--log", default=None, help="write the training history as JSON here")
    p.add_argument(
        "--replace-shipped",
        action="store_true",
        help="allow writing over the shipped weights and model card (tinyllm/weights/)",
    )
    p.add_argument(
        "--force", action="store_true", help="allow writing over an existing --out, --card or --log"
    )
    args = p.parse_args(argv)
    args.out = args.out or f"{args.preset}-trained.safetensors"
    # checked before training starts: a run must not end with nowhere to write its result
    outputs = {f"--{flag}": getattr(args, flag) for flag in ("out", "card", "log")}
    if args.replace_shipped:  # each shipped file from its own flag only
        others = {
            "--out": (MODEL_CARD,),
            "--card": (PRETRAINED,),
            "--log": (PRETRAINED, MODEL_CARD),
        }
        for flag, value in outputs.items():
            other = next((f for f in others[flag] if value and same_file(value, f)), None)
            if other is not None:
                p.error(f"{flag} {value} is the shipped {other.name}: {flag} never writes it")
    validate_outputs(p, args.force, outputs, args.replace_shipped)
    device = torch.device(args.device) if args.device else default_device()
    model, info = train(
        args.preset,
        args.steps,
        args.batch,
        args.seq_len,
        args.lr,
        args.eval_every,
        device,
        args.seed,
        args.max_minutes,
    )
    info["sha256"] = save(model, args.out, extra={"val_loss": info["val_loss"]},
                          replace_shipped=args.replace_shipped, force=args.force)  # fmt: skip
    info["size"] = Path(args.out).stat().st_size
    info["command"] = "python -m tinyllm.train " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    info["date"] = time.strftime("%Y-%m-%d")
    info["sample"] = complete(
        model, ["The for statement"], max_new_tokens=min(300, model.cfg.max_seq_len - 17)
    )[0]
    print(
        f"best val loss {info['val_loss']} nats/byte at step {info['best_step']}; "
        f"wrote {args.out} ({info['size']:,} bytes, sha256 {info['sha256']})"
    )
    print("The for statement" + info["sample"])
    if args.card:
        card = CARD.format(**{k: v for k, v in info.items() if k != "history"})
        write_whole(Path(args.card), lambda partial: Path(partial).write_text(card))
    if args.log:
        log = json.dumps(info, indent=1)
        write_whole(Path(args.log), lambda partial: Path(partial).write_text(log))
    return info


if __name__ == "__main__":
    main()
