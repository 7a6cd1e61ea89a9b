"""Greedy tokens of the paged decoder (unfused and compiled) at batch 1 and 8, 256 new tokens
from the bench's prompts, into OUT.pt: run once with the package before rope_write_attend,
once after, and compare."""
import sys

import torch

from tinyllm import GraphDecoder, load_pretrained
from tinyllm.lab.prompts import prompt_batch

model = load_pretrained("cuda")
out = {}
for B in (1, 8):
    idx = prompt_batch(B, 32, "cuda")
    for compile in (False, True):
        out[(B, compile)] = GraphDecoder(model, B, kv="paged", compile=compile).generate(idx, 256).cpu()
torch.save(out, sys.argv[1])
