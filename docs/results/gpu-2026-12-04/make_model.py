"""Save a random-weight model of SmolLM2-135M-Instruct's exact shape, with its real tokenizer, to argv[1]."""
import shutil
import sys
from pathlib import Path

import torch
import transformers

src = Path(__file__).parent / "smollm2-config"
out = Path(sys.argv[1])
torch.manual_seed(0)
config = transformers.AutoConfig.from_pretrained(str(src))
model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
model.save_pretrained(str(out))
for f in src.iterdir():
    if f.name != "config.json":
        shutil.copy(f, out / f.name)
print("params", sum(p.numel() for p in model.parameters()), "saved", sorted(p.name for p in out.iterdir()))
